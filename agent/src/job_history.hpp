// SPDX-License-Identifier: Apache-2.0
#pragma once
// The runs each job had on this agent, newest first, bounded per job (`history_limit`), and the times the
// per-job metrics report. No clock and no I/O: the runtime gives it the times; tests give it explicit ones.
// Kept in memory only: a restarted agent, or a new leader, starts with an empty history (docs/agent.md).

#include "job_run.hpp"

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace baton::agent {

/// One finished run, as GET /v1/jobs reports it.
struct run_record {
  std::string run_id;
  std::uint64_t token = 0;
  /// The identity of the agent that ran it, and the lock its token belongs to.
  std::string identity;
  std::string lock_key;
  std::chrono::sys_seconds slot;
  std::chrono::system_clock::time_point started;
  std::chrono::milliseconds duration{0};
  run_outcome outcome = run_outcome::failed;
  int status = -1;  // exit status, or HTTP status
  std::string detail;
  /// Started by POST /v1/jobs/{name}/run rather than by the schedule.
  bool manual = false;
  /// 1, or the retry's number (run_context::attempt).
  int attempt = 1;
  /// A command's last output (run_result::stdout_tail), each marked when earlier output was cut.
  std::string stdout_tail, stderr_tail;
  bool stdout_cut = false, stderr_cut = false;
};

class job_history {
 public:
  using time_point = std::chrono::system_clock::time_point;

  /// A run of `job` started at `at` (the last-run time is its start).
  void started(const std::string& job, time_point at);
  /// A run of `job` ended: it is kept as the newest, and the oldest beyond `limit` are dropped. A succeeded
  /// run's end (start + duration) becomes the last-success time.
  void finished(const std::string& job, run_record run, std::size_t limit);
  /// A new limit for `job` (a reload): the oldest runs beyond it are dropped at once.
  void set_limit(const std::string& job, std::size_t limit);

  /// The kept runs of `job`, newest first (empty for a job that never ran here).
  std::vector<run_record> runs(const std::string& job) const;
  std::optional<time_point> last_run(const std::string& job) const;
  std::optional<time_point> last_success(const std::string& job) const;

 private:
  struct per_job {
    std::deque<run_record> runs;  // newest first
    std::optional<time_point> last_run, last_success;
  };
  std::map<std::string, per_job> jobs_;
};

}  // namespace baton::agent
