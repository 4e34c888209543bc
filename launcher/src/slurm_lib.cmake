# spark_slurm: reading a SLURM allocation (host lists, tasks per node, allowed cpus).
# Pure C++ with no SLURM library dependency. Included by launcher/CMakeLists.txt (the
# launcher links it) and, when the launcher does not define it, by tests/slurm/.
if(NOT TARGET spark_slurm)
  add_library(spark_slurm STATIC
    ${CMAKE_CURRENT_LIST_DIR}/slurm_hostlist.cpp
    ${CMAKE_CURRENT_LIST_DIR}/slurm_allocation.cpp)
  target_include_directories(spark_slurm PUBLIC
    ${CMAKE_CURRENT_LIST_DIR}
    ${PROJECT_SOURCE_DIR}/libspark/include)
  target_link_libraries(spark_slurm PRIVATE spark_warnings)
endif()
