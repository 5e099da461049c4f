// SPDX-License-Identifier: Apache-2.0
#pragma once
// The settings whose value is one string, in one table: each row names the setting in the file, its flag on
// the command line and its line in --help, and says which field holds it and how a value is checked. The
// file (config.cpp), the flags (command_line.cpp, config_overrides.cpp) and their messages all read it, so a
// setting is added, renamed or given a flag in one place.

#include "config.hpp"

#include <span>
#include <string>
#include <string_view>

namespace baton::agent {

struct string_setting {
  std::string_view key;         // in the file: `listen`, `election.key`, `tls.ca_file`
  std::string_view flag;        // the flag that overrides it, without `--`; empty: the file only
  std::string_view value_name;  // the flag's value in --help
  std::string_view meaning;     // the flag's line in --help, before "(file: <key>)"
  std::string& (*field)(agent_config&);
  std::string (*check)(const std::string&);  // why a value is refused; empty when it is not
};

/// Every row, in the order --help lists the flags.
std::span<const string_setting> string_settings();

/// The row of the file key `key`. Throws std::logic_error for a key without one (a programming error).
const string_setting& string_setting_for(std::string_view key);

/// The row of the flag `flag` (without `--`), or null.
const string_setting* string_setting_for_flag(std::string_view flag);

/// The flags, as a message lists them: `--server, --identity, ..., --etcd-password-file`.
std::string overriding_flags();

}  // namespace baton::agent
