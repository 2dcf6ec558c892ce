# Boost.Test executables whose test cases each become one CTest test, discovered after the build
# the way gtest_discover_tests does, so `ctest -R` selects single cases and reports count them.
#
# Boost.Test comes as the compiled library when the distribution ships it, otherwise in its
# header-only form (the GPU machine has headers only). ECHO_HEADER_ONLY_BOOST_TEST forces the
# header-only form, so test executables built here also run on a machine without the library.
option(ECHO_HEADER_ONLY_BOOST_TEST "Use Boost.Test in its header-only form even where the library exists" OFF)
if(NOT ECHO_HEADER_ONLY_BOOST_TEST)
  find_package(Boost 1.71 QUIET COMPONENTS unit_test_framework)
endif()
add_library(echo_test_main OBJECT ${PROJECT_SOURCE_DIR}/tests/test_main.cpp)
if(Boost_UNIT_TEST_FRAMEWORK_FOUND)
  target_link_libraries(echo_test_main PUBLIC Boost::unit_test_framework)
  target_compile_definitions(echo_test_main PUBLIC BOOST_TEST_DYN_LINK)
else()
  find_path(ECHO_BOOST_INCLUDE_DIR boost/test/included/unit_test.hpp REQUIRED)
  target_include_directories(echo_test_main SYSTEM PUBLIC ${ECHO_BOOST_INCLUDE_DIR})
  target_compile_definitions(echo_test_main PRIVATE ECHO_BOOST_TEST_HEADER_ONLY)
  message(STATUS "Echo: using header-only Boost.Test")
endif()
target_include_directories(echo_test_main PUBLIC ${PROJECT_SOURCE_DIR}/tests)

set(ECHO_DISCOVER_SCRIPT ${CMAKE_CURRENT_LIST_DIR}/EchoDiscoverBoostTests.cmake)

# echo_add_boost_test(NAME name SOURCES files... [LIBRARIES libs...] [LABELS labels...])
function(echo_add_boost_test)
  cmake_parse_arguments(T "" "NAME" "SOURCES;LIBRARIES;LABELS" ${ARGN})
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE echo_test_main ${T_LIBRARIES})
  target_compile_definitions(${T_NAME} PRIVATE
    ECHO_SOURCE_DIR="${PROJECT_SOURCE_DIR}" ECHO_BINARY_DIR="${PROJECT_BINARY_DIR}")
  set(list_file ${CMAKE_CURRENT_BINARY_DIR}/${T_NAME}_tests.cmake)
  add_custom_command(TARGET ${T_NAME} POST_BUILD
    COMMAND ${CMAKE_COMMAND} -DTEST_EXECUTABLE=$<TARGET_FILE:${T_NAME}> -DTEST_PREFIX=${T_NAME}
            "-DTEST_LABELS=${T_LABELS}" -DOUTPUT_FILE=${list_file}
            -DWORKING_DIRECTORY=${PROJECT_SOURCE_DIR} -P ${ECHO_DISCOVER_SCRIPT}
    VERBATIM)
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${list_file})
endfunction()
