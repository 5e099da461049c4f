# SPDX-License-Identifier: Apache-2.0
# The agent's configuration: YAML file, flag overrides and validation, pure apart from reading the file, so
# every accepted and refused configuration is unit-tested (tests/unit/agent/test_config.cpp).
# config.cpp: the file's schema; yaml_reader: typed reading of YAML; config_checks: the validators;
# config_settings: the one table of string settings (file key, flag, --help); config_overrides: the flags;
# config_changes: what a reload changes.
add_library(baton_agent_config STATIC
  ${CMAKE_CURRENT_SOURCE_DIR}/src/config.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/src/yaml_reader.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/src/config_checks.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/src/config_settings.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/src/config_overrides.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/src/config_changes.cpp)
target_include_directories(baton_agent_config PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/src)
target_link_libraries(baton_agent_config PUBLIC baton_agent_cron baton::sdk baton::common PRIVATE yaml-cpp Boost::url)
