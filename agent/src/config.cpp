// SPDX-License-Identifier: Apache-2.0
#include "config.hpp"

#include "baton/common/duration.hpp"
#include "baton/common/listen_address.hpp"
#include "baton/common/log.hpp"
#include "baton/common/token_file.hpp"
#include "baton/error.hpp"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>
#include <boost/url/parse.hpp>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <sstream>

#include <grp.h>
#include <pwd.h>
#include <unistd.h>

namespace baton::agent {
namespace {

std::string format_error(const std::string& file, int line, int column, const std::string& key,
                         const std::string& reason) {
  std::string out;
  if (!file.empty()) out = file;
  if (line > 0) out += (out.empty() ? "" : ":") + std::to_string(line) + ":" + std::to_string(column);
  if (!out.empty()) out += ": ";
  if (!key.empty()) out += key + ": ";
  return out + reason;
}

std::string quoted(std::string_view s) {
  return "\"" + std::string(s) + "\"";
}

// The protocol's control characters (C0, DEL, C1): what batond refuses in an owner.
bool has_control(std::string_view s) {
  return baton::has_control_characters(s);
}

// Validators shared by the file and the flags, so a value means the same wherever it is written. Each returns
// the reason the value is refused, or an empty string.

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
    parse_listen(s);
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

// Levenshtein distance, for "did you mean" on unknown keys.
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      const bool same = std::tolower(static_cast<unsigned char>(a[i - 1])) ==
                        std::tolower(static_cast<unsigned char>(b[j - 1]));
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (same ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string unknown_key_reason(std::string_view key, std::span<const std::string_view> allowed) {
  std::string_view best;
  std::size_t best_distance = key.size() <= 4 ? 1 : 2;  // further than this is a guess, not a typo
  for (const auto candidate : allowed) {
    const auto d = edit_distance(key, candidate);
    if (d <= best_distance) best = candidate, best_distance = d;
  }
  if (!best.empty()) return "unknown key (did you mean " + std::string(best) + "?)";
  std::string list;
  for (const auto candidate : allowed)
    list += (list.empty() ? "" : ", ") + std::string(candidate);
  return "unknown key (expected one of: " + list + ")";
}

std::string kind_of(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map:
      return "a mapping";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Scalar:
      return "a string";
    default:
      return "nothing";
  }
}

std::string child(const std::string& path, std::string_view key) {
  return path.empty() ? std::string(key) : path + "." + std::string(key);
}

constexpr std::string_view top_keys[] = {"server",
                                         "identity",
                                         "listen",
                                         "mode",
                                         "log_level",
                                         "log_format",
                                         "resign_token",
                                         "shutdown_grace",
                                         "election",
                                         "jobs",
                                         "tls",
                                         "token_file",
                                         "history_limit",
                                         "etcd_password_file",
                                         "etcd_lease_revocation_bug",
                                         "metrics_listen",
                                         "reload_on_change"};
constexpr std::string_view tls_keys[] = {"ca_file", "cert_file", "key_file"};
constexpr std::string_view election_keys[] = {"key", "ttl", "renew_every", "jitter", "safety_margin"};
constexpr std::string_view job_keys[] = {
    "name",    "schedule",      "timezone",          "command",   "shell",         "http",
    "timeout", "grace",         "overlap",           "misfire",   "history_limit", "suspend",
    "retries", "retry_backoff", "starting_deadline", "jitter",    "env",           "working_dir",
    "user",    "on_failure",    "on_success",        "on_missed", "mode"};
constexpr std::string_view hook_keys[] = {"url", "headers", "ca_file", "command"};
constexpr std::string_view http_keys[] = {"method", "url", "headers", "body", "ca_file"};

// Reads typed values out of the YAML tree, failing with the node's position and key path. yaml-cpp's own
// as<T>() is not used: it accepts YAML 1.1 spellings (`yes`, `on`) and its errors carry no key path.
class reader {
 public:
  explicit reader(std::string_view file) : file_(file) {}

  [[noreturn]] void fail(const YAML::Mark& at, const std::string& key, const std::string& reason) const {
    if (at.is_null()) throw config_error(file_, 0, 0, key, reason);
    throw config_error(file_, at.line + 1, at.column + 1, key, reason);
  }
  [[noreturn]] void fail(const YAML::Node& at, const std::string& key, const std::string& reason) const {
    fail(at.Mark(), key, reason);
  }
  void check(const YAML::Node& at, const std::string& key, const std::string& reason) const {
    if (!reason.empty()) fail(at, key, reason);
  }

