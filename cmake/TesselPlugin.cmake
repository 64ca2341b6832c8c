# tessel_add_plugin(NAME SOURCES...): builds a Tessel plugin as a MODULE shared object that exports only
# tessel_plugin_init (hidden visibility plus a version script). Used by the built-in plugins and, through
# the installed package config, by third-party plugins.
set(TESSEL_PLUGIN_VERSION_SCRIPT "${CMAKE_CURRENT_LIST_DIR}/tessel_plugin.map" CACHE INTERNAL "")

function(tessel_add_plugin name)
  cmake_parse_arguments(P "" "" "SOURCES;LIBS" ${ARGN})
  if(NOT P_SOURCES)
    set(P_SOURCES ${P_UNPARSED_ARGUMENTS})
  endif()
  add_library(${name} MODULE ${P_SOURCES})
  set_target_properties(${name} PROPERTIES
    PREFIX "lib"
    C_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden
    CUDA_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    LIBRARY_OUTPUT_DIRECTORY "${CMAKE_BINARY_DIR}/plugins")
  if(TARGET Tessel::sdk)
    target_link_libraries(${name} PRIVATE Tessel::sdk)
  elseif(TARGET tessel_sdk)
    target_link_libraries(${name} PRIVATE tessel_sdk)
  endif()
  target_link_libraries(${name} PRIVATE ${P_LIBS})
  target_link_options(${name} PRIVATE "LINKER:--version-script=${TESSEL_PLUGIN_VERSION_SCRIPT}"
                      "LINKER:--no-undefined")
endfunction()
