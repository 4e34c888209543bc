# Installed package: find_package(sparkrun) gives spark::spark; pkg-config gives `spark`.
# The build tree is a package too (-Dsparkrun_DIR=BUILD_DIR), as the installed tree is.
include(CMakePackageConfigHelpers)
set(SPARK_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/sparkrun)
if(TARGET spark)
  install(EXPORT sparkrunTargets NAMESPACE spark:: DESTINATION ${SPARK_CMAKE_DIR})
  export(EXPORT sparkrunTargets NAMESPACE spark::
    FILE ${CMAKE_CURRENT_BINARY_DIR}/sparkrunTargets.cmake)
  configure_package_config_file(cmake/sparkrunConfig.cmake.in
    ${CMAKE_CURRENT_BINARY_DIR}/sparkrunConfig.cmake INSTALL_DESTINATION ${SPARK_CMAKE_DIR})
  write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/sparkrunConfigVersion.cmake
    COMPATIBILITY SameMinorVersion)
  install(FILES ${CMAKE_CURRENT_BINARY_DIR}/sparkrunConfig.cmake
    ${CMAKE_CURRENT_BINARY_DIR}/sparkrunConfigVersion.cmake DESTINATION ${SPARK_CMAKE_DIR})
  file(RELATIVE_PATH SPARK_PC_TO_PREFIX /${CMAKE_INSTALL_LIBDIR}/pkgconfig /)
  string(REGEX REPLACE "/$" "" SPARK_PC_TO_PREFIX "${SPARK_PC_TO_PREFIX}")
  configure_file(cmake/spark.pc.in ${CMAKE_CURRENT_BINARY_DIR}/spark.pc @ONLY)
  install(FILES ${CMAKE_CURRENT_BINARY_DIR}/spark.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endif()
