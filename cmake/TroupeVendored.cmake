# TROUPE_VENDORED_ONLY: every third-party dependency comes from the carried
# third_party_local/ (scripts/vendor-gpu-deps) and nothing from /usr or
# /usr/local, as on the bare GPU machine. The CUDA toolkit, Python and the
# C/C++ runtime stay the system's: the GPU machine has those.
set(TROUPE_VENDOR_DIR "${CMAKE_SOURCE_DIR}/third_party_local" CACHE PATH "The carried third-party folder")
if(NOT EXISTS "${TROUPE_VENDOR_DIR}/MANIFEST")
  message(FATAL_ERROR "TROUPE_VENDORED_ONLY: ${TROUPE_VENDOR_DIR} is missing or incomplete (run scripts/vendor-gpu-deps)")
endif()
if(TROUPE_NET)
  message(FATAL_ERROR "TROUPE_VENDORED_ONLY: the network edge needs Boost and prometheus-cpp, which are not vendored; "
                      "configure with -DTROUPE_NET=OFF")
endif()

# What the system rightly provides is found before its prefixes are hidden:
# Python (the CLI tests) and librt (FindCUDAToolkit asks for it).
find_package(Python3 COMPONENTS Interpreter)
find_library(CUDAToolkit_rt_LIBRARY rt)
if(Python3_EXECUTABLE)
  set(Python3_EXECUTABLE "${Python3_EXECUTABLE}" CACHE FILEPATH "" FORCE)
endif()

list(PREPEND CMAKE_PREFIX_PATH "${TROUPE_VENDOR_DIR}/prefix")
# Hides every package, header and library under these prefixes from
# find_package/find_path/find_library (CMake >= 3.23; "/" covers /lib, which
# is /usr/lib on merged-/usr systems); /usr/local/cuda is a
# prefix of its own and stays visible.
list(APPEND CMAKE_IGNORE_PREFIX_PATH / /usr /usr/local /opt/local)
set(CAF_SOURCE_DIR "${TROUPE_VENDOR_DIR}/actor-framework")
message(STATUS "troupe: dependencies from ${TROUPE_VENDOR_DIR} only")
