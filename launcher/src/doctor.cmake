# `sparkrun doctor` (doctor part: src/doctor*): spark_doctor is linked into sparkrun and into
# the unit tests in tests/rdma; spark_doctor_probe is the program `sparkrun doctor
# LAUNCH-OPTIONS` runs on every rank. Included from launcher/CMakeLists.txt.
add_library(spark_doctor STATIC ${CMAKE_CURRENT_LIST_DIR}/doctor.cpp)
target_include_directories(spark_doctor PUBLIC ${CMAKE_CURRENT_LIST_DIR})
target_link_libraries(spark_doctor PRIVATE spark_warnings spark_launch PkgConfig::HWLOC
                      ${CMAKE_DL_LIBS})
if(TARGET spark_verbs)
  target_link_libraries(spark_doctor PRIVATE spark_verbs)
  target_compile_definitions(spark_doctor PRIVATE SPARK_DOCTOR_HAVE_VERBS=1
                             SPARK_DOCTOR_IBVERBS_BUILD_VERSION="${IBVERBS_VERSION}")
endif()
if(SPARK_ENABLE_PMIX_ON)
  target_link_libraries(spark_doctor PRIVATE PkgConfig::PMIX)
  target_compile_definitions(spark_doctor PRIVATE SPARK_DOCTOR_HAVE_PMIX=1)
endif()

# The job part: pure planning / table code (unit-tested) and the probe program.
if(TARGET spark_fabric)
  add_library(spark_doctor_job STATIC ${CMAKE_CURRENT_LIST_DIR}/doctor_job.cpp)
  target_include_directories(spark_doctor_job PUBLIC ${CMAKE_CURRENT_LIST_DIR})
  target_link_libraries(spark_doctor_job PUBLIC spark_fabric PRIVATE spark_warnings)
endif()
if(TARGET spark_doctor_job AND TARGET spark_bootstrap AND TARGET spark_config
   AND TARGET spark_types)
  add_executable(spark_doctor_probe ${CMAKE_CURRENT_LIST_DIR}/doctor_probe_main.cpp
                                    ${CMAKE_CURRENT_LIST_DIR}/doctor_probe_net.cpp)
  target_include_directories(spark_doctor_probe PRIVATE ${PROJECT_SOURCE_DIR}/libspark/src)
  target_link_libraries(spark_doctor_probe PRIVATE spark_doctor spark_doctor_job spark_bootstrap
                        spark_config spark_types spark_warnings)
  if(TARGET spark_verbs)
    target_link_libraries(spark_doctor_probe PRIVATE spark_verbs)
    target_compile_definitions(spark_doctor_probe PRIVATE SPARK_DOCTOR_HAVE_VERBS=1)
  endif()
  set_target_properties(spark_doctor_probe PROPERTIES RUNTIME_OUTPUT_DIRECTORY
                        ${CMAKE_BINARY_DIR}/launcher)
  target_compile_definitions(spark_doctor PRIVATE
    SPARK_DOCTOR_PROBE_PATH="$<TARGET_FILE:spark_doctor_probe>")
  add_dependencies(sparkrun spark_doctor_probe)
  install(TARGETS spark_doctor_probe RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
