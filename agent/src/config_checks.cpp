// SPDX-License-Identifier: Apache-2.0
#include "config_checks.hpp"

#include "baton/common/listen_address.hpp"
#include "baton/common/log.hpp"
#include "baton/error.hpp"

#include <boost/url/parse.hpp>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include <unistd.h>

namespace baton::agent::detail {

std::string quoted(std::string_view s) {
  return "\"" + std::string(s) + "\"";
}

// The protocol's control characters (C0, DEL, C1): what batond refuses in an owner.
bool has_control(std::string_view s) {
  return baton::has_control_characters(s);
}

// The SDK's own checks, one field at a time, so its error is blamed on the field that was just set.
std::string sdk_check(const std::function<void()>& validate) {
  try {
    validate();
  } catch (const baton::exception& e) {
    return e.diagnostic();
  }
  return {};
}

std::string check_server(const std::string& url) {
  baton::client_config c;
  c.server_url = url;
  return sdk_check([&] { c.validate(); });
}

// A TLS file must be there when the agent starts, not when it first connects.
std::string check_readable_file(const std::string& path) {
  if (path.empty()) return "must not be empty (leave it out)";
  if (::access(path.c_str(), R_OK) != 0) return quoted(path) + ": cannot read: " + std::strerror(errno);
  return {};
}

// The SDK's rule: a password file goes with an etcd URL that names a user and no password.
std::string check_etcd_password_combination(const agent_config& c) {
  if (c.etcd_password_file.empty()) return {};
  baton::client_config cc;
  cc.server_url = c.server;
  cc.etcd_password_file = c.etcd_password_file;
  return sdk_check([&] { cc.validate(); });
}

// etcd_lease_revocation_bug is about etcd members: with a batond server it would say nothing.
std::string check_etcd_bug_policy_combination(const agent_config& c) {
  if (!c.etcd_lease_revocation_bug || c.server.rfind("etcd://", 0) == 0 || c.server.rfind("etcds://", 0) == 0)
    return {};
  return "is for an etcd:// or etcds:// server, and server is " +
         quoted(baton::without_credentials(c.server));
}

// Settings that only make sense together: certificates need a TLS server URL, a client certificate its key.
std::string check_tls_combination(const agent_config& c) {
  if (c.tls.empty()) return {};
  if (!baton::uses_tls(c.server))
    return "certificates need an https:// or etcds:// server, and server is " +
           quoted(baton::without_credentials(c.server));
  if (c.tls.cert_file.empty() != c.tls.key_file.empty()) return "cert_file and key_file go together";
  return {};
}

std::string check_identity(const std::string& identity) {
  if (identity.empty()) return "must not be empty (leave it out for <hostname>:<pid>)";
  // The server refuses every control character in an owner, and the identity is an owner's prefix.
  if (has_control(identity)) return "must not contain control characters";
  baton::client_config c;
  c.identity = identity;
  return sdk_check([&] { c.validate(); });
}

std::string check_listen(const std::string& s) {
  try {
    baton::parse_listen(s);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return {};
}

std::string check_lock_key(const std::string& key) {
  // The server's rule for keys (docs/protocol.md).
  if (key.empty() || key.size() > 512 || has_control(key))
    return "a lock key is 1-512 bytes without control characters";
  return {};
}

std::string check_log_level(const std::string& level) {
  baton::log::level ignored;
  if (!baton::log::parse_level(level, ignored))
    return "expected debug, info, warn or error, got " + quoted(level);
  return {};
}

std::string check_log_format(const std::string& format) {
  baton::log::format ignored;
  if (!baton::log::parse_format(format, ignored)) return "expected logfmt or json, got " + quoted(format);
  return {};
}

bool valid_job_name(std::string_view name) {
  if (name.empty() || name.size() > 64 || name == "." || name == "..") return false;
  return std::all_of(name.begin(), name.end(),
                     [](unsigned char c) { return std::isalnum(c) || c == '.' || c == '_' || c == '-'; });
}

// RFC 9110 token characters: what an HTTP method and a header name are made of.
bool is_token(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) {
    return std::isalnum(c) || std::strchr("!#$%&'*+-.^_`|~", c) != nullptr;
  });
}

// RFC 6750 b64token: what may follow `Bearer ` in an Authorization header.
bool is_bearer_token(std::string_view s) {
  const auto body_end = s.find_last_not_of('=');
  if (body_end == std::string_view::npos) return false;
  return std::all_of(s.begin(), s.begin() + body_end + 1,
                     [](unsigned char c) { return std::isalnum(c) || std::strchr("-._~+/", c) != nullptr; });
}

std::string check_url(const std::string& url) {
  // A job's URL may carry a password (http://user:pw@host/): messages quote it without.
  const auto shown = quoted(baton::without_credentials(url));
  const auto u = boost::urls::parse_absolute_uri(url);
  if (!u) return shown + " is not an absolute URL (http://host[:port]/path)";
  if (u->scheme() != "http" && u->scheme() != "https") return shown + " must start with http:// or https://";
  if (!u->has_authority() || u->host().empty()) return shown + " has no host";
  return {};
}

}  // namespace baton::agent::detail
