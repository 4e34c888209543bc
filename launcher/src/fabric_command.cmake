# `sparkrun fabric` (fabric part: src/fabric_command.*, discovery in libspark/tools/fabric_discover).
if(TARGET spark_fabric_discover)
  target_sources(sparkrun PRIVATE ${CMAKE_CURRENT_LIST_DIR}/fabric_command.cpp)
  target_compile_definitions(sparkrun PRIVATE SPARK_LAUNCH_HAVE_FABRIC=1
    SPARK_FABRIC_DISCOVER_PATH="$<TARGET_FILE:spark_fabric_discover>")
  add_dependencies(sparkrun spark_fabric_discover)
endif()
