// SPDX-License-Identifier: Apache-2.0
#include "config_settings.hpp"

#include "config_checks.hpp"

#include <algorithm>
#include <iterator>
#include <stdexcept>

namespace baton::agent {
namespace {

using namespace detail;

constexpr string_setting settings[] = {
    {"server", "server", "URL", "the lock server", [](agent_config& c) -> std::string& { return c.server; },
     check_server},
    {"identity", "identity", "ID", "this replica's owner name on the server",
     [](agent_config& c) -> std::string& { return c.identity; }, check_identity},
    {"listen", "listen", "ADDR:PORT", "the sidecar API's address, e.g. 127.0.0.1:7071, [::1]:0",
     [](agent_config& c) -> std::string& { return c.listen; }, check_listen},
    {"metrics_listen", "", "", "", [](agent_config& c) -> std::string& { return c.metrics_listen; },
     check_listen},
    {"election.key", "election-key", "KEY", "the lock the replicas compete for",
     [](agent_config& c) -> std::string& { return c.election_key; }, check_lock_key},
    {"log_level", "log-level", "LEVEL", "debug, info, warn or error",
     [](agent_config& c) -> std::string& { return c.log_level; }, check_log_level},
    {"log_format", "log-format", "FORMAT", "logfmt or json, one object per line",
     [](agent_config& c) -> std::string& { return c.log_format; }, check_log_format},
    {"tls.ca_file", "ca-file", "FILE", "CA bundle that signs the server's certificate",
     [](agent_config& c) -> std::string& { return c.tls.ca_file; }, check_readable_file},
    {"tls.cert_file", "cert", "FILE", "client certificate for mutual TLS; needs --key",
     [](agent_config& c) -> std::string& { return c.tls.cert_file; }, check_readable_file},
    {"tls.key_file", "key", "FILE", "private key of --cert",
     [](agent_config& c) -> std::string& { return c.tls.key_file; }, check_readable_file},
    {"etcd_password_file", "etcd-password-file", "FILE",
     "password of the etcd:// URL's user, one trailing newline stripped",
     [](agent_config& c) -> std::string& { return c.etcd_password_file; }, check_readable_file},
};

}  // namespace

std::span<const string_setting> string_settings() {
  return settings;
}

const string_setting& string_setting_for(std::string_view key) {
  const auto it = std::find_if(std::begin(settings), std::end(settings),
                               [&](const string_setting& s) { return s.key == key; });
  if (it == std::end(settings)) throw std::logic_error("no string setting " + std::string(key));
  return *it;
}

const string_setting* string_setting_for_flag(std::string_view flag) {
  if (flag.empty()) return nullptr;
  const auto it = std::find_if(std::begin(settings), std::end(settings),
                               [&](const string_setting& s) { return s.flag == flag; });
  return it == std::end(settings) ? nullptr : &*it;
}

std::string overriding_flags() {
  std::string out;
  for (const auto& s : settings)
    if (!s.flag.empty()) out += (out.empty() ? "--" : ", --") + std::string(s.flag);
  return out;
}

}  // namespace baton::agent