  /// Calls `each(name, key, value)` for every entry of the mapping `map`, refusing non-mappings, non-string
  /// keys and repeated keys (yaml-cpp would silently keep one of them).
  void entries(
      const YAML::Node& map, const std::string& path,
      const std::function<void(const std::string&, const YAML::Node&, const YAML::Node&)>& each) const {
    if (!map.IsMap()) fail(map, path, "expected a mapping, got " + kind_of(map));
    std::vector<std::pair<std::string, int>> seen;
    for (const auto& entry : map) {
      const YAML::Node& key = entry.first;
      if (!key.IsScalar()) fail(key, path, "keys must be strings, got " + kind_of(key));
      const auto previous =
          std::find_if(seen.begin(), seen.end(), [&](auto& s) { return s.first == key.Scalar(); });
      if (previous != seen.end())
        fail(key, child(path, key.Scalar()),
             "duplicate key (first at line " + std::to_string(previous->second) + ")");
      seen.emplace_back(key.Scalar(), key.Mark().line + 1);
      // Pointed at the key: yaml-cpp places an empty value at the start of the next line.
      if (entry.second.IsNull())
        fail(key, child(path, key.Scalar()), "has no value (leave the key out for the default)");
      each(key.Scalar(), key, entry.second);
    }
  }

  /// Checks that `map` is a mapping whose keys are all in `allowed`.
  void known_keys(const YAML::Node& map, const std::string& path,
                  std::span<const std::string_view> allowed) const {
    if (!map.IsMap()) fail(map, path, "expected a mapping, got " + kind_of(map));
    for (const auto& entry : map) {
      const YAML::Node& key = entry.first;
      if (key.IsScalar() && std::find(allowed.begin(), allowed.end(), key.Scalar()) == allowed.end())
        fail(key, child(path, key.Scalar()), unknown_key_reason(key.Scalar(), allowed));
    }
    entries(map, path, [](auto&, auto&, auto&) {});
  }

  std::string text(const YAML::Node& n, const std::string& path) const {
    if (n.IsNull()) fail(n, path, "has no value (leave the key out for the default)");
    if (!n.IsScalar()) fail(n, path, "expected a string, got " + kind_of(n));
    return n.Scalar();
  }

  std::chrono::milliseconds duration(const YAML::Node& n, const std::string& path) const {
    const auto s = text(n, path);
    if (const auto d = baton::parse_duration(s)) return *d;
    if (!s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); }))
      fail(n, path, quoted(s) + " has no unit (write " + s + "s, " + s + "ms, " + s + "m or " + s + "h)");
    fail(n, path, quoted(s) + " is not a duration (write e.g. 500ms, 10s, 2m or 1h30m)");
  }

  std::chrono::milliseconds positive_duration(const YAML::Node& n, const std::string& path) const {
    const auto d = duration(n, path);
    if (d.count() <= 0) fail(n, path, "must be positive (leave the key out for the default)");
    return d;
  }

  bool boolean(const YAML::Node& n, const std::string& path) const {
    const auto s = text(n, path);
    // YAML 1.2 booleans only: `yes`/`no`/`on`/`off` are strings there, so they are refused, not guessed.
    if (s == "true" || s == "True" || s == "TRUE") return true;
    if (s == "false" || s == "False" || s == "FALSE") return false;
    fail(n, path, "expected true or false, got " + quoted(s));
  }

  double number(const YAML::Node& n, const std::string& path) const {
    const auto s = text(n, path);
    double value = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
    if (s.empty() || ec != std::errc{} || end != s.data() + s.size() || !std::isfinite(value))
      fail(n, path, "expected a number, got " + quoted(s));
    return value;
  }

  /// A whole number from `min` to `max`.
  std::size_t count(const YAML::Node& n, const std::string& path, std::size_t min, std::size_t max) const {
    const auto s = text(n, path);
    std::size_t value = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
    if (s.empty() || ec != std::errc{} || end != s.data() + s.size() || value < min || value > max)
      fail(n, path,
           "expected a whole number from " + std::to_string(min) + " to " + std::to_string(max) + ", got " +
               quoted(s));
    return value;
  }

  template <class E>
  E choice(const YAML::Node& n, const std::string& path,
           std::initializer_list<std::pair<std::string_view, E>> options) const {
    const auto s = text(n, path);
    std::string names;
    std::size_t i = 0;
    for (const auto& [name, value] : options) {
      if (s == name) return value;
      if (i > 0) names += i + 1 == options.size() ? " or " : ", ";
      names += name;
      ++i;
    }
    fail(n, path, "expected " + names + ", got " + quoted(s));
  }

 private:
  std::string file_;
};

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

