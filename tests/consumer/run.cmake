# Installs the build tree into a scratch prefix, then configures, builds and runs the consumer
# project against it. Variables: BUILD_DIR, SOURCE_DIR, WORK_DIR, CXX, CXX_FLAGS and
# LINKER_FLAGS (the build's own, e.g. sanitizers), GENERATOR and DEPENDENCY_DIRS
# (-D<package>_DIR=... arguments joined with '|').
string(REPLACE "|" ";" dependency_dirs "${DEPENDENCY_DIRS}")
file(REMOVE_RECURSE "${WORK_DIR}")
set(prefix "${WORK_DIR}/prefix")
function(step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE result)
  if(NOT result EQUAL 0)
    string(REPLACE ";" " " shown "${ARGN}")
    message(FATAL_ERROR "failed (${result}): ${shown}")
  endif()
endfunction()
step("${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${prefix}")
foreach(expected bin/dqntrader include/dqntrader/dqntrader/eval/path_evaluator.hpp
                 include/dqntrader/dqntrader/core/version.hpp)
  if(NOT EXISTS "${prefix}/${expected}")
    message(FATAL_ERROR "the install lacks ${expected}")
  endif()
endforeach()
file(GLOB config "${prefix}/lib*/cmake/dqntrader/dqntraderConfigVersion.cmake")
if(NOT config)
  message(FATAL_ERROR "the install lacks lib/cmake/dqntrader/dqntraderConfigVersion.cmake")
endif()
step("${CMAKE_COMMAND}" -S "${SOURCE_DIR}" -B "${WORK_DIR}/build" -G "${GENERATOR}"
     -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_COMPILER=${CXX}" "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}"
     "-DCMAKE_EXE_LINKER_FLAGS=${LINKER_FLAGS}"
     "-DCMAKE_PREFIX_PATH=${prefix}" ${dependency_dirs})
step("${CMAKE_COMMAND}" --build "${WORK_DIR}/build")
step("${WORK_DIR}/build/consumer")
