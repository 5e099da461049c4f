// SPDX-License-Identifier: Apache-2.0
#pragma once
// baton-agent's configuration: the YAML file (docs/agent.md is the reference for every key), the command-line
// flags that override it, and validation. Everything is checked once, at load, so a bad file is refused at
// start (or by `baton-agent --check-config`) with the file, line, column and key of the mistake, rather than
// failing hours later when a job first fires.

#include "cron.hpp"

#include "baton/common/listen_address.hpp"
#include "baton/common/process_group.hpp"

#include "baton/config.hpp"

#include <date/tz.h>

#include <chrono>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace baton::agent {

/// A place in the configuration file, 1-based; 0 when unknown (a configuration built in code).
struct file_position {
  int line = 0;
  int column = 0;
};

/// A job that is one HTTP request per run.
/// A notification target (`on_failure`, `on_success`, `on_missed`): a webhook (`url`, optional `ca_file` and
/// `headers`), or a command (`command`, argv form).
struct job_hook {
  std::string url;
  std::string ca_file;
  std::vector<std::pair<std::string, std::string>> headers;
  std::vector<std::string> command;
  bool operator==(const job_hook&) const = default;
};

struct http_job {
  /// Upper case (the file's value is upper-cased: `post` means `POST`).
  std::string method = "POST";
  /// `http://` or `https://` URL.
  std::string url;
  /// https:// only: the PEM CA bundle the server's certificate must chain to; empty: the system's CA store.
  /// The certificate must always name the URL's host. Must be readable when the file is loaded.
  std::string ca_file;
  /// In the order the file lists them. Names are HTTP tokens; values have no CR, LF or NUL.
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
};

/// What to do with a slot that comes due while the previous run of the same job is still going: skip it,
/// run it beside, or stop the run going (as a lost lease does) and then run it.
enum class overlap_policy { forbid, allow, replace };
/// What a newly elected leader does with a slot that passed just before it was elected.
enum class misfire_policy { skip, run_once };

/// leader: one replica wins the election key and runs the job. per_job: every replica schedules the job, and
/// each run first takes the lock `jobs/<name>` for its duration, so runs of different jobs spread over the
/// replicas. The file's top-level `mode` is the default of its jobs; a job's own `mode` overrides it.
enum class agent_mode { leader, per_job };

