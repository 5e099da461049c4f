// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: the agent's YAML configuration parser. Any input is either a configuration or a
// config_error with a reason; nothing else may escape (no YAML exception, no crash).

#include "config.hpp"

#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    auto config = baton::agent::parse_config(text, "fuzz.yaml");
    (void)config;
  } catch (const baton::agent::config_error& e) {
    (void)e.what();
  }
  return 0;
}
