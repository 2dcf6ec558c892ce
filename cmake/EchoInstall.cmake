# `cmake --install` ships the libraries, headers, echotk and a package for find_package(Echo).
include(CMakePackageConfigHelpers)
set(ECHO_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/Echo)
set(ECHO_EXPORTED_TARGETS echo_reference echo_cuda_can_implement)
if(TARGET echo_cuda)
  list(APPEND ECHO_EXPORTED_TARGETS echo_cuda)
endif()
install(TARGETS ${ECHO_EXPORTED_TARGETS} EXPORT EchoTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS echotk RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/reference/include/echo DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
if(TARGET echo_cuda AND EXISTS ${PROJECT_SOURCE_DIR}/cuda/include/echo)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/cuda/include/echo DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
else()
  install(FILES ${PROJECT_SOURCE_DIR}/cuda/include/echo/cuda/can_implement.h
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/echo/cuda)
endif()
install(EXPORT EchoTargets NAMESPACE Echo:: DESTINATION ${ECHO_INSTALL_CMAKEDIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/EchoConfig.cmake.in
  ${PROJECT_BINARY_DIR}/EchoConfig.cmake INSTALL_DESTINATION ${ECHO_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/EchoConfigVersion.cmake
  COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/EchoConfig.cmake ${PROJECT_BINARY_DIR}/EchoConfigVersion.cmake
  DESTINATION ${ECHO_INSTALL_CMAKEDIR})