http_job read_http(const reader& r, const YAML::Node& node, const std::string& path) {
  r.known_keys(node, path, http_keys);
  http_job http;
  if (const auto method = node["method"]) {
    http.method = r.text(method, path + ".method");
    std::transform(http.method.begin(), http.method.end(), http.method.begin(),
                   [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
    if (!is_token(http.method))
      r.fail(method, path + ".method", "expected an HTTP method such as GET or POST");
  }
  const auto url = node["url"];
  if (!url) r.fail(node, path + ".url", "required key is missing");
  http.url = r.text(url, path + ".url");
  r.check(url, path + ".url", check_url(http.url));
  if (const auto headers = node["headers"]) {
    r.entries(headers, path + ".headers",
              [&](const std::string& name, const YAML::Node& name_node, const YAML::Node& value) {
                const auto key = path + ".headers." + name;
                if (!is_token(name))
                  r.fail(name_node, key, "a header name is letters, digits and !#$%&'*+-.^_`|~");
                auto v = r.text(value, key);
                // CR or LF would let a value start a header (or a request) of its own.
                if (v.find_first_of(std::string_view("\r\n\0", 3)) != std::string::npos)
                  r.fail(value, key, "a header value must not contain CR, LF or NUL");
                http.headers.emplace_back(name, std::move(v));
              });
  }
  if (const auto body = node["body"]) http.body = r.text(body, path + ".body");
  if (const auto ca = node["ca_file"]) {
    http.ca_file = r.text(ca, path + ".ca_file");
    r.check(ca, path + ".ca_file", check_readable_file(http.ca_file));
    // A CA for a plain URL would look like protection that is not there.
    if (http.url.rfind("https://", 0) != 0) r.fail(ca, path + ".ca_file", "needs an https:// url");
  }
  return http;
}

std::vector<std::string> read_command(const reader& r, const YAML::Node& node, const std::string& path,
                                      bool shell) {
  std::vector<std::string> command;
  if (node.IsScalar()) {
    if (!shell)
      r.fail(node, path,
             "a string command needs shell: true; without a shell write a list: [\"/path/prog\", \"arg\"]");
    command.push_back(node.Scalar());
  } else if (node.IsSequence()) {
    for (std::size_t i = 0; i < node.size(); ++i)
      command.push_back(r.text(node[i], path + "[" + std::to_string(i) + "]"));
  } else {
    r.fail(node, path, "expected a list of strings, got " + kind_of(node));
  }
  if (command.empty()) r.fail(node, path, "the command is empty");
  if (command.front().empty())
    r.fail(node, path + "[0]", shell ? "the script is empty" : "the program is empty");
  for (std::size_t i = 0; i < command.size(); ++i) {
    // execve() takes C strings: a NUL would silently cut the argument short.
    if (command[i].find('\0') != std::string::npos)
      r.fail(node, path + "[" + std::to_string(i) + "]", "contains a NUL byte");
  }
  return command;
}

// The shortest time between two consecutive slots of `sched`, over its first 1000 slots from 2001-01-01 (a
// span that covers each day of the week, month lengths and daylight-saving shifts for all but the rarest
// schedules).
std::chrono::seconds shortest_gap(const schedule& sched, const date::time_zone* tz) {
  std::chrono::seconds best = std::chrono::seconds::max();
  auto at = sched.next_fire(date::sys_days(date::year{2001} / 1 / 1), tz);
  for (int i = 0; at && i < 1000; ++i) {
    const auto next = sched.next_fire(*at, tz);
    if (!next) break;
    best = std::min(best, std::chrono::duration_cast<std::chrono::seconds>(*next - *at));
    at = next;
  }
  return best;
}

job_hook read_hook(const reader& r, const YAML::Node& node, const std::string& path) {
  if (!node.IsMap()) r.fail(node, path, "expected a map with url (a webhook) or command");
  r.known_keys(node, path, hook_keys);
  job_hook hook;
  const auto command = node["command"];
  if (command) {
    if (node["url"] || node["headers"] || node["ca_file"])
      r.fail(node, path, "has both command and a webhook's keys; a hook is one of them");
    hook.command = read_command(r, command, path + ".command", false);
    return hook;
  }
  if (!node["url"]) r.fail(node, path, "needs a url (a webhook) or a command");
  auto http = read_http(r, node, path);
  hook.url = std::move(http.url);
  hook.ca_file = std::move(http.ca_file);
  hook.headers = std::move(http.headers);
  return hook;
}

// The account `name` as a command's credentials; empty with `why` when there is none, or when this process
// (not root) could not switch to it.
std::optional<child_setup::credentials> resolve_user(const std::string& name, std::string& why) {
  std::vector<char> buf(16384);
  struct passwd pw {};
  struct passwd* found = nullptr;
  const int err = ::getpwnam_r(name.c_str(), &pw, buf.data(), buf.size(), &found);
  if (err != 0 || !found) {
    why = quoted(name) + ": no such user on this machine";
    return std::nullopt;
  }
  child_setup::credentials c;
  c.uid = pw.pw_uid;
  c.gid = pw.pw_gid;
  c.name = name;
  int count = 64;
  c.groups.resize(static_cast<std::size_t>(count));
  if (::getgrouplist(name.c_str(), pw.pw_gid, c.groups.data(), &count) < 0) {
    c.groups.resize(static_cast<std::size_t>(count));
    ::getgrouplist(name.c_str(), pw.pw_gid, c.groups.data(), &count);
  }
  c.groups.resize(static_cast<std::size_t>(std::max(count, 0)));
  if (::geteuid() != 0 && ::geteuid() != c.uid) {
    why = quoted(name) + ": the agent runs as uid " + std::to_string(::geteuid()) +
          "; only an agent running as root can run a job as another user";
    return std::nullopt;
  }
  return c;
}

// Bounds of history_limit: a run record is a few hundred bytes, so the bound keeps the history of a busy
// agent within megabytes.
constexpr std::size_t max_history = 1000;

agent_mode read_mode(const reader& r, const YAML::Node& node, const std::string& path) {
  return r.choice<agent_mode>(node, path, {{"leader", agent_mode::leader}, {"per-job", agent_mode::per_job}});
}

job_config read_job(const reader& r, const YAML::Node& node, const std::string& path,
                    std::size_t history_limit, agent_mode mode) {
  r.known_keys(node, path, job_keys);
  job_config job;
  job.history_limit = history_limit;
  job.mode = mode;
  if (const auto n = node["mode"]) job.mode = read_mode(r, n, path + ".mode");

  const auto name = node["name"];
  if (!name) r.fail(node, path + ".name", "required key is missing");
  job.name = r.text(name, path + ".name");
  if (!valid_job_name(job.name))
    r.fail(name, path + ".name",
           quoted(job.name) +
               ": a job name is 1-64 characters of A-Z a-z 0-9 . _ - (and not . or ..), as it "
               "becomes a lock key and an environment value");

  if (const auto tz = node["timezone"]) {
    job.timezone = r.text(tz, path + ".timezone");
    // UTC is the one zone that needs no tz database, so a host without tzdata can still run UTC jobs.
    if (job.timezone != "UTC") {
      try {
        job.tz = date::locate_zone(job.timezone);
      } catch (const std::exception&) {
        r.fail(tz, path + ".timezone",
               "unknown time zone " + quoted(job.timezone) + " (IANA names, e.g. Europe/Kyiv)");
      }
    }
  }

  const auto sched = node["schedule"];
  if (!sched) r.fail(node, path + ".schedule", "required key is missing");
  const auto expression = r.text(sched, path + ".schedule");
  try {
    job.sched = schedule::parse(expression);
  } catch (const cron_error& e) {
    r.fail(sched, path + ".schedule", e.what());
  }
  // A schedule like `0 0 30 2 *` parses but would leave the job silently idle forever. The question has the
  // same answer from any instant, so a fixed one keeps parsing free of the clock.
  if (!job.sched.next_fire(std::chrono::sys_seconds{}, job.tz))
    r.fail(sched, path + ".schedule", quoted(expression) + " never fires");

  if (const auto shell = node["shell"]) job.shell = r.boolean(shell, path + ".shell");
  const auto command = node["command"];
  const auto http = node["http"];
  if (command && http) r.fail(node, path, "has both command and http; a job runs exactly one of them");
  if (!command && !http) r.fail(node, path, "needs a command or an http request");
  if (command) {
    job.command = read_command(r, command, path + ".command", job.shell);
    const auto at = (command.IsSequence() ? command[0] : command).Mark();
    if (!at.is_null()) job.command_at = {at.line + 1, at.column + 1};
  }
  if (http) {
    if (job.shell) r.fail(node["shell"], path + ".shell", "applies to a command, not to an http job");
    job.http = read_http(r, http, path + ".http");
  }

  if (const auto timeout = node["timeout"]) job.timeout = r.duration(timeout, path + ".timeout");
  if (const auto grace = node["grace"]) {
    job.grace = r.duration(grace, path + ".grace");
    if (const auto at = grace.Mark(); !at.is_null()) job.grace_at = {at.line + 1, at.column + 1};
  }
  if (const auto overlap = node["overlap"])
    job.overlap = r.choice<overlap_policy>(overlap, path + ".overlap",
                                           {{"forbid", overlap_policy::forbid},
                                            {"allow", overlap_policy::allow},
                                            {"replace", overlap_policy::replace}});
  if (const auto misfire = node["misfire"])
    job.misfire = r.choice<misfire_policy>(
        misfire, path + ".misfire", {{"skip", misfire_policy::skip}, {"run_once", misfire_policy::run_once}});
  if (const auto n = node["history_limit"])
    job.history_limit = r.count(n, path + ".history_limit", 1, max_history);
  if (const auto n = node["suspend"]) job.suspend = r.boolean(n, path + ".suspend");
  if (const auto n = node["retries"]) job.retries = static_cast<int>(r.count(n, path + ".retries", 0, 100));
  if (const auto n = node["retry_backoff"])
    job.retry_backoff = r.positive_duration(n, path + ".retry_backoff");
  if (const auto n = node["jitter"]) {
    job.jitter = r.duration(n, path + ".jitter");
    const auto gap = shortest_gap(job.sched, job.tz);
    if (job.jitter >= gap)
      r.fail(n, path + ".jitter",
             "must be less than the shortest time between the schedule's slots (" +
                 std::to_string(gap.count()) + "s), or a run would start after the next slot");
  }
  if (const auto env = node["env"]) {
    if (job.http) r.fail(env, path + ".env", "applies to a command, not to an http job");
    r.entries(
        env, path + ".env",
        [&](const std::string& name, const YAML::Node& name_node, const YAML::Node& value) {
          const auto key = path + ".env." + name;
          const bool valid =
              !name.empty() && (std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_') &&
              std::all_of(name.begin(), name.end(),
                          [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
          if (!valid)
            r.fail(name_node, key, "a variable name is letters, digits and _, not starting with a digit");
          if (name.rfind("BATON_", 0) == 0)
            r.fail(name_node, key, "BATON_* variables are the agent's (the token, the slot, the run id)");
          auto v = r.text(value, key);
          if (v.find('\0') != std::string::npos) r.fail(value, key, "a value must not contain NUL");
          job.env.emplace_back(name, std::move(v));
        });
  }
  if (const auto dir = node["working_dir"]) {
    if (job.http) r.fail(dir, path + ".working_dir", "applies to a command, not to an http job");
    job.working_dir = r.text(dir, path + ".working_dir");
    if (job.working_dir.empty() || job.working_dir[0] != '/')
      r.fail(dir, path + ".working_dir", "must be an absolute path");
  }
  if (const auto user = node["user"]) {
    if (job.http) r.fail(user, path + ".user", "applies to a command, not to an http job");
    job.user = r.text(user, path + ".user");
    std::string why;
    job.credentials = resolve_user(job.user, why);
    if (!job.credentials) r.fail(user, path + ".user", why);
  }
  if (const auto n = node["on_failure"]) job.on_failure = read_hook(r, n, path + ".on_failure");
  if (const auto n = node["on_success"]) job.on_success = read_hook(r, n, path + ".on_success");
  if (const auto n = node["on_missed"]) job.on_missed = read_hook(r, n, path + ".on_missed");
  if (const auto n = node["starting_deadline"]) {
    if (job.misfire != misfire_policy::run_once)
      r.fail(n, path + ".starting_deadline", "applies to misfire: run_once (a skipped slot has no deadline)");
    const auto d = r.duration(n, path + ".starting_deadline");
    if (d < std::chrono::seconds(1) || d % std::chrono::seconds(1) != std::chrono::milliseconds(0))
      r.fail(n, path + ".starting_deadline", "must be whole seconds, at least 1s (slots are whole seconds)");
    job.starting_deadline = d;
  }
  return job;
}

void read_election(const reader& r, const YAML::Node& node, agent_config& config) {
  r.known_keys(node, "election", election_keys);
  if (const auto key = node["key"]) {
    config.election_key = r.text(key, "election.key");
    r.check(key, "election.key", check_lock_key(config.election_key));
  }
  // The SDK owns the rules tying these together (lease_options::validate). They are applied one field at a
  // time, in an order where each step only adds the field just read, so its error names that field.
  auto& lease = config.election;
  const auto validate_with = [&](const std::string& field, auto read) {
    const auto n = node[field];
    if (!n) return;
    read(n, "election." + field);
    r.check(n, "election." + field, sdk_check([&] { lease.validate(); }));
  };
  validate_with("ttl",
                [&](const YAML::Node& n, const std::string& p) { lease.ttl = r.positive_duration(n, p); });
  validate_with("jitter", [&](const YAML::Node& n, const std::string& p) { lease.jitter = r.number(n, p); });
  validate_with("safety_margin", [&](const YAML::Node& n, const std::string& p) {
    lease.safety_margin = r.positive_duration(n, p);
  });
  validate_with("renew_every", [&](const YAML::Node& n, const std::string& p) {
    lease.renew_every = r.positive_duration(n, p);
  });
}

void read_tls(const reader& r, const YAML::Node& node, agent_config& config) {
  r.known_keys(node, "tls", tls_keys);
  const std::pair<std::string_view, std::string baton::tls_config::*> files[] = {
      {"ca_file", &baton::tls_config::ca_file},
      {"cert_file", &baton::tls_config::cert_file},
      {"key_file", &baton::tls_config::key_file}};
  for (const auto& [key, field] : files) {
    if (const auto n = node[std::string(key)]) {
      const auto path = child("tls", key);
      config.tls.*field = r.text(n, path);
      r.check(n, path, check_readable_file(config.tls.*field));
    }
  }
}

// The flags that override the file (apply_overrides), each validated as its key in the file is.
struct flag_target {
  std::string_view flag;
  std::string& (*field)(agent_config&);
  std::string (*check)(const std::string&);
};
constexpr flag_target overridable[] = {
    {"server", [](agent_config& c) -> std::string& { return c.server; }, check_server},
    {"identity", [](agent_config& c) -> std::string& { return c.identity; }, check_identity},
    {"listen", [](agent_config& c) -> std::string& { return c.listen; }, check_listen},
    {"election-key", [](agent_config& c) -> std::string& { return c.election_key; }, check_lock_key},
    {"log-level", [](agent_config& c) -> std::string& { return c.log_level; }, check_log_level},
    {"log-format", [](agent_config& c) -> std::string& { return c.log_format; }, check_log_format},
    {"ca-file", [](agent_config& c) -> std::string& { return c.tls.ca_file; }, check_readable_file},
    {"cert", [](agent_config& c) -> std::string& { return c.tls.cert_file; }, check_readable_file},
    {"key", [](agent_config& c) -> std::string& { return c.tls.key_file; }, check_readable_file},
    {"etcd-password-file", [](agent_config& c) -> std::string& { return c.etcd_password_file; },
     check_readable_file},
};

}  // namespace

config_error::config_error(std::string file, int line, int column, std::string key, std::string reason)
    : std::runtime_error(format_error(file, line, column, key, reason)),
      file_(std::move(file)),
      line_(line),
      column_(column),
      key_(std::move(key)),
      reason_(std::move(reason)) {}

namespace {

// Counts the documents of a stream and notes where the second one's content starts. yaml-cpp 0.7's LoadAll
// never returns on some malformed streams (a stray `,` yields empty document after empty document without
// consuming input, allocating all the while), so parse_config reads at most two documents this way and then
// loads the first with Load().
class document_counter final : public YAML::EventHandler {
 public:
  int documents = 0;
  std::optional<YAML::Mark> second_at;

  void OnDocumentStart(const YAML::Mark& m) override {
    if (++documents == 2) second_start_ = m;
  }
  void OnDocumentEnd() override {
    if (documents == 2 && !second_at) second_at = second_start_;
  }
  void OnNull(const YAML::Mark& m, YAML::anchor_t) override { node(m); }
  void OnAlias(const YAML::Mark& m, YAML::anchor_t) override { node(m); }
  void OnScalar(const YAML::Mark& m, const std::string&, YAML::anchor_t, const std::string&) override {
    node(m);
  }
  void OnSequenceStart(const YAML::Mark& m, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    node(m);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& m, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    node(m);
  }
  void OnMapEnd() override {}

 private:
  void node(const YAML::Mark& m) {
    if (documents == 2 && !second_at) second_at = m;
  }
  YAML::Mark second_start_;
};

}  // namespace

agent_config parse_config(std::string_view yaml_text, std::string_view file_name) {
  const reader r(file_name);
  std::vector<YAML::Node> documents;
  try {
    std::istringstream in{std::string(yaml_text)};
    YAML::Parser parser(in);
    document_counter counter;
    while (counter.documents < 2 && parser.HandleNextDocument(counter)) {
    }
    // yaml-cpp's Load() reads the first document only; a second one is refused rather than ignored.
    if (counter.documents > 1)
      r.fail(counter.second_at.value_or(YAML::Mark{}), "",
             "a second YAML document; the configuration is one document");
    if (counter.documents == 1) documents.push_back(YAML::Load(std::string(yaml_text)));
  } catch (const YAML::Exception& e) {
    // The likeliest way to meet YAML aliases in this file is an unquoted schedule: `schedule: */5 * * * *`.
    const bool alias = e.msg.find("alias") != std::string::npos || e.msg.find("anchor") != std::string::npos;
    r.fail(e.mark, "", e.msg + (alias ? " (quote cron schedules: a bare * starts a YAML alias)" : ""));
  }

  agent_config config;
  // An empty file (or only comments) is the default configuration: an agent with no jobs still elects a
  // leader, which other processes can ask about.
  if (documents.empty() || documents[0].IsNull()) return config;
  const YAML::Node& root = documents[0];
  if (!root.IsMap()) r.fail(root, "", "the configuration must be a mapping of keys, got " + kind_of(root));
  r.known_keys(root, "", top_keys);

  if (const auto n = root["server"]) {
    config.server = r.text(n, "server");
    r.check(n, "server", check_server(config.server));
  }
  if (const auto n = root["identity"]) {
    config.identity = r.text(n, "identity");
    r.check(n, "identity", check_identity(config.identity));
  }
  if (const auto n = root["metrics_listen"]) {
    config.metrics_listen = r.text(n, "metrics_listen");
    r.check(n, "metrics_listen", check_listen(config.metrics_listen));
  }
  if (const auto n = root["listen"]) {
    config.listen = r.text(n, "listen");
    r.check(n, "listen", check_listen(config.listen));
  }
  if (const auto n = root["mode"]) config.mode = read_mode(r, n, "mode");
  if (const auto n = root["log_level"]) {
    config.log_level = r.text(n, "log_level");
    r.check(n, "log_level", check_log_level(config.log_level));
  }
  if (const auto n = root["log_format"]) {
    config.log_format = r.text(n, "log_format");
    r.check(n, "log_format", check_log_format(config.log_format));
  }
  if (const auto n = root["resign_token"]) {
    config.resign_token = r.text(n, "resign_token");
    if (config.resign_token.empty())
      r.fail(n, "resign_token", "must not be empty (leave it out for no token)");
    if (!is_bearer_token(config.resign_token))
      r.fail(n, "resign_token", "a bearer token is letters, digits and -._~+/ with optional trailing =");
  }
  if (const auto n = root["token_file"]) {
    config.token_file = r.text(n, "token_file");
    if (config.token_file.empty()) r.fail(n, "token_file", "must not be empty (leave it out for no token)");
  }
  if (const auto n = root["shutdown_grace"]) config.shutdown_grace = r.duration(n, "shutdown_grace");
  if (const auto n = root["reload_on_change"]) {
    config.reload_on_change = r.duration(n, "reload_on_change");
    if (config.reload_on_change.count() != 0 && config.reload_on_change < std::chrono::milliseconds(100))
      r.fail(n, "reload_on_change", "0s (off) or at least 100ms");
  }
  if (const auto n = root["history_limit"])
    config.history_limit = r.count(n, "history_limit", 1, max_history);
  if (const auto n = root["election"]) read_election(r, n, config);
  if (const auto n = root["tls"]) {
    read_tls(r, n, config);
    r.check(n, "tls", check_tls_combination(config));
  }
  if (const auto n = root["etcd_password_file"]) {
    config.etcd_password_file = r.text(n, "etcd_password_file");
    r.check(n, "etcd_password_file", check_readable_file(config.etcd_password_file));
    r.check(n, "etcd_password_file", check_etcd_password_combination(config));
  }
  if (const auto n = root["etcd_lease_revocation_bug"]) {
    config.etcd_lease_revocation_bug = r.choice<baton::etcd_bug_policy>(
        n, "etcd_lease_revocation_bug",
        {{"warn", baton::etcd_bug_policy::warn}, {"refuse", baton::etcd_bug_policy::refuse}});
    r.check(n, "etcd_lease_revocation_bug", check_etcd_bug_policy_combination(config));
  }

  if (const auto jobs = root["jobs"]) {
    if (!jobs.IsSequence()) r.fail(jobs, "jobs", "expected a list of jobs, got " + kind_of(jobs));
    for (std::size_t i = 0; i < jobs.size(); ++i) {
      const auto path = "jobs[" + std::to_string(i) + "]";
      auto job = read_job(r, jobs[i], path, config.history_limit, config.mode);
      // Names are lock keys and log fields: two jobs with one name would share a lock and a history.
      for (std::size_t j = 0; j < config.jobs.size(); ++j) {
        if (config.jobs[j].name == job.name)
          r.fail(jobs[i]["name"], path + ".name",
                 "duplicate job name " + quoted(job.name) + " (also jobs[" + std::to_string(j) + "], line " +
                     std::to_string(jobs[j]["name"].Mark().line + 1) + ")");
      }
      config.jobs.push_back(std::move(job));
    }
  }
  return config;
}

agent_config load_config(const std::string& path) {
  const std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!file) throw config_error(path, 0, 0, "", std::string("cannot open: ") + std::strerror(errno));
  std::string text;
  char buffer[8192];
  std::size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, file.get())) > 0)
    text.append(buffer, n);
  // fopen() succeeds on a directory; the read is where EISDIR shows.
  if (std::ferror(file.get()))
    throw config_error(path, 0, 0, "", std::string("cannot read: ") + std::strerror(errno));
  return parse_config(text, path);
}