struct job_config {
  /// 1-64 characters of [A-Za-z0-9._-], not `.` or `..`: names become lock keys (`jobs/<name>`) and
  /// environment values, so they are kept to characters that need no quoting anywhere. Unique in a file.
  std::string name;
  schedule sched;
  /// IANA name, as written. `tz` is its zone, or nullptr for "UTC" (which then needs no tz database).
  std::string timezone = "UTC";
  const date::time_zone* tz = nullptr;
  /// Exactly one of `command` and `http` is set.
  /// Without `shell`: argv, run directly (no shell); never empty, argv[0] non-empty.
  /// With `shell`: run as `/bin/sh -c command[0] command[1] ...`, so command[0] is the script and any further
  /// items become its $0, $1, ... (a string in the file is a one-item command).
  std::vector<std::string> command;
  bool shell = false;
  /// Where command[0] (the program, or the script) is written, for --check-config's warnings about it.
  file_position command_at;
  std::optional<http_job> http;
  /// Bound on one run; 0 = unlimited.
  std::chrono::milliseconds timeout{0};
  /// A run being stopped (timeout, lease lost, shutdown) gets SIGTERM, then SIGKILL after `grace`.
  std::chrono::milliseconds grace{5'000};
  /// Where `grace` is written (line 0: not in the file, the default), for --check-config's warnings about it.
  file_position grace_at;
  overlap_policy overlap = overlap_policy::forbid;
  misfire_policy misfire = misfire_policy::skip;
  /// How many finished runs of this job the agent keeps for GET /v1/jobs (1-1000); the top-level
  /// `history_limit` unless the job sets its own.
  std::size_t history_limit = 10;
  /// Attempts after a failed one (failed, timed_out, spawn_failed) for the same slot; 0-100.
  int retries = 0;
  /// The first retry's wait; each further one waits twice as long, jittered (retry_wait()).
  std::chrono::milliseconds retry_backoff{10'000};
  /// With misfire run_once: how long after a slot it may still start (at election, at start in per-job
  /// mode, or retrying an unreachable lock server); whole seconds, at least 1 s. None: the election's ttl + 1
  /// s.
  std::optional<std::chrono::milliseconds> starting_deadline;
  /// A scheduled run starts a random moment in [0, jitter) after its slot; less than the shortest gap between
  /// the schedule's slots. 0: at the slot.
  std::chrono::milliseconds jitter{0};
  /// Start with the job suspended: its slots are skipped until POST /v1/jobs/{name}/resume.
  bool suspend = false;
  /// `env`: variables added to the command's environment (after the agent's own, before the BATON_* ones,
  /// which no job may set).
  std::vector<std::pair<std::string, std::string>> env;
  /// `working_dir`: an absolute path the command starts in; empty: the agent's.
  std::string working_dir;
  /// `user`: the account the command runs as (the agent must run as root to switch), resolved when the file
  /// is read; empty: the agent's.
  std::string user;
  std::optional<child_setup::credentials> credentials;
  /// `mode`: how the job is run among the replicas; the top-level `mode` unless the job sets its own.
  agent_mode mode = agent_mode::leader;
  /// Notifications, fired once per slot on its final outcome (job_hooks.hpp).
  std::optional<job_hook> on_failure, on_success, on_missed;
};

struct agent_config {
  /// The lock server: `http://host:port`, `https://host:port`, `etcd://...` or `etcds://...`.
  std::string server = "http://127.0.0.1:7070";
  /// YAML `tls: {ca_file, cert_file, key_file}`, flags --ca-file, --cert, --key: certificates for an
  /// https:// or etcds:// server (baton::tls_config). Each file must be readable when the file is loaded.
  baton::tls_config tls;
  /// YAML `etcd_password_file`, flag --etcd-password-file: for an etcd:// or etcds:// server whose URL names
  /// a user without a password (`etcd://baton@host:2379`), the file holding the password
  /// (baton::client_config::etcd_password_file). Must be readable when the file is loaded; read when the
  /// agent connects. Empty: the URL's password, if any.
  std::string etcd_password_file;
  /// YAML `etcd_lease_revocation_bug`: `warn` or `refuse`, for an etcd:// or etcds:// server (an error with
  /// another one): what the agent does with a member whose etcd can revoke live leases
  /// (baton::client_config::etcd_lease_revocation_bug). Unset: the SDK's default, warn (logged as
  /// lock_server_defect). Read when the agent connects.
  std::optional<baton::etcd_bug_policy> etcd_lease_revocation_bug;
  /// Owner prefix on the server; empty = `<hostname>:<pid>` (baton::default_identity()).
  std::string identity;
  /// The sidecar HTTP API's address: `address:port` or `[v6-address]:port` (parse_listen); port 0 picks a
  /// free port.
  std::string listen = "127.0.0.1:7071";
  /// `metrics_listen`: a second address that serves only GET /metrics and /healthz, for Prometheus to reach
  /// while the API stays on loopback; empty: /metrics is served on `listen` only.
  std::string metrics_listen;
  std::string election_key = "baton-agent/leader";
  /// The election lease in leader mode; each run's lease in per-job mode. renew_every and safety_margin are 0
  /// when the file leaves them out, which the SDK reads as ttl/3 and ttl/10.
  baton::lease_options election;
  agent_mode mode = agent_mode::leader;
  /// debug, info, warn or error (baton::log::parse_level accepts it).
  std::string log_level = "info";
  /// logfmt or json (baton::log::parse_format accepts it): how each log line is written.
  std::string log_format = "logfmt";
  /// A file holding the bearer token the agent sends to batond (docs/security.md); empty: no token. A
  /// relative path is taken from the agent's working directory.
  std::string token_file;
  /// The token read from token_file by load_server_token() (parse_config() does no I/O).
  /// A secret: never logged.
  std::string server_token;
  /// When set, POST /v1/resign requires `Authorization: Bearer <resign_token>`; empty = no token required.
  std::string resign_token;
  /// On SIGTERM/SIGINT: how long running jobs may go on finishing before they are stopped (as on timeout).
  std::chrono::milliseconds shutdown_grace{20'000};
  /// `reload_on_change`: how often the agent looks at its file and reloads it when its bytes changed (a
  /// Kubernetes ConfigMap update, a deploy tool), as SIGHUP does; 0 (the default): only on SIGHUP or
  /// POST /v1/reload.
  std::chrono::milliseconds reload_on_change{0};
  /// The default of each job's `history_limit` (1-1000).
  std::size_t history_limit = 10;
  std::vector<job_config> jobs;
};

/// A configuration that cannot be used. what() is one line:
///   `FILE:LINE:COLUMN: KEY: reason`, e.g.
///   `agent.yaml:14:15: jobs[1].schedule: minute field: 61 is out of range 0-59`
/// LINE and COLUMN are 1-based and left out (`FILE: KEY: reason`) when the mistake has no place in the file
/// (an unreadable file); KEY is left out when there is none (YAML syntax errors). A flag's error is
/// `--flag: reason`.
class config_error : public std::runtime_error {
 public:
  config_error(std::string file, int line, int column, std::string key, std::string reason);

  const std::string& file() const noexcept { return file_; }
  /// 1-based; 0 when unknown.
  int line() const noexcept { return line_; }
  int column() const noexcept { return column_; }
  /// The key path, as `jobs[1].schedule`, or `--server` for a flag; may be empty.
  const std::string& key() const noexcept { return key_; }
  const std::string& reason() const noexcept { return reason_; }

 private:
  std::string file_;
  int line_;
  int column_;
  std::string key_;
  std::string reason_;
};

/// Parses and validates a configuration; `file_name` is only used in error messages. Unknown keys, wrong
/// types, bad values and a second YAML document are errors. Throws config_error. No clock; the only I/O is
/// the tz database for non-UTC time zones and checking that the `tls` files can be opened; thread-safe.
agent_config parse_config(std::string_view yaml_text, std::string_view file_name);

/// Reads `path` and parse_config()s it. An unreadable file is a config_error naming it.
agent_config load_config(const std::string& path);

/// Reads token_file (when set) into server_token: trimmed, one word. Kept apart from load_config() so that
/// --check-config checks a file without needing the secret, which may exist only where the agent runs.
/// Throws config_error on `token_file` (naming `config_path`), never quoting the token.
void load_server_token(agent_config& config, const std::string& config_path);

/// What differs between the running configuration and the file read again (SIGHUP), grouped by what applying
/// it takes. Keys are named as in the file.
struct config_changes {
  /// Every top-level key whose value differs, in the file's order of keys (docs/agent.md): `server`, `tls`,
  /// `etcd_password_file`, `etcd_lease_revocation_bug`, `identity`, `listen`, `mode`, `log_level`,
  /// `log_format`, `token_file`, `resign_token`, `shutdown_grace`, `election`, `history_limit`, `jobs`. A new
  /// token in an unchanged token_file counts as `token_file`.
  std::vector<std::string> keys;
  /// Of `keys`, those a running agent cannot take: the sidecar's socket (`listen`), the connection to the
  /// lock server that holds the lease (`server`, `etcd_password_file`, `etcd_lease_revocation_bug`,
  /// `identity`, `token_file`), and `mode`. They need a restart. (`tls` is applied: its files are read into
  /// the client's TLS context.)
  std::vector<std::string> restart_needed;
  /// `jobs` in detail, by name, in file order: new names, names gone, and names whose settings differ.
  std::vector<std::string> jobs_added, jobs_removed, jobs_changed;
  /// `election.key` or a lease setting differs: applying it means a new campaign (and a new token).
  bool election = false;

  bool empty() const { return keys.empty(); }
};

/// Compares two validated configurations (the running one first). Pure; thread-safe.
config_changes compare_configs(const agent_config& running, const agent_config& loaded);

/// `listen` and `metrics_listen` are read as batond reads --listen (baton/common/listen_address.hpp).
using baton::parse_listen;
using baton::to_listen_string;

/// Applies command-line flags over a loaded configuration: `server`, `identity`, `listen`, `election-key`,
/// `log-level`, `log-format`, `ca-file`, `cert`, `key` and `etcd-password-file` (leading dashes allowed:
/// `--server` works too). An empty value means the flag was not given. Each value is validated as the file's
/// key is; an unknown flag name is an error too. Throws config_error (`--server: reason`), leaving `config`
/// unchanged.
void apply_overrides(agent_config& config, const std::map<std::string, std::string>& flags);

}  // namespace baton::agent
