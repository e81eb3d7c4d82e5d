# A build tree laid out as an installation: what the binaries load at run time lies beside them, found
# relative to where they are (src/base/system_paths.cpp: own_binary_dir), so that a copied checkout, a
# moved build/ and an installed prefix (cmake --install) each run without the checkout's .deps/:
#   <build>/bin/                        ortfleet, ortfleet-worker, libortfleet_cudnn.so
#   <build>/lib/onnxruntime/            the ONNX Runtime the set-up fetched (.deps/onnxruntime/lib)
#   <build>/share/ortfleet/web/         the charting library of `ortfleet report`
#   <build>/share/ortfleet/onnxruntime_python.py   the anchor script of `ortfleet bench`
#   <build>/python/ortfleet/lib/onnxruntime/       the same runtime, in the Python package
# The files are hard links where the file system allows (no second copy on disk), else copies. They
# are staged at every build, not once at configure time: a runtime fetched again (another version, the
# GPU layout: scripts/fetch-onnxruntime.sh replaces its folder) is staged by the next build, and a
# build whose .deps/ has gone keeps what it staged. docs/getting-started.md gives the search order.
set(_stage -P ${CMAKE_CURRENT_LIST_DIR}/OrtfleetStageFiles.cmake)
set(_commands
  COMMAND ${CMAKE_COMMAND} -DFROM=${ORTFLEET_FETCHED_ORT_DIR}/lib -DTO=${CMAKE_BINARY_DIR}/lib/onnxruntime ${_stage}
  COMMAND ${CMAKE_COMMAND} -DFROM=${ORTFLEET_FETCHED_WEB_DIR} -DTO=${CMAKE_BINARY_DIR}/share/ortfleet/web
          -DFILES=echarts.min.js,ECHARTS-LICENSE,ECHARTS-NOTICE ${_stage}
  COMMAND ${CMAKE_COMMAND} -DFROM=${PROJECT_SOURCE_DIR}/bench/anchors -DTO=${CMAKE_BINARY_DIR}/share/ortfleet
          -DFILES=onnxruntime_python.py ${_stage})
if(TARGET ortfleet_python)
  list(APPEND _commands
    COMMAND ${CMAKE_COMMAND} -DFROM=${ORTFLEET_FETCHED_ORT_DIR}/lib -DTO=${CMAKE_BINARY_DIR}/python/ortfleet/lib/onnxruntime ${_stage})
endif()
add_custom_target(ortfleet_stage_beside_binaries ALL ${_commands}
  COMMENT "Staging ONNX Runtime and the data files beside the binaries (lib/onnxruntime, share/ortfleet)"
  VERBATIM)
# Whatever is built alone (the Python package for `pip install .`, the command line for a test) finds them.
foreach(_target ortfleet_cli ortfleet_worker ortfleet_python)
  if(TARGET ${_target})
    add_dependencies(${_target} ortfleet_stage_beside_binaries)
  endif()
endforeach()
