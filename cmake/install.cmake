# Installation of the SDK as a CMake package:
#   cmake --install build --prefix /usr/local
# then, in a service:  find_package(baton CONFIG REQUIRED)  target_link_libraries(app PRIVATE baton::sdk)
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set_target_properties(baton_sdk PROPERTIES EXPORT_NAME sdk)
set_target_properties(baton_asio PROPERTIES EXPORT_NAME asio)
target_include_directories(baton_asio INTERFACE $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)

install(TARGETS baton_sdk baton_asio
  EXPORT baton-targets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/sdk/include/baton DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT baton-targets
  NAMESPACE baton::
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/baton)

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/baton-config.cmake.in
  ${PROJECT_BINARY_DIR}/baton-config.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/baton)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/baton-config-version.cmake
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/baton-config.cmake ${PROJECT_BINARY_DIR}/baton-config-version.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/baton)
