# The CMake package, end to end (issue 13 item 7): install this build tree
# into a fresh prefix, configure tests/package/consumer against that prefix
# alone, build examples/minimal_generate.cpp with it and run it on a model.
#   cmake -DBUILD_DIR=B -DSOURCE_DIR=S -DWORK_DIR=W -DMODEL=M.gguf -DGENERATOR=Ninja
#         [-DLAUNCHER=ccache] -P check_package.cmake
foreach(var BUILD_DIR SOURCE_DIR WORK_DIR MODEL GENERATOR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "check_package: -D${var}=... is missing")
  endif()
endforeach()

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "check_package: ${what} failed (${rc}):\n${out}")
  endif()
  set(run_output "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)
run("cmake --install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
if(NOT EXISTS ${prefix}/lib/cmake/Troupe/TroupeConfig.cmake
   OR NOT EXISTS ${prefix}/lib/cmake/Troupe/TroupeConfigVersion.cmake
   OR NOT EXISTS ${prefix}/include/troupe/actors/pipeline.hpp)
  message(FATAL_ERROR "check_package: the install lacks TroupeConfig.cmake, its version file or the headers")
endif()

# A package that points back into the source or build tree would only work
# on this machine: no installed CMake file may name either.
file(GLOB cmake_files ${prefix}/lib/cmake/Troupe/*.cmake)
foreach(f IN LISTS cmake_files)
  file(READ ${f} text)
  foreach(tree ${SOURCE_DIR} ${BUILD_DIR})
    string(FIND "${text}" "${tree}/" at)
    if(NOT at EQUAL -1)
      message(FATAL_ERROR "check_package: ${f} names ${tree}")
    endif()
  endforeach()
endforeach()

set(launcher)
if(LAUNCHER)
  set(launcher -DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER})
endif()
run("configuring the consumer" ${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/package/consumer -B ${WORK_DIR}/consumer
    -G ${GENERATOR} -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=${prefix} ${launcher}
    -DTROUPE_EXAMPLE=${SOURCE_DIR}/examples/minimal_generate.cpp)
run("building the consumer" ${CMAKE_COMMAND} --build ${WORK_DIR}/consumer)
run("running the consumer" ${WORK_DIR}/consumer/consumer ${MODEL} "Once upon a time" 16)
message("${run_output}")
if(NOT run_output MATCHES "finish: (stop|length), [0-9]+ prompt \\+ [0-9]+ generated tokens")
  message(FATAL_ERROR "check_package: the consumer did not finish a generation")
endif()
