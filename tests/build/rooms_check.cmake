# cmake -DROOT=<checkout> -DWORK=<scratch folder> -DLAYER=engine "-DROOMS=core;shapes;..." -DCASE=<case> -P rooms_check.cmake
#
# Runs the build's room check (cmake/OrtfleetLayers.cmake: ortfleet_check_rooms) on a scratch copy of
# src/<LAYER> and include/ortfleet/<LAYER> with one thing planted, so that a test proves the check fails
# where it must (tests/CMakeLists.txt: build.rooms_*). CASE:
#   sound          nothing planted: the copy passes ("rooms sound")
#   up_room        the lowest room's first source includes the highest room's first header
#   up_public      the lowest room's first public header includes the highest room's first public header
#   homeless       a public header that no source of any room implements
#   unknown_room   a folder the room list does not name
cmake_minimum_required(VERSION 3.25)
include(${ROOT}/cmake/OrtfleetLayers.cmake)
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK}/src ${WORK}/include/ortfleet)
file(COPY ${ROOT}/src/${LAYER} DESTINATION ${WORK}/src)
file(COPY ${ROOT}/include/ortfleet/${LAYER} DESTINATION ${WORK}/include/ortfleet)
list(GET ROOMS 0 lowest)
list(GET ROOMS -1 highest)

# The public headers of `room`: those whose NAME.cpp is there.
function(public_headers_of room out)
  set(found "")
  file(GLOB headers ${WORK}/include/ortfleet/${LAYER}/*.hpp)
  foreach(header IN LISTS headers)
    get_filename_component(name ${header} NAME_WE)
    if(EXISTS ${WORK}/src/${LAYER}/${room}/${name}.cpp)
      list(APPEND found ${header})
    endif()
  endforeach()
  set(${out} ${found} PARENT_SCOPE)
endfunction()

if(CASE STREQUAL "up_room")
  file(GLOB sources ${WORK}/src/${LAYER}/${lowest}/*.cpp)
  file(GLOB targets ${WORK}/src/${LAYER}/${highest}/*.hpp ${WORK}/src/${LAYER}/${highest}/*.cpp)
  list(GET sources 0 source)
  list(GET targets 0 target)
  get_filename_component(name ${target} NAME_WE)
  file(APPEND ${source} "#include \"${LAYER}/${highest}/${name}.hpp\"\n")
elseif(CASE STREQUAL "up_public")
  public_headers_of(${lowest} low)
  public_headers_of(${highest} high)
  list(GET low 0 header)
  list(GET high 0 target)
  get_filename_component(name ${target} NAME)
  file(APPEND ${header} "#include \"ortfleet/${LAYER}/${name}\"\n")
elseif(CASE STREQUAL "homeless")
  file(WRITE ${WORK}/include/ortfleet/${LAYER}/nowhere_implemented.hpp "#pragma once\n")
elseif(CASE STREQUAL "unknown_room")
  file(WRITE ${WORK}/src/${LAYER}/attic/old.cpp "int old();\n")
elseif(NOT CASE STREQUAL "sound")
  message(FATAL_ERROR "unknown CASE '${CASE}'")
endif()
ortfleet_check_rooms(${LAYER} "${ROOMS}" SOURCE_DIR ${WORK}/src INCLUDE_DIR ${WORK}/include)
file(REMOVE_RECURSE ${WORK})
message("rooms sound")
