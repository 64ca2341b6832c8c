# cmake -DBUILD_DIR=... -DSOURCE_DIR=... -DWORK_DIR=... -DNM=nm -P sdk_out_of_tree.cmake
# What a kernel author does: install the SDK, build plugins/example as a project of its own with
# find_package(Tessel) + tessel_add_plugin, and get a plugin that exports only tessel_plugin_init.
file(REMOVE_RECURSE "${WORK_DIR}")
set(prefix "${WORK_DIR}/prefix")
function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}\n${err}")
  endif()
endfunction()
run("installing the SDK" ${CMAKE_COMMAND} --install "${BUILD_DIR}" --component sdk --prefix "${prefix}")
foreach(f include/tessel/plugin.h lib/cmake/Tessel/TesselConfig.cmake lib/cmake/Tessel/TesselPlugin.cmake
          lib/cmake/Tessel/tessel_plugin.map lib/cmake/Tessel/TesselTargets.cmake)
  if(NOT EXISTS "${prefix}/${f}")
    message(FATAL_ERROR "the SDK install lacks ${f}")
  endif()
endforeach()
run("configuring the example out of tree" ${CMAKE_COMMAND} -S "${SOURCE_DIR}/plugins/example" -B "${WORK_DIR}/build"
    "-DCMAKE_PREFIX_PATH=${prefix}")
run("building the example out of tree" ${CMAKE_COMMAND} --build "${WORK_DIR}/build")
set(plugin "${WORK_DIR}/build/plugins/libtessel_example.so")
if(NOT EXISTS "${plugin}")
  message(FATAL_ERROR "the out-of-tree build did not produce ${plugin}")
endif()
run("checking the exports" ${CMAKE_COMMAND} -DNM=${NM} -DPLUGIN=${plugin}
    -P "${CMAKE_CURRENT_LIST_DIR}/check_exports.cmake")
message(STATUS "out-of-tree plugin built against the installed SDK: ${plugin}")