namespace {

bool same_lease(const baton::lease_options& a, const baton::lease_options& b) {
  return a.ttl == b.ttl && a.renew_every == b.renew_every && a.jitter == b.jitter &&
         a.safety_margin == b.safety_margin;
}

bool same_http(const std::optional<http_job>& a, const std::optional<http_job>& b) {
  if (!a || !b) return !a && !b;
  return a->method == b->method && a->url == b->url && a->headers == b->headers && a->body == b->body &&
         a->ca_file == b->ca_file;
}

// Everything that decides when and how a job runs; not where it is written in the file.
bool same_job(const job_config& a, const job_config& b) {
  return a.name == b.name && a.sched.text() == b.sched.text() && a.timezone == b.timezone &&
         a.command == b.command && a.shell == b.shell && same_http(a.http, b.http) &&
         a.timeout == b.timeout && a.grace == b.grace && a.overlap == b.overlap && a.misfire == b.misfire &&
         a.history_limit == b.history_limit && a.suspend == b.suspend && a.retries == b.retries &&
         a.retry_backoff == b.retry_backoff && a.starting_deadline == b.starting_deadline &&
         a.jitter == b.jitter && a.env == b.env && a.working_dir == b.working_dir && a.user == b.user &&
         a.on_failure == b.on_failure && a.on_success == b.on_success && a.on_missed == b.on_missed &&
         a.mode == b.mode;
}

const job_config* find_job(const std::vector<job_config>& jobs, const std::string& name) {
  const auto it = std::find_if(jobs.begin(), jobs.end(), [&](const job_config& j) { return j.name == name; });
  return it == jobs.end() ? nullptr : &*it;
}

}  // namespace

