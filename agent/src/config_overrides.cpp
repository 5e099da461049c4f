// SPDX-License-Identifier: Apache-2.0
// The command-line flags over the file (apply_overrides), each validated as its key in the file is
// (config_settings.hpp).

#include "config.hpp"
#include "config_checks.hpp"
#include "config_settings.hpp"

#include <algorithm>

namespace baton::agent {

using namespace detail;

void apply_overrides(agent_config& config, const std::map<std::string, std::string>& flags) {
  agent_config next = config;  // all or nothing: a bad flag leaves the configuration as it was
  for (const auto& [raw_name, value] : flags) {
    const auto name =
        std::string_view(raw_name).substr(std::min(raw_name.find_first_not_of('-'), raw_name.size()));
    const auto flag = "--" + std::string(name);
    const auto* target = string_setting_for_flag(name);
    if (!target)
      throw config_error("", 0, 0, flag,
                         "unknown flag (the file can be overridden by " + overriding_flags() + ")");
    if (value.empty()) continue;
    if (const auto reason = target->check(value); !reason.empty()) throw config_error("", 0, 0, flag, reason);
    target->field(next) = value;
  }
  if (const auto reason = check_tls_combination(next); !reason.empty())
    throw config_error("", 0, 0, "--ca-file/--cert/--key", reason);
  if (const auto reason = check_etcd_password_combination(next); !reason.empty())
    throw config_error("", 0, 0, "--etcd-password-file", reason);
  if (const auto reason = check_etcd_bug_policy_combination(next); !reason.empty())
    throw config_error("", 0, 0, "--server", "etcd_lease_revocation_bug " + reason);
  config = std::move(next);
}

}  // namespace baton::agent
