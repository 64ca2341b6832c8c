# cmake -DBUILD_DIR=... -DSOURCE_DIR=... -DWORK_DIR=... -DNM=nm -P sdk_out_of_tree.cmake
# What a kernel author does: install Tessel (the SDK, bin/tessel and the built-in plugins), copy
# plugins/example out of the tree, build it as a project of its own with find_package(Tessel 1.1) +
# tessel_add_plugin against that prefix only, get a plugin that exports only tessel_plugin_init, pass the
# installed `tessel plugin check`, and run a job with the installed tessel, from another directory, with
# the plugin loaded beside the built-ins. A plugin that asks for an ABI major the SDK is not (2.0) does
# not configure.
file(REMOVE_RECURSE "${WORK_DIR}")
set(prefix "${WORK_DIR}/prefix")
function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}\n${err}")
  endif()
endfunction()
run("installing Tessel" ${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${prefix}")
foreach(f include/tessel/plugin.h include/tessel/ops/nn.h lib/cmake/Tessel/TesselConfig.cmake
          lib/cmake/Tessel/TesselConfigVersion.cmake lib/cmake/Tessel/TesselPlugin.cmake
          lib/cmake/Tessel/tessel_plugin.map lib/cmake/Tessel/TesselTargets.cmake bin/tessel
          lib/tessel/plugins/libtessel_nn.so lib/tessel/plugins/libtessel_rgnn.so)
  if(NOT EXISTS "${prefix}/${f}")
    message(FATAL_ERROR "the install lacks ${f}")
  endif()
endforeach()
# Out of the tree: a copy, configured against the prefix only.
file(COPY "${SOURCE_DIR}/plugins/example/" DESTINATION "${WORK_DIR}/src")
run("configuring the example out of tree" ${CMAKE_COMMAND} -S "${WORK_DIR}/src" -B "${WORK_DIR}/build"
    "-DCMAKE_PREFIX_PATH=${prefix}")
run("building the example out of tree" ${CMAKE_COMMAND} --build "${WORK_DIR}/build")
set(plugin "${WORK_DIR}/build/plugins/libtessel_example.so")
if(NOT EXISTS "${plugin}")
  message(FATAL_ERROR "the out-of-tree build did not produce ${plugin}")
endif()
run("checking the exports" ${CMAKE_COMMAND} -DNM=${NM} -DPLUGIN=${plugin}
    -P "${CMAKE_CURRENT_LIST_DIR}/check_exports.cmake")
set(tessel "${prefix}/bin/tessel")
execute_process(COMMAND "${tessel}" plugin check "${plugin}" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "loads: example .*ABI 1\\.1.*PASS")
  message(FATAL_ERROR "the installed tessel plugin check (${rc}):\n${out}\n${err}")
endif()
# A job with the installed tessel, run from a directory of its own: the built-ins from the prefix, and
# the example beside them.
file(MAKE_DIRECTORY "${WORK_DIR}/job")
file(COPY "${SOURCE_DIR}/jobs/examples/gpt-demo.toml" DESTINATION "${WORK_DIR}/job")
execute_process(COMMAND "${tessel}" run gpt-demo.toml --set train.steps=3 --set train.warmup_steps=1
                        --set train.val_every=0 --set metrics.port_base=0 --set job.output_dir=out
                        "--set" "plugins.paths=[\"${plugin}\"]"
                        "--set" "plugins.search_dirs=[\"${prefix}/lib/tessel/plugins\"]"
                WORKING_DIRECTORY "${WORK_DIR}/job" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT err MATCHES "loaded plugin [^ ]*build/plugins/libtessel_example.so"
   OR NOT err MATCHES "loaded plugin ${prefix}/lib/tessel/plugins/libtessel_nn.so"
   OR NOT EXISTS "${WORK_DIR}/job/out/summary.json")
  message(FATAL_ERROR "a job with the installed tessel (${rc}):\n${out}\n${err}")
endif()
# An ABI the SDK does not serve: find_package fails at configure time, naming the versions.
file(WRITE "${WORK_DIR}/abi2/CMakeLists.txt"
     "cmake_minimum_required(VERSION 3.20)\nproject(abi2 LANGUAGES CXX)\nfind_package(Tessel 2.0 REQUIRED)\n")
execute_process(COMMAND ${CMAKE_COMMAND} -S "${WORK_DIR}/abi2" -B "${WORK_DIR}/abi2/build" "-DCMAKE_PREFIX_PATH=${prefix}"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT err MATCHES "version: 1\\.1")
  message(FATAL_ERROR "find_package(Tessel 2.0) against a 1.1 SDK should fail naming 1.1 (${rc}):\n${out}\n${err}")
endif()
message(STATUS "out-of-tree plugin built against the installed SDK, checked and loaded by the installed tessel: ${plugin}")