config_changes compare_configs(const agent_config& running, const agent_config& loaded) {
  config_changes out;
  const auto differs = [&](std::string key, bool changed, bool needs_restart) {
    if (!changed) return;
    if (needs_restart) out.restart_needed.push_back(key);
    out.keys.push_back(std::move(key));
  };
  const auto& a = running;
  const auto& b = loaded;
  differs("server", a.server != b.server, true);
  // Applied by reading the files into the client's TLS context (client::reload_tls()), as unchanged paths are
  // read again on every reload.
  differs("tls",
          a.tls.ca_file != b.tls.ca_file || a.tls.cert_file != b.tls.cert_file ||
              a.tls.key_file != b.tls.key_file,
          false);
  differs("etcd_password_file", a.etcd_password_file != b.etcd_password_file, true);
  differs("etcd_lease_revocation_bug", a.etcd_lease_revocation_bug != b.etcd_lease_revocation_bug, true);
  differs("identity", a.identity != b.identity, true);
  differs("listen", a.listen != b.listen, true);
  differs("metrics_listen", a.metrics_listen != b.metrics_listen, true);
  differs("mode", a.mode != b.mode, true);
  differs("log_level", a.log_level != b.log_level, false);
  differs("log_format", a.log_format != b.log_format, false);
  differs("token_file", a.token_file != b.token_file || a.server_token != b.server_token, true);
  differs("resign_token", a.resign_token != b.resign_token, false);
  differs("shutdown_grace", a.shutdown_grace != b.shutdown_grace, false);
  differs("reload_on_change", a.reload_on_change != b.reload_on_change, true);
  out.election = a.election_key != b.election_key || !same_lease(a.election, b.election);
  differs("election", out.election, false);
  differs("history_limit", a.history_limit != b.history_limit, false);
  for (const auto& job : b.jobs) {
    const auto* before = find_job(a.jobs, job.name);
    if (!before)
      out.jobs_added.push_back(job.name);
    else if (!same_job(*before, job))
      out.jobs_changed.push_back(job.name);
  }
  for (const auto& job : a.jobs)
    if (!find_job(b.jobs, job.name)) out.jobs_removed.push_back(job.name);
  differs("jobs", !out.jobs_added.empty() || !out.jobs_removed.empty() || !out.jobs_changed.empty(), false);
  return out;
}

