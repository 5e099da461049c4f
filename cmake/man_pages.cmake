# SPDX-License-Identifier: Apache-2.0
# baton_man_page(<program target> <section> <summary> <install component>): the rule that makes a program's
# man page and installs it. Included by Packaging.cmake, and by tests/package/man_pages, which runs it with
# the Makefile generator (test_man_pages_makefiles). Reads baton_packaging_dir (the source tree's packaging/) and
# baton_packaging_out (where the pages are made); appends each page to baton_man_pages.
#
# Man pages: help2man turns each program's --help into a page once the program is built (usage.awk puts the
# usage lines in the form help2man reads the SYNOPSIS from; packaging/man/<program>.h2m adds the
# description, files and cross-references), gzipped as Debian installs them. Without help2man (the `build`
# profile of deploy/install-deps.sh installs it) the programs are installed without pages.
find_program(HELP2MAN_PROGRAM help2man)
find_program(GZIP_PROGRAM gzip)
if(NOT HELP2MAN_PROGRAM OR NOT GZIP_PROGRAM)
  message(STATUS "help2man or gzip not found: no man pages (bash deploy/install-deps.sh build)")
endif()
set(baton_man_pages "")
function(baton_man_page target section summary component)
  if(NOT HELP2MAN_PROGRAM OR NOT GZIP_PROGRAM OR NOT TARGET ${target})
    return()
  endif()
  set(page ${baton_packaging_out}/man/${target}.${section})
  # help2man runs `<program> <help option>` in a shell, so the option can pipe the help through usage.awk.
  # Ninja makes an output's directory itself; the Makefile generator does not.
  add_custom_command(OUTPUT ${page}.gz
    COMMAND ${CMAKE_COMMAND} -E make_directory ${baton_packaging_out}/man
    COMMAND ${HELP2MAN_PROGRAM} --no-info --section ${section} --name ${summary}
            --include ${baton_packaging_dir}/man/${target}.h2m
            "--help-option=--help | awk -f ${baton_packaging_dir}/man/usage.awk"
            --output ${page} $<TARGET_FILE:${target}>
    COMMAND ${GZIP_PROGRAM} -9nf ${page}
    DEPENDS ${target} ${baton_packaging_dir}/man/${target}.h2m ${baton_packaging_dir}/man/usage.awk
    COMMENT "Generating man page ${target}(${section})"
    VERBATIM)
  install(FILES ${page}.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man${section} COMPONENT ${component})
  set(baton_man_pages ${baton_man_pages} ${page}.gz PARENT_SCOPE)
endfunction()
