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
# include each other. A public header, include/ortfleet/<layer>/NAME.hpp, belongs to the room of its
# NAME.cpp and is checked as that room's files are; an include of it counts as an include of its room.
# Every folder of the layer is a room of the list, and every public header has its NAME.cpp. Checked
# when CMake configures, like the layers. SOURCE_DIR and INCLUDE_DIR (the folders holding <layer>/ and
# ortfleet/<layer>/) default to this tree's; tests/build/rooms_check.cmake points them at a scratch copy.
function(ortfleet_check_rooms layer rooms)
  cmake_parse_arguments(ARG "" "SOURCE_DIR;INCLUDE_DIR" "" ${ARGN})
  if(NOT ARG_SOURCE_DIR)
    set(ARG_SOURCE_DIR ${CMAKE_CURRENT_SOURCE_DIR})
  endif()
  if(NOT ARG_INCLUDE_DIR)
    set(ARG_INCLUDE_DIR ${PROJECT_SOURCE_DIR}/include)
  endif()
  get_filename_component(root ${ARG_INCLUDE_DIR} DIRECTORY)
  file(GLOB folders LIST_DIRECTORIES true ${ARG_SOURCE_DIR}/${layer}/*)
  foreach(folder IN LISTS folders)
    get_filename_component(name ${folder} NAME)
    if(IS_DIRECTORY ${folder} AND NOT name IN_LIST rooms)
      message(FATAL_ERROR "${layer}/${name}/ is no room of ${layer} (rooms, lowest first: ${rooms}). "
                          "Name it in ORTFLEET_ROOMS_${layer} (src/CMakeLists.txt) in its place, above the rooms it includes.")
    endif()
  endforeach()
  # The room of each public header: where its NAME.cpp is.
  foreach(room IN LISTS rooms)
    file(GLOB sources ${ARG_SOURCE_DIR}/${layer}/${room}/*.cpp)
    foreach(source IN LISTS sources)
      get_filename_component(name ${source} NAME_WE)
      set(room_of_${name} ${room})
    endforeach()
  endforeach()
  file(GLOB public_headers ${ARG_INCLUDE_DIR}/ortfleet/${layer}/*.hpp)
  foreach(header IN LISTS public_headers)
    get_filename_component(name ${header} NAME_WE)
    if(NOT DEFINED room_of_${name})
      file(RELATIVE_PATH rel ${root} ${header})
      message(FATAL_ERROR "${rel}: a public header belongs to the room of its ${name}.cpp, and no room of ${layer} has one. "
                          "Name the header after the file that implements it.")
    endif()
    list(APPEND public_of_${room_of_${name}} ${header})
  endforeach()
  set(below "")
  foreach(room IN LISTS rooms)
    list(APPEND below ${room})
    file(GLOB files ${ARG_SOURCE_DIR}/${layer}/${room}/*.cpp ${ARG_SOURCE_DIR}/${layer}/${room}/*.hpp)
    list(APPEND files ${public_of_${room}})
    foreach(file IN LISTS files)
      file(STRINGS ${file} includes REGEX "^#include [<\"](ortfleet/${layer}/[a-z_]+\\.hpp|${layer}/[a-z_]+/)")
      foreach(line IN LISTS includes)
        if(line MATCHES "^#include [<\"]ortfleet/${layer}/([a-z_]+)\\.hpp")
          set(target_room "${room_of_${CMAKE_MATCH_1}}")
        else()
          string(REGEX REPLACE "^#include [<\"]${layer}/([a-z_]+)/.*" "\\1" target_room "${line}")
        endif()
        if(target_room AND NOT target_room IN_LIST below)
          file(RELATIVE_PATH rel ${root} ${file})
          message(FATAL_ERROR "${rel}: '${line}' reaches up from room '${layer}/${room}' to '${layer}/${target_room}' "
                              "('${layer}/${room}' may use: ${below}). Move the declaration down, or the file up.")
        endif()
      endforeach()
    endforeach()
  endforeach()
endfunction()
