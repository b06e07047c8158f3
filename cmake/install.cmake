# `cmake --install build --prefix P` writes the CLI, the C header, libminivit.so and .a,
# find_package's files and pkg-config's; `cpack -G DEB` packs the same into a .deb
# (docs/api.md).
include(CMakePackageConfigHelpers)
set(minivit_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/minivit)

install(TARGETS minivit RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS minivit_shared EXPORT minivitTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES ${PROJECT_SOURCE_DIR}/include/minivit.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${CMAKE_BINARY_DIR}/libminivit.a DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES ${PROJECT_SOURCE_DIR}/python/minivit.py
        DESTINATION ${CMAKE_INSTALL_DATADIR}/minivit/python)
install(EXPORT minivitTargets NAMESPACE minivit:: DESTINATION ${minivit_cmake_dir})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/minivitConfig.cmake.in
                              ${CMAKE_BINARY_DIR}/minivitConfig.cmake
                              INSTALL_DESTINATION ${minivit_cmake_dir})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/minivitConfigVersion.cmake
                                 COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_BINARY_DIR}/minivitConfig.cmake ${CMAKE_BINARY_DIR}/minivitConfigVersion.cmake
        DESTINATION ${minivit_cmake_dir})
# The .pc file finds the prefix from where it lies, so an unpacked tree works as well.
file(RELATIVE_PATH MINIVIT_PC_TO_PREFIX /${CMAKE_INSTALL_LIBDIR}/pkgconfig /)
string(REGEX REPLACE "/$" "" MINIVIT_PC_TO_PREFIX "${MINIVIT_PC_TO_PREFIX}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/minivit.pc.in ${CMAKE_BINARY_DIR}/minivit.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/minivit.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME minivit)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "minivit maintainers <maintainers@minivit.invalid>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "Train, evaluate and explain small Vision Transformers on the CPU")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
# The libraries the binaries link, as dpkg-shlibdeps reads them from the files.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
include(CPack)
