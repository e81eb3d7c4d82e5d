# Man pages from the command line's own --help: ortfleet(1) and ortfleet-SUBCOMMAND(1), made by
# help2man (Debian package help2man) through scripts/gen-man-pages.sh after the CLI is built, and
# installed into share/man/man1 by `cmake --install`. Without help2man the pages are skipped, saying so.
option(ORTFLEET_MAN_PAGES "Build and install man pages from the CLI's --help (needs help2man)" ON)
if(ORTFLEET_BUILD_TOOLS AND ORTFLEET_MAN_PAGES AND NOT CMAKE_CROSSCOMPILING)
  find_program(ORTFLEET_HELP2MAN help2man)
  if(ORTFLEET_HELP2MAN)
    set(_man_dir ${CMAKE_BINARY_DIR}/man/man1)
    # The sections --help cannot carry (exit status, environment, examples), included into the pages.
    file(GLOB _man_sections CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/scripts/man/*.h2m ${PROJECT_SOURCE_DIR}/scripts/man/examples/*.h2m)
    add_custom_command(
      OUTPUT ${_man_dir}/ortfleet.1
      COMMAND ${CMAKE_COMMAND} -E rm -rf ${_man_dir}
      COMMAND ${PROJECT_SOURCE_DIR}/scripts/gen-man-pages.sh $<TARGET_FILE:ortfleet_cli> ${_man_dir} ${PROJECT_VERSION}
      DEPENDS ortfleet_cli ${PROJECT_SOURCE_DIR}/scripts/gen-man-pages.sh ${_man_sections}
      COMMENT "Man pages from ortfleet --help (help2man)"
      VERBATIM)
    add_custom_target(ortfleet_man_pages ALL DEPENDS ${_man_dir}/ortfleet.1)
    install(DIRECTORY ${_man_dir}/ DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 FILES_MATCHING PATTERN "*.1")
  else()
    message(STATUS "help2man not found: no man pages (apt-get install help2man, or -DORTFLEET_MAN_PAGES=OFF)")
  endif()
endif()
