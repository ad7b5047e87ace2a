# Finds the C++ Actor Framework and defines CAF::core and CAF::io, either
#  - as Debian's libcaf-dev installs it (no CMake config, no pkg-config file), or
#  - built here from the sources in CAF_SOURCE_DIR (the carried
#    third_party_local/actor-framework, set by TROUPE_VENDORED_ONLY): core and
#    io as static libraries, no examples, tools, tests or optional modules.
if(CAF_SOURCE_DIR)
  if(NOT EXISTS "${CAF_SOURCE_DIR}/libcaf_core/caf/config.hpp")
    message(FATAL_ERROR "CAF_SOURCE_DIR ${CAF_SOURCE_DIR} holds no CAF sources (run scripts/vendor-gpu-deps)")
  endif()
  # A function, so CAF's switches and C++ standard stay in its own scope.
  function(_troupe_add_caf_sources src)
    foreach(flag NO_EXAMPLES NO_UNIT_TESTS NO_TOOLS NO_OPENSSL NO_OPENCL NO_PYTHON NO_SUMMARY BUILD_STATIC_ONLY)
      set(CAF_${flag} ON)
    endforeach()
    # C++11, as CAF's own build (and Debian's) compiles it: later standards
    # deprecate std::iterator and change which standard headers come along.
    # Its headers still compile in our C++20 files.
    set(CMAKE_CXX_STANDARD 11)
    set(CMAKE_CXX_EXTENSIONS OFF)
    # Its cmake_minimum_required(2.8.12) is refused by CMake 4 without this.
    set(CMAKE_POLICY_VERSION_MINIMUM 3.5)
    set(CMAKE_POLICY_DEFAULT_CMP0048 NEW)
    # SYSTEM: consumers see CAF's headers as system headers (no warnings from
    # them under -Wall -Werror), as with Debian's /usr/include copy.
    add_subdirectory("${src}" "${CMAKE_BINARY_DIR}/_caf" EXCLUDE_FROM_ALL SYSTEM)
    # Some of CAF 0.17's files use std::numeric_limits and the <cstdint>
    # types without including their headers, relying on other standard
    # headers to bring them, which newer libstdc++ (gcc 13) no longer does.
    foreach(lib libcaf_core_static libcaf_io_static)
      target_compile_options(${lib} PRIVATE "SHELL:-include cstdint" "SHELL:-include limits")
    endforeach()
  endfunction()
  if(NOT TARGET libcaf_core_static)
    _troupe_add_caf_sources("${CAF_SOURCE_DIR}")
  endif()
  file(STRINGS "${CAF_SOURCE_DIR}/libcaf_core/caf/config.hpp" _caf_version_line REGEX "^#define CAF_VERSION [0-9]+")
  set(CAF_INCLUDE_DIR "${CAF_SOURCE_DIR}/libcaf_core")
  set(CAF_CORE_LIBRARY libcaf_core_static)
  set(CAF_IO_LIBRARY libcaf_io_static)
else()
  find_path(CAF_INCLUDE_DIR caf/config.hpp)
  find_library(CAF_CORE_LIBRARY caf_core)
  find_library(CAF_IO_LIBRARY caf_io)
  if(CAF_INCLUDE_DIR AND EXISTS "${CAF_INCLUDE_DIR}/caf/config.hpp")
    file(STRINGS "${CAF_INCLUDE_DIR}/caf/config.hpp" _caf_version_line REGEX "^#define CAF_VERSION [0-9]+")
  endif()
endif()

if(_caf_version_line)
  string(REGEX REPLACE "^#define CAF_VERSION ([0-9]+).*" "\\1" _caf_v "${_caf_version_line}")
  math(EXPR _caf_major "${_caf_v} / 10000")
  math(EXPR _caf_minor "(${_caf_v} / 100) % 100")
  math(EXPR _caf_patch "${_caf_v} % 100")
  set(CAF_VERSION "${_caf_major}.${_caf_minor}.${_caf_patch}")
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(CAF
  REQUIRED_VARS CAF_INCLUDE_DIR CAF_CORE_LIBRARY CAF_IO_LIBRARY
  VERSION_VAR CAF_VERSION)

if(CAF_FOUND AND NOT TARGET CAF::core)
  if(CAF_SOURCE_DIR)
    # Interface targets over the static libraries, named as Debian's are.
    add_library(CAF::core INTERFACE IMPORTED GLOBAL)
    set_target_properties(CAF::core PROPERTIES INTERFACE_LINK_LIBRARIES libcaf_core_static)
    add_library(CAF::io INTERFACE IMPORTED GLOBAL)
    set_target_properties(CAF::io PROPERTIES INTERFACE_LINK_LIBRARIES "libcaf_io_static;CAF::core")
  else()
    add_library(CAF::core UNKNOWN IMPORTED)
    set_target_properties(CAF::core PROPERTIES
      IMPORTED_LOCATION "${CAF_CORE_LIBRARY}"
      INTERFACE_INCLUDE_DIRECTORIES "${CAF_INCLUDE_DIR}")
    add_library(CAF::io UNKNOWN IMPORTED)
    set_target_properties(CAF::io PROPERTIES
      IMPORTED_LOCATION "${CAF_IO_LIBRARY}"
      INTERFACE_INCLUDE_DIRECTORIES "${CAF_INCLUDE_DIR}"
      INTERFACE_LINK_LIBRARIES CAF::core)
  endif()
endif()
mark_as_advanced(CAF_INCLUDE_DIR CAF_CORE_LIBRARY CAF_IO_LIBRARY)
