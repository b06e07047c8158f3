# `cmake --install build --prefix P` writes the CLI, the C header, libminivit.so and .a,
# find_package's files and pkg-config's, and the Python wrapper; `cpack -G DEB` packs the
# same as Debian splits a library (docs/api.md), one .deb per component:
#   cli      minivit          the program
#   library  libminivit0      libminivit.so.0, what programs built against it load
#   dev      libminivit-dev   the header, libminivit.so and .a, CMake's and pkg-config's files
#   python   python3-minivit  the ctypes wrapper over libminivit.so.0
include(CMakePackageConfigHelpers)
set(minivit_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/minivit)

install(TARGETS minivit RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT cli)
install(TARGETS minivit_shared EXPORT minivitTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT library NAMELINK_COMPONENT dev)
install(FILES ${PROJECT_SOURCE_DIR}/include/minivit.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        COMPONENT dev)
install(FILES ${CMAKE_BINARY_DIR}/libminivit.a DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev)
install(FILES ${PROJECT_SOURCE_DIR}/python/minivit.py
        DESTINATION ${CMAKE_INSTALL_DATADIR}/minivit/python COMPONENT python)
install(EXPORT minivitTargets NAMESPACE minivit:: DESTINATION ${minivit_cmake_dir} COMPONENT dev)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/minivitConfig.cmake.in
                              ${CMAKE_BINARY_DIR}/minivitConfig.cmake
                              INSTALL_DESTINATION ${minivit_cmake_dir})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/minivitConfigVersion.cmake
                                 COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_BINARY_DIR}/minivitConfig.cmake ${CMAKE_BINARY_DIR}/minivitConfigVersion.cmake
        DESTINATION ${minivit_cmake_dir} COMPONENT dev)
# The .pc file finds the prefix from where it lies, so an unpacked tree works as well.
file(RELATIVE_PATH MINIVIT_PC_TO_PREFIX /${CMAKE_INSTALL_LIBDIR}/pkgconfig /)
string(REGEX REPLACE "/$" "" MINIVIT_PC_TO_PREFIX "${MINIVIT_PC_TO_PREFIX}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/minivit.pc.in ${CMAKE_BINARY_DIR}/minivit.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/minivit.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig
        COMPONENT dev)

set(CPACK_GENERATOR DEB)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL cli library dev python)
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
set(CPACK_DEBIAN_CLI_PACKAGE_NAME minivit)
set(CPACK_DEBIAN_LIBRARY_PACKAGE_NAME libminivit0)
set(CPACK_DEBIAN_LIBRARY_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_DEV_PACKAGE_NAME libminivit-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "libminivit0 (= ${PROJECT_VERSION})")
# What linking libminivit.a takes beyond it (minivit.pc's Libs.private).
set(CPACK_DEBIAN_DEV_PACKAGE_RECOMMENDS "libopenblas-dev, libtomlplusplus-dev, zlib1g-dev")
set(CPACK_DEBIAN_PYTHON_PACKAGE_NAME python3-minivit)
set(CPACK_DEBIAN_PYTHON_PACKAGE_SECTION python)
set(CPACK_DEBIAN_PYTHON_PACKAGE_ARCHITECTURE all)
set(CPACK_DEBIAN_PYTHON_PACKAGE_DEPENDS "libminivit0 (= ${PROJECT_VERSION}), python3, python3-numpy")
set(CPACK_COMPONENT_CLI_DESCRIPTION
    "The program: train from TOML configs, evaluate checkpoints, show attention per patch, predict")
set(CPACK_COMPONENT_LIBRARY_DESCRIPTION
    "minivit's C API, the shared library: predict and explain with a trained model")
set(CPACK_COMPONENT_DEV_DESCRIPTION
    "minivit's C API, to build against: the header, the shared and static libraries, CMake and pkg-config files")
set(CPACK_COMPONENT_PYTHON_DESCRIPTION
    "minivit's C API from Python: a ctypes wrapper with numpy")
include(CPack)
