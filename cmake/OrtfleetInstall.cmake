# An install tree (bin/, lib/libortfleet.a, include/ortfleet, lib/cmake/ortfleet) lets the Python
# extension be built on another machine against a prebuilt library (python/CMakeLists.txt).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
install(TARGETS ortfleet EXPORT ortfleetTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY include/ortfleet DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT ortfleetTargets NAMESPACE ortfleet:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ortfleet)
# The package config also tells each executable linking ortfleet::ortfleet where the install's bin/ is
# (cmake/ortfleetConfig.cmake.in): a program's fleet starts the install's ortfleet-worker and loads its
# lib/onnxruntime, wherever the program itself lies (src/base/system_paths.cpp: own_binary_dir).
file(RELATIVE_PATH ORTFLEET_CONFIG_TO_BIN /prefix/${CMAKE_INSTALL_LIBDIR}/cmake/ortfleet /prefix/bin)
configure_file(${CMAKE_CURRENT_LIST_DIR}/ortfleetConfig.cmake.in ${CMAKE_CURRENT_BINARY_DIR}/ortfleetConfig.cmake @ONLY)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/ortfleetConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/ortfleetConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/ortfleetConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ortfleet)
# The charting library `ortfleet report` inlines, where the installed binary looks for it
# (share/ortfleet/web next to bin/), with its licence.
install(FILES ${ORTFLEET_FETCHED_WEB_DIR}/echarts.min.js ${ORTFLEET_FETCHED_WEB_DIR}/ECHARTS-LICENSE
              ${ORTFLEET_FETCHED_WEB_DIR}/ECHARTS-NOTICE
        DESTINATION ${CMAKE_INSTALL_DATADIR}/ortfleet/web OPTIONAL)
# What the installed binaries load, found relative to them (bin/../lib/onnxruntime, bin/../share/ortfleet):
# the ONNX Runtime the build staged (cmake/OrtfleetRelocatable.cmake), and the anchor script of `bench`.
install(DIRECTORY ${CMAKE_BINARY_DIR}/lib/onnxruntime/ DESTINATION lib/onnxruntime USE_SOURCE_PERMISSIONS OPTIONAL)
install(FILES ${PROJECT_SOURCE_DIR}/bench/anchors/onnxruntime_python.py DESTINATION ${CMAKE_INSTALL_DATADIR}/ortfleet)
# Man pages of the command line, where help2man is installed.
include(${CMAKE_CURRENT_LIST_DIR}/OrtfleetManPages.cmake)
