# The layers of src/ may include only downwards (src/CMakeLists.txt lists them): a file of layer L
# may include "M/..." and "ortfleet/M/..." only for M = L or one of L's dependencies. Checked when
# CMake configures, so an include that runs up a layer fails the build, not a review.
function(ortfleet_check_layer layer allowed all_layers)
  set(ok ${layer} ${allowed})
  file(GLOB_RECURSE files ${CMAKE_CURRENT_SOURCE_DIR}/${layer}/*.cpp ${CMAKE_CURRENT_SOURCE_DIR}/${layer}/*.hpp
                  ${PROJECT_SOURCE_DIR}/include/ortfleet/${layer}/*.hpp)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${files})
  foreach(file IN LISTS files)
    file(STRINGS ${file} includes REGEX "^#include [<\"](ortfleet/)?[a-z_]+/")
    foreach(line IN LISTS includes)
      string(REGEX REPLACE "^#include [<\"](ortfleet/)?([a-z_]+)/.*" "\\2" target_layer "${line}")
      if(target_layer IN_LIST all_layers AND NOT target_layer IN_LIST ok)
        file(RELATIVE_PATH rel ${PROJECT_SOURCE_DIR} ${file})
        message(FATAL_ERROR "${rel}: '${line}' reaches up from layer '${layer}' to '${target_layer}' "
                            "('${layer}' may use: ${ok}). Move the declaration down, or the file up.")
      endif()
    endforeach()
  endforeach()
endfunction()

# Inside a layer, rooms (sub-folders) stand on each other in the order given, lowest first: a file of
# room R may include "layer/S/..." only for S = R or a room listed before R, so that no two rooms
# include each other. Checked when CMake configures, like the layers.
function(ortfleet_check_rooms layer rooms)
  set(below "")
  foreach(room IN LISTS rooms)
    list(APPEND below ${room})
    file(GLOB files ${CMAKE_CURRENT_SOURCE_DIR}/${layer}/${room}/*.cpp ${CMAKE_CURRENT_SOURCE_DIR}/${layer}/${room}/*.hpp)
    foreach(file IN LISTS files)
      file(STRINGS ${file} includes REGEX "^#include \"${layer}/[a-z_]+/")
      foreach(line IN LISTS includes)
        string(REGEX REPLACE "^#include \"${layer}/([a-z_]+)/.*" "\\1" target_room "${line}")
        if(NOT target_room IN_LIST below)
          file(RELATIVE_PATH rel ${PROJECT_SOURCE_DIR} ${file})
          message(FATAL_ERROR "${rel}: '${line}' reaches up from room '${layer}/${room}' to '${layer}/${target_room}' "
                              "('${layer}/${room}' may use: ${below}). Move the declaration down, or the file up.")
        endif()
      endforeach()
    endforeach()
  endforeach()
endfunction()
