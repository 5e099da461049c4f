// SPDX-License-Identifier: Apache-2.0
#pragma once
// Test helper: a real baton-agent process with its configuration written to a file, its log kept in a file,
// and its sidecar API on an ephemeral loopback port.

#include "batond_fixture.hpp"

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace baton::test {

class agent_process {
 public:
  /// Starts `baton-agent --config <config> --identity <id>`, stderr (the log) to `log`, and waits for
  /// "baton-agent listening on ...". `extra_env`: `NAME=value` entries added to its environment.
  agent_process(const std::filesystem::path& config, std::string id, std::filesystem::path log,
                std::vector<std::string> extra_env = {});

  child_process& process() { return *proc_; }
  int pid() const { return proc_->pid(); }
  unsigned short port() const { return port_; }
  const std::string& identity() const { return identity_; }
  const std::filesystem::path& log_path() const { return log_; }

  /// GET on the sidecar API; status 0 when it does not answer within `timeout`.
  http_reply get(const std::string& target,
                 std::chrono::milliseconds timeout = std::chrono::seconds(10)) const;
  /// GET /v1/leader; when the sidecar does not answer, status 0 and {"is_leader": false}.
  http_reply leader() const;
  /// The agent's log so far.
  std::string log() const;
  /// The log's lines containing every one of `parts`.
  std::vector<std::string> log_lines(const std::vector<std::string>& parts) const;
  /// The value of the metric line that starts with `series` (name and labels, e.g.
  /// `baton_agent_job_runs_total{job="a",outcome="failed"}`), or -1 when /metrics has no such line.
  double metric(const std::string& series) const;

 private:
  std::unique_ptr<child_process> proc_;
  unsigned short port_ = 0;
  std::string identity_;
  std::filesystem::path log_;
};

/// Starts `count` agents on `config`, named node-0, node-1, ..., each logging to `dir`/a<i>.log.
std::vector<std::unique_ptr<agent_process>> start_agents(const std::filesystem::path& config, int count,
                                                         const temp_dir& dir);

/// Writes `text` to `dir`/`name` and returns the path.
std::filesystem::path write_config(const temp_dir& dir, const std::string& name, const std::string& text);

/// A configuration for `server` with the sidecar on an ephemeral port, the election key `test/leader`, the
/// given TTL (`"1s"`) and the jobs (YAML list items, indented by two spaces, or `"  []\n"`).
std::string base_config(const batond_process& server, const std::string& ttl, const std::string& jobs);

/// Reads a whole file ("" when it does not exist).
std::string read_file(const std::filesystem::path& p);

/// Waits until `from`..`to` seconds (0 <= from <= to < period) have passed since a slot of a schedule firing
/// every `period` seconds (`*/period * * * * *`, period dividing 60), and returns that slot in RFC 3339 UTC,
/// as BATON_SCHEDULED_AT gives it. Throws std::runtime_error when that moment does not come within two
/// periods (the machine stalled).
std::string wait_until_after_a_slot(int period, int from, int to);

/// Processes of process group `pgid` that are still running (zombies, which only wait to be reaped, are not
/// counted), from /proc.
std::vector<int> live_processes_in_group(int pgid);

/// The guard processes (`baton-guard`, one per command run) that `agent_pid` forked and that still run.
std::vector<int> guards_of(int agent_pid);

}  // namespace baton::test
