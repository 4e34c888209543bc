# `sparkrun doctor` (owned by the RoCE part): spark_doctor is linked into sparkrun and into
# the unit tests in tests/rdma. Included from launcher/CMakeLists.txt.
add_library(spark_doctor STATIC ${CMAKE_CURRENT_LIST_DIR}/doctor.cpp)
target_include_directories(spark_doctor PUBLIC ${CMAKE_CURRENT_LIST_DIR})
target_link_libraries(spark_doctor PRIVATE spark_warnings PkgConfig::HWLOC ${CMAKE_DL_LIBS})
if(TARGET spark_verbs)
  target_link_libraries(spark_doctor PRIVATE spark_verbs)
  target_compile_definitions(spark_doctor PRIVATE SPARK_DOCTOR_HAVE_VERBS=1
                             SPARK_DOCTOR_IBVERBS_BUILD_VERSION="${IBVERBS_VERSION}")
endif()
if(SPARK_ENABLE_PMIX_ON)
  target_link_libraries(spark_doctor PRIVATE PkgConfig::PMIX)
  target_compile_definitions(spark_doctor PRIVATE SPARK_DOCTOR_HAVE_PMIX=1)
endif()
