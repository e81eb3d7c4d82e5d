# Third-party pieces, all from Debian 12 packages (README.md says why each is here).
find_package(Threads REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)   # JSON reports, config files, worker protocol
find_package(fmt 9 REQUIRED)                # formatting
find_package(spdlog 1.10 REQUIRED)          # progress and diagnostic logging
find_package(ZLIB)                          # compressed .npz warm-up inputs (optional: stored .npz needs none)
if(ORTFLEET_BUILD_TOOLS)
  find_package(CLI11 2.1 REQUIRED)          # command-line parsing
endif()

# fmt and spdlog are linked into libortfleet rather than from Debian's shared libraries, so that our
# binaries and the Python extension carry no shared-library dependencies beyond libc/libstdc++: the same
# build runs on the GPU machine. They are compiled once (src/base/fmt_spdlog.cpp), not header-only: in
# header-only mode every file that logs or formats compiles their implementation again, which made each
# of our files about 10 s slower to build at -O3 (issue 46, the set-up's time).
add_library(ortfleet_fmt_spdlog INTERFACE)
target_link_libraries(ortfleet_fmt_spdlog INTERFACE Threads::Threads)
target_compile_definitions(ortfleet_fmt_spdlog INTERFACE SPDLOG_FMT_EXTERNAL SPDLOG_COMPILED_LIB)
get_target_property(_fmt_includes fmt::fmt-header-only INTERFACE_INCLUDE_DIRECTORIES)
get_target_property(_spdlog_includes spdlog::spdlog_header_only INTERFACE_INCLUDE_DIRECTORIES)
target_include_directories(ortfleet_fmt_spdlog SYSTEM INTERFACE ${_fmt_includes} ${_spdlog_includes})

# ONNX Runtime headers only: the library itself is loaded with dlopen at run time
# (src/runtime.cpp), so one build works with whichever ONNX Runtime >= 1.29 the user has.
set(ORTFLEET_ORT_ROOT "$ENV{ORTFLEET_ORT_ROOT}" CACHE PATH
    "ONNX Runtime folder with include/ (default: the copy scripts/fetch-onnxruntime.sh fetched)")
find_path(ORTFLEET_ORT_INCLUDE_DIR onnxruntime_cxx_api.h
          HINTS ${ORTFLEET_ORT_ROOT}/include ${ORTFLEET_ORT_ROOT}/include/onnxruntime
                ${CMAKE_CURRENT_SOURCE_DIR}/.deps/onnxruntime/include
          NO_DEFAULT_PATH)
if(NOT ORTFLEET_ORT_INCLUDE_DIR)
  message(FATAL_ERROR "ONNX Runtime headers not found. Run scripts/fetch-onnxruntime.sh, "
                      "or pass -DORTFLEET_ORT_ROOT=<folder with include/onnxruntime_cxx_api.h>.")
endif()
add_library(ortfleet_ort_headers INTERFACE)
target_include_directories(ortfleet_ort_headers SYSTEM INTERFACE ${ORTFLEET_ORT_INCLUDE_DIR})
# All our translation units use the C++ API over a runtime we load ourselves.
target_compile_definitions(ortfleet_ort_headers INTERFACE ORT_API_MANUAL_INIT)

# Where the set-up put ONNX Runtime: the runtime search (src/runtime.cpp) looks here after
# --ort-lib, ORTFLEET_ORT_LIB and ORTFLEET_ORT_ROOT.
set(ORTFLEET_FETCHED_ORT_DIR "${CMAKE_CURRENT_SOURCE_DIR}/.deps/onnxruntime" CACHE PATH
    "Folder of the ONNX Runtime copy fetched by the set-up")

# Apache ECharts, which `ortfleet report` inlines into its pages (scripts/fetch-web-assets.sh fetches
# it; README.md says why this library). Needed only when a report is made, so its absence is a warning.
set(ORTFLEET_FETCHED_WEB_DIR "${CMAKE_CURRENT_SOURCE_DIR}/.deps/web" CACHE PATH
    "Folder of the charting library fetched by the set-up (echarts.min.js)")
if(NOT EXISTS "${ORTFLEET_FETCHED_WEB_DIR}/echarts.min.js")
  message(WARNING "${ORTFLEET_FETCHED_WEB_DIR}/echarts.min.js is missing: `ortfleet report` and --html will fail "
                  "until you run scripts/fetch-web-assets.sh")
endif()
