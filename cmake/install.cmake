# SPDX-License-Identifier: Apache-2.0
# Installation of the SDK (baton_sdk_package, sdk/CMakeLists.txt) as a CMake package and a pkg-config module,
# all in the install component `sdk`:
#   cmake --install build --prefix /usr/local                    # the SDK and the programs
#   cmake --install build --prefix /usr/local --component sdk    # the SDK alone
# then, in a service:  find_package(baton CONFIG REQUIRED)  target_link_libraries(app PRIVATE baton::sdk)
# or:                  c++ -std=c++20 app.cpp $(pkg-config --cflags --libs baton)
include(CMakePackageConfigHelpers)

install(TARGETS baton_sdk_package
  EXPORT baton-targets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT sdk
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT sdk NAMELINK_COMPONENT sdk
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT sdk)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/sdk/include/baton DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  COMPONENT sdk FILES_MATCHING PATTERN "*.hpp")
install(FILES ${PROJECT_BINARY_DIR}/sdk/include/baton/version.hpp DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/baton
  COMPONENT sdk)
install(EXPORT baton-targets
  NAMESPACE baton::
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/baton
  COMPONENT sdk)

# The package asks for the Boost it was built with first; any Boost from 1.81 on is accepted, with a warning
# when it is not the one the library was compiled against (baton-config.cmake.in).
set(BATON_BOOST_VERSION ${Boost_VERSION})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/baton-config.cmake.in
  ${PROJECT_BINARY_DIR}/baton-config.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/baton)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/baton-config-version.cmake
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/baton-config.cmake ${PROJECT_BINARY_DIR}/baton-config-version.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/baton
  COMPONENT sdk)

# baton.pc. Its prefix is found from the file's own place (${pcfiledir}), so it stays right after
# `cmake --install --prefix` or a move of the whole tree. A static library brings its dependencies in Libs
# (pkg-config users rarely pass --static); a shared one keeps them private.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(baton_pc_prefix "${CMAKE_INSTALL_PREFIX}")
  set(baton_pc_libdir "${CMAKE_INSTALL_LIBDIR}")
else()
  file(RELATIVE_PATH baton_pc_up "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/prefix")
  string(REGEX REPLACE "/$" "" baton_pc_up "${baton_pc_up}")
  set(baton_pc_prefix "\${pcfiledir}/${baton_pc_up}")
  set(baton_pc_libdir "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(baton_pc_includedir "${CMAKE_INSTALL_INCLUDEDIR}")
else()
  set(baton_pc_includedir "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
# Boost has no .pc file: its directories, unless the compiler searches them anyway.
set(baton_pc_boost_cflags "")
foreach(dir IN LISTS Boost_INCLUDE_DIRS)
  if(NOT dir IN_LIST CMAKE_CXX_IMPLICIT_INCLUDE_DIRECTORIES)
    string(APPEND baton_pc_boost_cflags " -I${dir}")
  endif()
endforeach()
set(baton_pc_deps "")
foreach(lib IN ITEMS json url)
  get_target_property(location Boost::${lib} LOCATION)
  get_filename_component(dir "${location}" DIRECTORY)
  string(FIND "${baton_pc_deps}" "-L${dir} " seen)
  if(NOT dir IN_LIST CMAKE_CXX_IMPLICIT_LINK_DIRECTORIES AND seen EQUAL -1)
    string(APPEND baton_pc_deps "-L${dir} ")
  endif()
  string(APPEND baton_pc_deps "-lboost_${lib} ")
endforeach()
string(APPEND baton_pc_deps "-pthread")
if(BATON_SDK_SHARED)
  set(baton_pc_libs "-L\${libdir} -lbaton")
  set(baton_pc_libs_private "${baton_pc_deps}")
  set(baton_pc_requires "")
  set(baton_pc_requires_private "openssl")
else()
  set(baton_pc_libs "-L\${libdir} -lbaton ${baton_pc_deps}")
  set(baton_pc_libs_private "")
  set(baton_pc_requires "openssl")
  set(baton_pc_requires_private "")
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/baton.pc.in ${PROJECT_BINARY_DIR}/baton.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/baton.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT sdk)
