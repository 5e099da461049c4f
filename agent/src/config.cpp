// SPDX-License-Identifier: Apache-2.0
// The agent's configuration file: its schema (which keys, of which kinds, checked how) read into
// agent_config. The typed reading of YAML is in yaml_reader.hpp, the validators in config_checks.hpp, the
// string settings the flags share in config_settings.hpp.
#include "config.hpp"

#include "config_checks.hpp"
#include "config_settings.hpp"
#include "yaml_reader.hpp"

#include "baton/common/token_file.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <sstream>

#include <grp.h>
#include <pwd.h>
#include <unistd.h>

namespace baton::agent {

using namespace detail;

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
constexpr std::string_view election_keys[] = {"key",    "ttl",           "renew_every",
                                              "jitter", "safety_margin", "lock_delay"};
constexpr std::string_view job_keys[] = {
    "name",    "schedule",      "timezone",          "command",   "shell",         "http",
    "timeout", "grace",         "overlap",           "misfire",   "history_limit", "suspend",
    "retries", "retry_backoff", "starting_deadline", "jitter",    "env",           "working_dir",
    "user",    "on_failure",    "on_success",        "on_missed", "mode"};
constexpr std::string_view hook_keys[] = {"url", "headers", "ca_file", "command"};
constexpr std::string_view http_keys[] = {"method", "url", "headers", "body", "ca_file"};

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

// The string setting `key` (config_settings.hpp) of the mapping `map`, when it is there: read, then checked
// as its flag is.
void read_string(const reader& r, const YAML::Node& map, agent_config& config, std::string_view key) {
  const auto& setting = string_setting_for(key);
  const auto dot = key.rfind('.');
  const auto name = std::string(dot == std::string_view::npos ? key : key.substr(dot + 1));
  if (const auto n = map[name]) {
    auto& value = setting.field(config);
    value = r.text(n, std::string(key));
    r.check(n, std::string(key), setting.check(value));
  }
}

void read_election(const reader& r, const YAML::Node& node, agent_config& config) {
  r.known_keys(node, "election", election_keys);
  read_string(r, node, config, "election.key");
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
  // 0s (the default): none. Whether the lock server keeps a delay is learnt at the first acquire: batond
  // without the feature, or etcd, refuses it (invalid_config), and the agent says so then.
  validate_with("lock_delay",
                [&](const YAML::Node& n, const std::string& p) { lease.lock_delay = r.duration(n, p); });
}

void read_tls(const reader& r, const YAML::Node& node, agent_config& config) {
  r.known_keys(node, "tls", tls_keys);
  for (const auto key : {"tls.ca_file", "tls.cert_file", "tls.key_file"})
    read_string(r, node, config, key);
}

}  // namespace

config_error::config_error(std::string file, int line, int column, std::string key, std::string reason)
    : std::runtime_error(format_error(file, line, column, key, reason)),
      file_(std::move(file)),
      line_(line),
      column_(column),
      key_(std::move(key)),
      reason_(std::move(reason)) {}

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

  for (const auto key : {"server", "identity", "metrics_listen", "listen"})
    read_string(r, root, config, key);
  if (const auto n = root["mode"]) config.mode = read_mode(r, n, "mode");
  for (const auto key : {"log_level", "log_format"})
    read_string(r, root, config, key);
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
  read_string(r, root, config, "etcd_password_file");
  if (const auto n = root["etcd_password_file"])
    r.check(n, "etcd_password_file", check_etcd_password_combination(config));
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

void load_server_token(agent_config& config, const std::string& config_path) {
  if (config.token_file.empty()) return;
  try {
    config.server_token = read_token_file(config.token_file);
  } catch (const token_file_error& e) {
    throw config_error(config_path, 0, 0, "token_file", config.token_file + ": " + e.what());
  }
}

}  // namespace baton::agent
