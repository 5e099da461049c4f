// SPDX-License-Identifier: Apache-2.0
#pragma once
// The agent configuration's validators, shared by the file (config.cpp) and the flags (config_overrides.cpp),
// so a value means the same wherever it is written. Each check_* returns the reason a value is refused, or an
// empty string. Private to the agent's configuration code.

#include "config.hpp"

#include <functional>
#include <string>
#include <string_view>

namespace baton::agent::detail {

/// `s` in double quotes, as messages quote a value.
std::string quoted(std::string_view s);
/// The protocol's control characters (C0, DEL, C1): what batond refuses in an owner.
bool has_control(std::string_view s);
/// The SDK's own checks, one field at a time, so its error is blamed on the field that was just set.
std::string sdk_check(const std::function<void()>& validate);

std::string check_server(const std::string& url);
/// A TLS or password file must be there when the agent starts, not when it first connects.
std::string check_readable_file(const std::string& path);
std::string check_identity(const std::string& identity);
std::string check_listen(const std::string& s);
std::string check_lock_key(const std::string& key);
std::string check_log_level(const std::string& level);
std::string check_log_format(const std::string& format);
/// A job's http.url or a hook's url: an absolute http:// or https:// URL with a host.
std::string check_url(const std::string& url);

/// Settings that only make sense together, checked once all of them are read.
std::string check_etcd_password_combination(const agent_config& c);
std::string check_etcd_bug_policy_combination(const agent_config& c);
std::string check_tls_combination(const agent_config& c);

bool valid_job_name(std::string_view name);
/// RFC 9110 token characters: what an HTTP method and a header name are made of.
bool is_token(std::string_view s);
/// RFC 6750 b64token: what may follow `Bearer ` in an Authorization header.
bool is_bearer_token(std::string_view s);

}  // namespace baton::agent::detail
