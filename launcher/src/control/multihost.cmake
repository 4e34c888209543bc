# Multi-host part of sparkrun (owned by the multi-host engineer, docs/multihost.md):
# the control plane (spark_control) and, in sparkrun, daemon mode and the coordinator.
# Included from launcher/CMakeLists.txt after the sparkrun target exists.
if(NOT TARGET spark_control)
  add_library(spark_control STATIC
    ${CMAKE_CURRENT_LIST_DIR}/wire.cpp
    ${CMAKE_CURRENT_LIST_DIR}/auth.cpp
    ${CMAKE_CURRENT_LIST_DIR}/messages.cpp
    ${CMAKE_CURRENT_LIST_DIR}/server.cpp
    ${CMAKE_CURRENT_LIST_DIR}/client.cpp
    ${CMAKE_CURRENT_LIST_DIR}/../remote_agent.cpp
    ${CMAKE_CURRENT_LIST_DIR}/../remote_address.cpp
  )
  target_include_directories(spark_control PUBLIC ${CMAKE_CURRENT_LIST_DIR}/..)
  target_link_libraries(spark_control PUBLIC spark_launch Boost::headers OpenSSL::Crypto Threads::Threads
                        PRIVATE spark_warnings)
endif()

# In sparkrun-full (the lean sparkrun hands multi-host command lines over to it).
if(TARGET sparkrun_full AND EXISTS ${CMAKE_CURRENT_LIST_DIR}/../remote_launch.cpp)
  target_sources(sparkrun_full PRIVATE
    ${CMAKE_CURRENT_LIST_DIR}/../daemon.cpp
    ${CMAKE_CURRENT_LIST_DIR}/../remote_launch.cpp
  )
  target_link_libraries(sparkrun_full PRIVATE spark_control)
endif()
