# install(): what a C++ user of nnfleet needs, under CMAKE_INSTALL_PREFIX (GNUInstallDirs):
#   include/nnfleet/*.h (with the generated version.h), lib/libnnfleet_*.a (nnfleet_api and every
#   static library under it), bin/nnfleet, and lib/cmake/nnfleet/ so that
#   find_package(nnfleet CONFIG REQUIRED) + target_link_libraries(app PRIVATE nnfleet::nnfleet)
#   works. tests/install/ proves it with a small consumer project.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# nnfleet_api's own nnfleet_* libraries, transitively (its users link them: static libraries).
function(nnfleet_libraries_under target out)
  set(found ${${out}})
  get_target_property(deps ${target} LINK_LIBRARIES)
  foreach(dep IN LISTS deps)
    # nnfleet_<folder>, not the imported nnfleet_ext::<library>.
    if(TARGET ${dep} AND dep MATCHES "^nnfleet_[a-z0-9_]+$" AND NOT dep IN_LIST found)
      list(APPEND found ${dep})
      nnfleet_libraries_under(${dep} found)
    endif()
  endforeach()
  set(${out} ${found} PARENT_SCOPE)
endfunction()
set(nnfleet_installed_libraries "")
nnfleet_libraries_under(nnfleet_api nnfleet_installed_libraries)

install(TARGETS nnfleet_api ${nnfleet_installed_libraries} EXPORT nnfleetTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS nnfleet RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/nnfleet DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h")
install(FILES ${PROJECT_BINARY_DIR}/include/nnfleet/version.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/nnfleet)

set(nnfleet_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/nnfleet)
install(EXPORT nnfleetTargets NAMESPACE nnfleet:: DESTINATION ${nnfleet_cmake_dir})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/nnfleetConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/nnfleetConfig.cmake
                              INSTALL_DESTINATION ${nnfleet_cmake_dir})
# 0.x: a minor version may break the API, so only the same MAJOR.MINOR is compatible.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/nnfleetConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/nnfleetConfig.cmake
              ${PROJECT_BINARY_DIR}/nnfleetConfigVersion.cmake
        DESTINATION ${nnfleet_cmake_dir})
