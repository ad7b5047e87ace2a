# TROUPE_VENDORED_ONLY: every third-party dependency comes from the carried
# third_party_local/ (scripts/vendor-gpu-deps) and nothing from /usr or
# /usr/local, as on the bare GPU machine. The CUDA toolkit, Python and the
# C/C++ runtime stay the system's: the GPU machine has those.
set(TROUPE_VENDOR_DIR "${CMAKE_SOURCE_DIR}/third_party_local" CACHE PATH "The carried third-party folder")
if(NOT EXISTS "${TROUPE_VENDOR_DIR}/MANIFEST")
  message(FATAL_ERROR "TROUPE_VENDORED_ONLY: ${TROUPE_VENDOR_DIR} is missing or incomplete (run scripts/vendor-gpu-deps)")
endif()
# The network edge: Boost and prometheus-cpp from TROUPE_NET_PREFIX, the
# /usr of the Debian archives in third_party_local/net-debs unpacked
# (scripts/gpu-check does it with dpkg -x).
set(TROUPE_NET_PREFIX "" CACHE PATH "With TROUPE_VENDORED_ONLY: where net-debs/ is unpacked (its usr folder)")
if(TROUPE_NET AND NOT EXISTS "${TROUPE_NET_PREFIX}/include/boost/version.hpp")
  message(FATAL_ERROR "TROUPE_VENDORED_ONLY: the network edge needs Boost and prometheus-cpp: unpack "
                      "third_party_local/net-debs/*.deb with dpkg -x and pass -DTROUPE_NET_PREFIX=<it>/usr, "
                      "or configure with -DTROUPE_NET=OFF")
endif()

# What the system rightly provides is found before its prefixes are hidden:
# Python (the CLI tests) and librt (FindCUDAToolkit asks for it).
find_package(Python3 COMPONENTS Interpreter)
find_library(CUDAToolkit_rt_LIBRARY rt)
if(Python3_EXECUTABLE)
  set(Python3_EXECUTABLE "${Python3_EXECUTABLE}" CACHE FILEPATH "" FORCE)
endif()

list(PREPEND CMAKE_PREFIX_PATH "${TROUPE_VENDOR_DIR}/prefix")
if(TROUPE_NET)
  list(APPEND CMAKE_PREFIX_PATH "${TROUPE_NET_PREFIX}")
  # prometheus-cpp's package config asks for civetweb, zlib and curl (its
  # pull and push parts), which Troupe does not use: the core library alone,
  # as the target its config would define.
  file(GLOB _troupe_prom_core "${TROUPE_NET_PREFIX}/lib/*/libprometheus-cpp-core.so")
  if(NOT _troupe_prom_core)
    message(FATAL_ERROR "TROUPE_VENDORED_ONLY: no libprometheus-cpp-core.so under ${TROUPE_NET_PREFIX}/lib")
  endif()
  add_library(prometheus-cpp::core SHARED IMPORTED)
  set_target_properties(prometheus-cpp::core PROPERTIES IMPORTED_LOCATION "${_troupe_prom_core}"
                        INTERFACE_INCLUDE_DIRECTORIES "${TROUPE_NET_PREFIX}/include")
endif()
# Hides every package, header and library under these prefixes from
# find_package/find_path/find_library (CMake >= 3.23; "/" covers /lib, which
# is /usr/lib on merged-/usr systems); /usr/local/cuda is a
# prefix of its own and stays visible.
list(APPEND CMAKE_IGNORE_PREFIX_PATH / /usr /usr/local /opt/local)
set(CAF_SOURCE_DIR "${TROUPE_VENDOR_DIR}/actor-framework")
message(STATUS "troupe: dependencies from ${TROUPE_VENDOR_DIR} only")
