# `cmake --install` layout and the exported CMake package, so that programs
# can `find_package(sray)` and link sray::runtime.
include(CMakePackageConfigHelpers)

install(EXPORT srayTargets NAMESPACE sray:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/sray)
configure_package_config_file(${CMAKE_CURRENT_SOURCE_DIR}/cmake/srayConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/srayConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/sray
  PATH_VARS CMAKE_INSTALL_LIBDIR)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/srayConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/srayConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/srayConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/sray)
install(FILES ${CMAKE_CURRENT_SOURCE_DIR}/docs/sray.toml.example
        DESTINATION ${CMAKE_INSTALL_DATADIR}/sray)
