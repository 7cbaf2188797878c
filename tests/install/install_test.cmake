# cmake -DBUILD=<nnfleet build> -DWORK=<scratch folder> -DCONSUMER=<consumer source>
#       -DVERSION=<x.y.z> -DGENERATOR=<generator> -DC_COMPILER=... -DCXX_COMPILER=...
#       -P install_test.cmake
# Installs BUILD into WORK/prefix (WORK removed first), configures, builds and runs the consumer
# against that prefix only, and checks that it printed the version.
foreach(var BUILD WORK CONSUMER VERSION GENERATOR C_COMPILER CXX_COMPILER)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "install_test.cmake: -D${var}=... is missing")
  endif()
endforeach()

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "install test: ${what} failed (${rc}):\n${out}")
  endif()
  set(out "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE "${WORK}")
set(prefix "${WORK}/prefix")
run("cmake --install" ${CMAKE_COMMAND} --install "${BUILD}" --prefix "${prefix}")
# Only the prefix: no package registry, so a stray nnfleet elsewhere cannot be the one found.
run("configuring the consumer"
    ${CMAKE_COMMAND} -S "${CONSUMER}" -B "${WORK}/consumer" -G "${GENERATOR}"
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=${C_COMPILER} -DCMAKE_CXX_COMPILER=${CXX_COMPILER}
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF)
string(FIND "${out}" "nnfleet_DIR=${prefix}/" at)
if(at EQUAL -1)
  message(FATAL_ERROR "install test: the consumer did not find nnfleet in ${prefix}:\n${out}")
endif()
run("building the consumer" ${CMAKE_COMMAND} --build "${WORK}/consumer")
run("running the consumer" "${WORK}/consumer/nnfleet_consumer")
message(STATUS "consumer: ${out}")
if(NOT out MATCHES "nnfleet ${VERSION}\n")
  message(FATAL_ERROR "install test: expected the consumer to print 'nnfleet ${VERSION}', "
                      "got:\n${out}")
endif()
if(NOT out MATCHES "refused as expected: failed to read Keras model")
  message(FATAL_ERROR "install test: expected the consumer to reach the engine (a FileError for "
                      "a missing model file), got:\n${out}")
endif()
