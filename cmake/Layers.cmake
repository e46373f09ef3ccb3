# The layers (docs/architecture.md). Each role folder is one static library
# that may use only the layers it names (and what those use), so that an
# include running upward fails to build:
#
#   ovt_layer(NAME USES lower... SOURCES files...)
#
# defines the library ovt_NAME from the current folder. Its sources see, as
# their include root, build/layers/NAME/: a folder of links to the layer's
# own folder and to the folders of the layers below it that it uses, and no
# other (a quoted include is looked up beside the including file first,
# then there). An upward `#include "trainer/state.h"` in kernels/ is then
# "No such file or directory". tests/layers/check_layers.py reads every
# #include against build/layers.txt, which lists the same table, and also
# fails on a circle between the files of one folder.
define_property(GLOBAL PROPERTY OVT_LAYERS BRIEF_DOCS "the layer table" FULL_DOCS "NAME FOLDER USES...")

function(ovt_layer name)
  cmake_parse_arguments(L "" "" "USES;SOURCES" ${ARGN})
  file(RELATIVE_PATH folder ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_SOURCE_DIR})
  set(visible ${folder})
  set(libs)
  foreach(u ${L_USES})
    if(NOT TARGET ovt_${u})
      message(FATAL_ERROR "layer ${name} uses ${u}, which is not defined yet: layers are added lowest first")
    endif()
    get_property(uv GLOBAL PROPERTY OVT_LAYER_VISIBLE_${u})
    list(APPEND visible ${uv})
    list(APPEND libs ovt_${u})
  endforeach()
  list(REMOVE_DUPLICATES visible)
  set_property(GLOBAL PROPERTY OVT_LAYER_VISIBLE_${name} ${visible})
  string(REPLACE ";" " " uses_text "${L_USES}")
  set_property(GLOBAL APPEND PROPERTY OVT_LAYERS "${name} ${folder} ${uses_text}")

  set(inc ${PROJECT_BINARY_DIR}/layers/${name})
  file(REMOVE_RECURSE ${inc})
  foreach(f ${visible})
    get_filename_component(parent ${inc}/${f} DIRECTORY)
    file(MAKE_DIRECTORY ${parent})
    file(CREATE_LINK ${PROJECT_SOURCE_DIR}/${f} ${inc}/${f} SYMBOLIC)
  endforeach()

  add_library(ovt_${name} STATIC ${L_SOURCES})
  target_include_directories(ovt_${name} PRIVATE ${inc})
  target_link_libraries(ovt_${name} PUBLIC ovt_deps ${libs})
endfunction()

# build/layers.txt: one line per layer, "NAME FOLDER USES...", lowest first.
function(ovt_write_layers)
  get_property(rows GLOBAL PROPERTY OVT_LAYERS)
  string(REPLACE ";" "\n" text "${rows}")
  file(WRITE ${PROJECT_BINARY_DIR}/layers.txt "${text}\n")
endfunction()
