# SPDX-License-Identifier: Apache-2.0
# The agent's runtime and the baton-agent executable.
add_library(baton_agent_core STATIC
  ${CMAKE_CURRENT_SOURCE_DIR}/src/scheduler.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/src/http_job.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/src/job_hooks.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/src/job_run.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/src/job_history.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/src/group_state.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/src/lock_server_health.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/src/agent.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/src/agent_metrics.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/src/sidecar.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/src/run_now_client.cpp)
target_include_directories(baton_agent_core PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/src)
target_link_libraries(baton_agent_core PUBLIC baton_agent_config baton_agent_cron baton::sdk baton::common
  PRIVATE Boost::json Boost::url)

add_executable(baton-agent ${CMAKE_CURRENT_SOURCE_DIR}/src/main.cpp)
target_link_libraries(baton-agent PRIVATE baton_agent_core)
install(TARGETS baton-agent RUNTIME DESTINATION bin)
