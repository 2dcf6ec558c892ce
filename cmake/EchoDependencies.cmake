# Third-party dependencies, all from distribution packages (scripts/install_deps.sh).
find_package(Eigen3 3.3 REQUIRED NO_MODULE)
find_package(OpenMP REQUIRED COMPONENTS CXX)
if(ECHO_PYTHON_ONLY)
  return()  # the reference library needs only Eigen and OpenMP
endif()
find_package(HDF5 REQUIRED COMPONENTS C CXX)
# JSON for spec files (echotk replay --spec-file), header-only.
find_package(nlohmann_json 3 REQUIRED)

# HDF5's find module gives variables; one interface target keeps the users simple.
add_library(echo_hdf5 INTERFACE)
target_include_directories(echo_hdf5 SYSTEM INTERFACE ${HDF5_INCLUDE_DIRS})
target_link_libraries(echo_hdf5 INTERFACE ${HDF5_CXX_LIBRARIES} ${HDF5_LIBRARIES})
target_compile_definitions(echo_hdf5 INTERFACE ${HDF5_DEFINITIONS})

# CLI11 is header-only: the package's config, or a copy of its headers in .deps/include
# (for machines where nothing can be installed).
find_package(CLI11 CONFIG QUIET)
if(NOT TARGET CLI11::CLI11)
  find_path(ECHO_CLI11_INCLUDE_DIR CLI/CLI.hpp HINTS ${PROJECT_SOURCE_DIR}/.deps/include REQUIRED)
  add_library(CLI11::CLI11 INTERFACE IMPORTED)
  target_include_directories(CLI11::CLI11 INTERFACE ${ECHO_CLI11_INCLUDE_DIR})
endif()
