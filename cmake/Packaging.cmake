# SPDX-License-Identifier: Apache-2.0
# Debian packages, one per install component, made in a build directory with `cpack -G DEB`:
#   batond        (component server)  batond, its systemd unit and sysusers.d file, /etc/default/batond,
#                                     batond(8)
#   baton-agent   (component agent)   baton-agent, its unit and sysusers.d file, /etc/baton/agent.yaml,
#                                     baton-agent(8)
#   baton-cli     (component cli)     baton, baton(1)
#   libbaton-dev  (component sdk)     the SDK: library, headers, CMake package, baton.pc (cmake/install.cmake)
# Every file is installed by an ordinary install() rule too, so `cmake --install` gives the same tree under
# its prefix. The units come from deploy/systemd/ and the configuration files from deploy/systemd/ and
# packaging/, rewritten at install time for the installation's paths (packaging/install-files.cmake).
# docs/deploy.md, "Install the packages".

# A partial source tree (the container images' build stage copies only what the programs need) makes no
# packages.
foreach(path IN ITEMS packaging deploy/systemd docs LICENSE)
  if(NOT EXISTS ${PROJECT_SOURCE_DIR}/${path})
    message(STATUS "No ${path} in the source tree: no Debian packages")
    return()
  endif()
endforeach()

set(BATON_PACKAGE_MAINTAINER "Baton maintainers <maintainers@baton.invalid>"
    CACHE STRING "Maintainer field of the Debian packages")
set(BATON_PACKAGE_HOMEPAGE "https://git.example.com/baton/baton"
    CACHE STRING "Homepage field of the Debian packages and Source of their copyright file")

set(baton_packaging_dir ${PROJECT_SOURCE_DIR}/packaging)
set(baton_packaging_out ${PROJECT_BINARY_DIR}/packaging)

# Each package's documentation directory holds its copyright file (machine-readable, Apache-2.0), as Debian
# expects, and the pages of docs/ its users need.
configure_file(${baton_packaging_dir}/copyright ${baton_packaging_out}/copyright @ONLY)
function(baton_install_docs component package)
  list(TRANSFORM ARGN PREPEND ${PROJECT_SOURCE_DIR}/docs/)
  install(FILES ${baton_packaging_out}/copyright ${ARGN}
    DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/${package} COMPONENT ${component})
endfunction()

include(${CMAKE_CURRENT_LIST_DIR}/man_pages.cmake)
baton_man_page(batond 8 "Baton lock server" server)
baton_man_page(baton-agent 8 "leader-elected cron agent for Baton" agent)
baton_man_page(baton 1 "take, keep and hand back Baton locks from the shell" cli)
if(baton_man_pages)
  add_custom_target(baton_man_pages ALL DEPENDS ${baton_man_pages})
endif()

# batond: the unit reads its options from /etc/default/batond.
install(FILES ${baton_packaging_dir}/batond.sysusers DESTINATION lib/sysusers.d RENAME batond.conf
  COMPONENT server)