// The rule batond's --listen follows too (baton/common/listen_address.hpp).
boost::asio::ip::tcp::endpoint parse_listen(const std::string& s) {
  return baton::parse_listen(s);
}

std::string to_listen_string(const boost::asio::ip::tcp::endpoint& endpoint) {
  return baton::to_listen_string(endpoint);
}

void load_server_token(agent_config& config, const std::string& config_path) {
  if (config.token_file.empty()) return;
  try {
    config.server_token = read_token_file(config.token_file);
  } catch (const token_file_error& e) {
    throw config_error(config_path, 0, 0, "token_file", config.token_file + ": " + e.what());
  }
}

void apply_overrides(agent_config& config, const std::map<std::string, std::string>& flags) {
  agent_config next = config;  // all or nothing: a bad flag leaves the configuration as it was
  for (const auto& [raw_name, value] : flags) {
    const auto name =
        std::string_view(raw_name).substr(std::min(raw_name.find_first_not_of('-'), raw_name.size()));
    const auto flag = "--" + std::string(name);
    const auto target = std::find_if(std::begin(overridable), std::end(overridable),
                                     [&](const flag_target& t) { return t.flag == name; });
    if (target == std::end(overridable))
      throw config_error("", 0, 0, flag,
                         "unknown flag (the file can be overridden by --server, --identity, --listen, "
                         "--election-key, --log-level, --log-format, --ca-file, --cert, --key, "
                         "--etcd-password-file)");
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
