# `cmake --install BUILD [--prefix P]` lays out a package that another CMake
# project finds with find_package(Troupe):
#   P/include/troupe/<folder>/*.hpp      headers, included as "actors/pipeline.hpp"
#   P/lib/libtroupe_*.a                  the static libraries
#   P/lib/cmake/Troupe/                  TroupeConfig.cmake, its version file,
#                                        TroupeTargets.cmake, FindCAF.cmake
#   P/bin/troupe, troupe-make-model      the CLI
# Targets: Troupe::troupe (the library API, actors/pipeline.hpp), and one per
# layer: Troupe::core, ::telemetry, ::memory, ::kernels, ::tokenizer, ::model,
# ::vision, ::actors, ::net, ::experiments (and ::cuda in a CUDA build).
include(CMakePackageConfigHelpers)

# A CAF built here from its sources (the GPU machine's vendored build, the
# tsan preset) is a subproject whose targets cannot be exported; those builds
# are not meant to be installed.
if(TROUPE_VENDORED_ONLY OR CAF_SOURCE_DIR)
  message(STATUS "troupe: CAF built from source: no install rules")
  return()
endif()

set(_troupe_libs)
set(_troupe_header_dirs)
foreach(layer core telemetry memory kernels tokenizer grammar model cuda vision actors net experiments)
  if(TARGET troupe_${layer})
    list(APPEND _troupe_libs troupe_${layer})
    list(APPEND _troupe_header_dirs ${layer})
  endif()
endforeach()

# Troupe::troupe: what an application of the engine links (examples/).
add_library(troupe_sdk INTERFACE)
if(TARGET troupe_actors)
  target_link_libraries(troupe_sdk INTERFACE troupe_actors)
else()
  target_link_libraries(troupe_sdk INTERFACE troupe_model)
endif()
set_target_properties(troupe_sdk PROPERTIES EXPORT_NAME troupe)
add_library(Troupe::troupe ALIAS troupe_sdk)

# Static libraries built with ASan/UBSan need the runtime at the consumer's link.
if(TROUPE_SANITIZE)
  target_link_options(troupe_core INTERFACE $<INSTALL_INTERFACE:-fsanitize=address,undefined>)
endif()

# (The include directory comes from each library's INSTALL_INTERFACE.)
install(TARGETS ${_troupe_libs} troupe_sdk EXPORT TroupeTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
foreach(dir IN LISTS _troupe_header_dirs)
  install(DIRECTORY ${CMAKE_SOURCE_DIR}/${dir}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/troupe/${dir}
          FILES_MATCHING PATTERN "*.hpp" PATTERN "*.h" PATTERN "*.cuh")
endforeach()
foreach(exe troupe troupe-make-model)
  if(TARGET ${exe})
    install(TARGETS ${exe} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  endif()
endforeach()

set(_troupe_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/Troupe)
install(EXPORT TroupeTargets NAMESPACE Troupe:: DESTINATION ${_troupe_cmake_dir})

# What TroupeConfig.cmake must find again (the libraries' public and
# link-only dependencies), as switches substituted into the template.
set(TROUPE_PACKAGE_HAS_CUDA ${TROUPE_HAVE_CUDA})
set(TROUPE_PACKAGE_HAS_ACTORS OFF)
if(TARGET troupe_actors)
  set(TROUPE_PACKAGE_HAS_ACTORS ON)
endif()
set(TROUPE_PACKAGE_HAS_IMAGE_CODECS OFF)
if(TARGET troupe_vision AND PNG_FOUND AND JPEG_FOUND)
  set(TROUPE_PACKAGE_HAS_IMAGE_CODECS ON)
endif()
set(TROUPE_PACKAGE_HAS_NET OFF)
if(TARGET troupe_net)
  set(TROUPE_PACKAGE_HAS_NET ON)
endif()
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/TroupeConfig.cmake.in
  ${CMAKE_BINARY_DIR}/package/TroupeConfig.cmake
  INSTALL_DESTINATION ${_troupe_cmake_dir})
# 0.x: a minor version may break the API, so only the same minor matches.
write_basic_package_version_file(${CMAKE_BINARY_DIR}/package/TroupeConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/package/TroupeConfig.cmake
              ${CMAKE_BINARY_DIR}/package/TroupeConfigVersion.cmake
              ${CMAKE_CURRENT_LIST_DIR}/FindCAF.cmake
        DESTINATION ${_troupe_cmake_dir})