install(CODE "
  include(\"${baton_packaging_dir}/install-files.cmake\")
  baton_install_unit(SOURCE \"${PROJECT_SOURCE_DIR}/deploy/systemd/batond.service\" PROGRAM batond SECTION 8
    DOC_DIR batond WORK_DIR \"${baton_packaging_out}/server\"
    OPTIONS_VARIABLE BATOND_OPTS OPTIONS_FILE batond
    OPTIONS_TEMPLATE \"${baton_packaging_dir}/batond.default.in\")
  " COMPONENT server)
baton_install_docs(server batond deploy.md protocol.md security.md design.md fencing.md)

# baton-agent: the unit reads /etc/baton/agent.yaml, installed from the sample that goes with the unit.
install(FILES ${baton_packaging_dir}/baton-agent.sysusers DESTINATION lib/sysusers.d RENAME baton-agent.conf
  COMPONENT agent)
install(CODE "
  include(\"${baton_packaging_dir}/install-files.cmake\")
  baton_install_unit(SOURCE \"${PROJECT_SOURCE_DIR}/deploy/systemd/baton-agent.service\" PROGRAM baton-agent
    SECTION 8 DOC_DIR baton-agent WORK_DIR \"${baton_packaging_out}/agent\")
  baton_install_config(\"${PROJECT_SOURCE_DIR}/deploy/systemd/agent.yaml\" baton agent.yaml
    \"${baton_packaging_out}/agent\")
  " COMPONENT agent)
baton_install_docs(agent baton-agent agent.md cron.md deploy.md security.md fencing.md)

baton_install_docs(cli baton-cli cli.md protocol.md)
baton_install_docs(sdk libbaton-dev sdk.md fencing.md protocol.md)

# CPack: one DEB per component, installed under /usr. CPACK_SET_DESTDIR: the install rules above see the
# real prefix (/usr), so the units name /usr/bin and the configuration files land in /etc.
set(CPACK_PACKAGE_NAME baton)
set(CPACK_PACKAGE_VENDOR "Baton")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "${BATON_PACKAGE_MAINTAINER}")
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_GENERATOR DEB)
set(CPACK_SET_DESTDIR ON)
set(CPACK_INSTALL_PREFIX /usr)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_COMPONENTS_ALL server agent cli sdk)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${BATON_PACKAGE_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "${BATON_PACKAGE_HOMEPAGE}")
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
# The programs' Depends come from the libraries they link (dpkg-shlibdeps); the units need sysusers, as
# debhelper's dh_installsysusers states it.
set(baton_sysusers_depends "systemd | systemd-standalone-sysusers | systemd-sysusers")

set(CPACK_DEBIAN_SERVER_PACKAGE_NAME batond)
set(CPACK_DEBIAN_SERVER_PACKAGE_SECTION net)
set(CPACK_DEBIAN_SERVER_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_SERVER_PACKAGE_DEPENDS "${baton_sysusers_depends}")
set(CPACK_DEBIAN_SERVER_PACKAGE_CONTROL_EXTRA
  ${baton_packaging_dir}/deb/batond/conffiles ${baton_packaging_dir}/deb/batond/postinst)
set(CPACK_COMPONENT_SERVER_DESCRIPTION "Baton lock server
batond grants leases on named keys over HTTP or HTTPS, each with a fencing
token that only grows, and keeps them in a write-ahead log, so that a restart
forgets neither a lease nor the last token issued. This package runs it under
systemd as the user baton, with its options in /etc/default/batond.")

set(CPACK_DEBIAN_AGENT_PACKAGE_NAME baton-agent)
set(CPACK_DEBIAN_AGENT_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_AGENT_PACKAGE_SHLIBDEPS ON)
# tzdata: the jobs' time zones.
set(CPACK_DEBIAN_AGENT_PACKAGE_DEPENDS "${baton_sysusers_depends}, tzdata")
set(CPACK_DEBIAN_AGENT_PACKAGE_CONTROL_EXTRA
  ${baton_packaging_dir}/deb/baton-agent/conffiles ${baton_packaging_dir}/deb/baton-agent/postinst)
set(CPACK_COMPONENT_AGENT_DESCRIPTION "leader-elected cron agent for Baton
baton-agent runs beside each replica of a service: the replicas elect one
leader through a Baton lock server, and the leader runs the configured cron
jobs, each with the lease's fencing token. This package runs it under systemd
as the user baton-agent, configured by /etc/baton/agent.yaml.")

set(CPACK_DEBIAN_CLI_PACKAGE_NAME baton-cli)
set(CPACK_DEBIAN_CLI_PACKAGE_SECTION net)
set(CPACK_DEBIAN_CLI_PACKAGE_SHLIBDEPS ON)
set(CPACK_COMPONENT_CLI_DESCRIPTION "command-line client for Baton locks
baton acquires, renews, releases and inspects locks on a Baton lock server,
runs a command under a lock (stopping it when the lease is lost), and checks
a server against the protocol's guarantees.")

# The SDK: what a program needs to build against it. A static libbaton brings no runtime dependency of its
# own; the Boost and OpenSSL development packages provide what it links.
set(CPACK_DEBIAN_SDK_PACKAGE_NAME libbaton-dev)
set(CPACK_DEBIAN_SDK_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_SDK_PACKAGE_DEPENDS
  "libboost1.81-dev, libboost-json1.81-dev, libboost-url1.81-dev, libssl-dev")
if(BATON_SDK_SHARED)
  set(CPACK_DEBIAN_SDK_PACKAGE_SHLIBDEPS ON)
endif()
set(CPACK_COMPONENT_SDK_DESCRIPTION "Baton client SDK for C++20 and Boost.Asio: headers and library
Leases with fencing tokens, renewed in the background and given up safely,
and leader election, over a Baton lock server (HTTP or HTTPS) or etcd, for
C++20 programs that use Boost.Asio. With a CMake package (find_package(baton))
and a pkg-config module (baton.pc).")

include(CPack)
