# `sparkrun doctor` (doctor part: src/doctor*): spark_doctor is linked into sparkrun and into
# the unit tests in tests/rdma; the program `sparkrun doctor LAUNCH-OPTIONS` runs on every
# rank is libspark/tools/doctor_probe. Included from launcher/CMakeLists.txt.
add_library(spark_doctor STATIC ${CMAKE_CURRENT_LIST_DIR}/doctor.cpp)
target_include_directories(spark_doctor PUBLIC ${CMAKE_CURRENT_LIST_DIR})
target_link_libraries(spark_doctor PRIVATE spark_warnings spark_launch spark_fabric PkgConfig::HWLOC
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

# The job part: pure planning / table code (unit-tested), linked by the probe.
if(TARGET spark_fabric)
  add_library(spark_doctor_job STATIC ${CMAKE_CURRENT_LIST_DIR}/doctor_job.cpp)
  target_include_directories(spark_doctor_job PUBLIC ${CMAKE_CURRENT_LIST_DIR})
  target_link_libraries(spark_doctor_job PUBLIC spark_fabric PRIVATE spark_warnings)
endif()
if(TARGET spark_doctor_probe)  # libspark/tools/doctor_probe
  target_compile_definitions(spark_doctor PRIVATE
    SPARK_DOCTOR_PROBE_PATH="$<TARGET_FILE:spark_doctor_probe>")
  add_dependencies(sparkrun spark_doctor_probe)
endif()
