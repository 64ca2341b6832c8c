# tessel_add_plugin(NAME SOURCES src... [LIBS lib...])
#
# Builds a Tessel plugin: a MODULE shared object named lib<NAME>.so in ${CMAKE_BINARY_DIR}/plugins that
# exports exactly one symbol, tessel_plugin_init. Everything else is hidden twice over: hidden visibility
# by default, and a version script (tessel_plugin.map, beside this file) that makes every other symbol
# local, including those of static libraries linked in. Undefined symbols fail the link (-z defs), so a
# missing dependency shows up at build time, not as a dlopen error on a worker.
#
# Used by the built-in plugins and, through find_package(Tessel), by plugins built out of tree. Name a
# plugin tessel_<something> so that it is found by the default search (libtessel_*.so).
if(CMAKE_VERSION VERSION_LESS 3.17)
  message(FATAL_ERROR "tessel_add_plugin needs CMake 3.17 or newer")
endif()

function(tessel_add_plugin name)
  cmake_parse_arguments(P "" "" "SOURCES;LIBS" ${ARGN})
  if(NOT P_SOURCES)
    set(P_SOURCES ${P_UNPARSED_ARGUMENTS})
  endif()
  if(NOT P_SOURCES)
    message(FATAL_ERROR "tessel_add_plugin(${name}): no SOURCES")
  endif()
  set(version_script "${CMAKE_CURRENT_FUNCTION_LIST_DIR}/tessel_plugin.map")
  add_library(${name} MODULE ${P_SOURCES})
  set_target_properties(${name} PROPERTIES
    PREFIX "lib"
    C_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden
    CUDA_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    LINK_DEPENDS "${version_script}"
    LIBRARY_OUTPUT_DIRECTORY "${CMAKE_BINARY_DIR}/plugins")
  if(TARGET Tessel::sdk)
    target_link_libraries(${name} PRIVATE Tessel::sdk)
  elseif(TARGET tessel_sdk)
    target_link_libraries(${name} PRIVATE tessel_sdk)
  else()
    message(FATAL_ERROR "tessel_add_plugin(${name}): no Tessel::sdk target; call find_package(Tessel) first")
  endif()
  target_link_libraries(${name} PRIVATE ${P_LIBS})
  target_link_options(${name} PRIVATE "LINKER:--version-script=${version_script}" "LINKER:--no-undefined")
endfunction()
