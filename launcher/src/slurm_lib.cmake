# spark_slurm: reading a SLURM allocation (host lists, tasks per node, allowed cpus).
# Pure C++ with no SLURM library dependency (cpu lists come from spark_topology). Included by launcher/CMakeLists.txt (the
# launcher links it) and, when the launcher does not define it, by tests/slurm/.
if(NOT TARGET spark_slurm)
  add_library(spark_slurm STATIC
    ${CMAKE_CURRENT_LIST_DIR}/slurm_hostlist.cpp
    ${CMAKE_CURRENT_LIST_DIR}/slurm_allocation.cpp)
  target_include_directories(spark_slurm PUBLIC
    ${CMAKE_CURRENT_LIST_DIR}
    ${PROJECT_SOURCE_DIR}/libspark/include)
  target_link_libraries(spark_slurm PUBLIC spark_topology PRIVATE spark_warnings)
endif()

# spark_slurm_plan: the launcher's hook (allocation -> host list and -n default). Needs the
# launcher's job plan types, so it exists only once spark_launch does.
if(TARGET spark_launch AND NOT TARGET spark_slurm_plan)
  add_library(spark_slurm_plan STATIC ${CMAKE_CURRENT_LIST_DIR}/slurm_plan.cpp
                                      ${CMAKE_CURRENT_LIST_DIR}/slurm_nodes.cpp)
  target_link_libraries(spark_slurm_plan PUBLIC spark_slurm spark_launch PRIVATE spark_warnings)
endif()
