# SPDX-License-Identifier: Apache-2.0
# Run by `cmake --install` and cpack (install(CODE) rules in cmake/Packaging.cmake), when the installation's
# prefix is known: the systemd units from deploy/systemd/ are installed with that installation's paths, and
# configuration files go to its system configuration directory: /etc for the prefix /usr (the Debian
# packages' prefix) or /, else <prefix>/etc (GNUInstallDirs' rule, applied here at install time).

function(baton_sysconfdir out)
  if(CMAKE_INSTALL_PREFIX STREQUAL "/usr" OR CMAKE_INSTALL_PREFIX STREQUAL "/")
    set(${out} /etc PARENT_SCOPE)
  else()
    set(${out} "${CMAKE_INSTALL_PREFIX}/etc" PARENT_SCOPE)
  endif()
endfunction()

# baton_install_config(<file> <directory under the configuration directory> <installed name> <work dir>)
# /etc/baton/ paths in the file move with the configuration directory.
function(baton_install_config source dir name work_dir)
  baton_sysconfdir(etc)
  file(READ "${source}" text)
  string(REPLACE "/etc/baton/" "${etc}/baton/" text "${text}")
  file(WRITE "${work_dir}/${name}" "${text}")
  file(INSTALL DESTINATION "${etc}/${dir}" TYPE FILE FILES "${work_dir}/${name}")
endfunction()

# baton_install_unit(SOURCE <unit> PROGRAM <name> SECTION <man section> DOC_DIR <name under share/doc>
#                    WORK_DIR <dir> [OPTIONS_VARIABLE <var> OPTIONS_FILE <name under etc/default>
#                    OPTIONS_TEMPLATE <file.in>])
# Rewrites the unit for this installation: ExecStart (and any other line that runs /usr/local/bin/<program>)
# runs <prefix>/bin/<program>; Documentation= names the
# man page and <prefix>/share/doc/<DOC_DIR>/; /etc/baton/ paths move with the configuration directory. With
# OPTIONS_VARIABLE, the unit's command-line options move to <etc>/default/<OPTIONS_FILE> (made from
# OPTIONS_TEMPLATE with @<var>@ set to them), read with EnvironmentFile=, so an administrator changes them
# there and a package upgrade keeps the change.
function(baton_install_unit)
  cmake_parse_arguments(U ""
    "SOURCE;PROGRAM;SECTION;DOC_DIR;WORK_DIR;OPTIONS_VARIABLE;OPTIONS_FILE;OPTIONS_TEMPLATE" "" ${ARGN})
  baton_sysconfdir(etc)
  set(prefix "${CMAKE_INSTALL_PREFIX}")
  file(READ "${U_SOURCE}" unit)
  # Continued lines (a trailing backslash) are one line to systemd; join them so ExecStart is one line here.
  string(REGEX REPLACE "\\\\\n[ \t]*" " " unit "${unit}")
  if(NOT unit MATCHES "\nExecStart=[^ \n]*/${U_PROGRAM}( ([^\n]*))?\n")
    message(FATAL_ERROR "${U_SOURCE}: no ExecStart= line that runs ${U_PROGRAM}")
  endif()
  set(options "${CMAKE_MATCH_2}")
  if(U_OPTIONS_VARIABLE)
    if(options MATCHES "[\"'\\\\$]")
      message(FATAL_ERROR "${U_SOURCE}: ExecStart= options with quotes, $ or backslashes cannot move to "
                          "${U_OPTIONS_FILE}: ${options}")
    endif()
    string(REPLACE "/etc/baton/" "${etc}/baton/" options "${options}")
    set(env_file "${etc}/default/${U_OPTIONS_FILE}")
    string(CONCAT exec "# The options: ${U_OPTIONS_VARIABLE} in ${env_file}.\n"
                       "EnvironmentFile=${env_file}\n"
                       "ExecStart=${prefix}/bin/${U_PROGRAM} $${U_OPTIONS_VARIABLE}")
    set(${U_OPTIONS_VARIABLE} "${options}")
    set(BATON_SYSCONF_DIR "${etc}")
    configure_file("${U_OPTIONS_TEMPLATE}" "${U_WORK_DIR}/${U_OPTIONS_FILE}" @ONLY)
    file(INSTALL DESTINATION "${etc}/default" TYPE FILE FILES "${U_WORK_DIR}/${U_OPTIONS_FILE}")
  else()
    set(exec "ExecStart=${prefix}/bin/${U_PROGRAM} ${options}")
  endif()
  string(REGEX REPLACE "\nExecStart=[^\n]*\n" "\n${exec}\n" unit "${unit}")
  # Other lines that run the program (ExecReload= checking the file first) run the installed one too.
  string(REPLACE "/usr/local/bin/${U_PROGRAM} " "${prefix}/bin/${U_PROGRAM} " unit "${unit}")
  string(REPLACE "file:///usr/share/doc/baton/" "file://${prefix}/share/doc/${U_DOC_DIR}/" unit "${unit}")
  string(REPLACE "\nDocumentation=" "\nDocumentation=man:${U_PROGRAM}(${U_SECTION}) " unit "${unit}")
  string(REPLACE "/etc/baton/" "${etc}/baton/" unit "${unit}")
  get_filename_component(name "${U_SOURCE}" NAME)
  file(WRITE "${U_WORK_DIR}/${name}" "${unit}")
  file(INSTALL DESTINATION "${prefix}/lib/systemd/system" TYPE FILE FILES "${U_WORK_DIR}/${name}")
endfunction()
