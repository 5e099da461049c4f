# SPDX-License-Identifier: Apache-2.0
# The agent's configuration: YAML file, flag overrides and validation, pure apart from reading the file, so
# every accepted and refused configuration is unit-tested (tests/unit/agent/test_config.cpp).
add_library(baton_agent_config STATIC ${CMAKE_CURRENT_SOURCE_DIR}/src/config.cpp)
target_include_directories(baton_agent_config PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/src)
target_link_libraries(baton_agent_config PUBLIC baton_agent_cron baton::sdk baton::common PRIVATE yaml-cpp Boost::url)
