# Binding and `sparkrun topo` (owned by the topology part). Included from
# launcher/CMakeLists.txt after the sparkrun target exists.
if(TARGET spark_topology AND TARGET sparkrun)
  target_sources(sparkrun PRIVATE
    ${CMAKE_CURRENT_LIST_DIR}/binding.cpp
    ${CMAKE_CURRENT_LIST_DIR}/topo_command.cpp)
  target_link_libraries(sparkrun PRIVATE spark_topology)
  target_compile_definitions(sparkrun PRIVATE SPARK_LAUNCH_HAVE_TOPOLOGY=1)
endif()
