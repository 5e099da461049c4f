// SPDX-License-Identifier: Apache-2.0
#pragma once
// One run of one job: a command in its own process group, or an HTTP request, carrying the lease's fencing
// token. A run can be stopped at any moment (leadership lost, shutdown): a command gets SIGTERM on its whole
// process group and SIGKILL after the job's grace, or sooner, before the server can expire its lease; an HTTP
// request is aborted.

#include "config.hpp"

#include "baton/config.hpp"
#include "baton/lease.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace baton::agent {

enum class run_outcome {
  succeeded,     // exit 0, or an HTTP 2xx
  failed,        // non-zero exit, non-2xx, or a transport error
  timed_out,     // the job's timeout passed: stopped
  stopped,       // leadership lost or the agent shut down: stopped
  spawn_failed,  // the command could not be started
  replaced,  // overlap: replace: the job's next slot came due while it ran, and its run took over: stopped
  /// The lease it ran under was lost while it ran: stopped by the agent or by its guard at the lease's
  /// deadline, or ended, whatever its status, only after that deadline had passed (the agent was stopped or
  /// starved). Never `succeeded`: what it did after the deadline was not under the lease.
  lost,
};
std::string_view to_string(run_outcome o);

/// What a run needs to know about the lease it runs under.
struct run_context {
  std::string lock_key;
  std::uint64_t token = 0;
  std::string identity;
  std::chrono::sys_seconds slot;
  /// `<token>-<n>`: the n-th run under the lease with this token. Tokens are unique on the lock server, so
  /// the id is unique across every agent of the group, not only within one agent.
  std::string run_id;
  /// 1 for a slot's first attempt, then 2, 3, ... for its retries (`retries`).
  int attempt = 1;
  /// The lease the run is under, valid until run_job() returns, and the options it was taken with; null when
  /// the run is under none. A command's guard then holds the lease's deadline and stops the command itself
  /// should the agent not (stopped, starved), and a stop's SIGKILL comes by the lease's kill_by() whatever
  /// the grace (docs/design.md, "A command's stop under a lease").
  const baton::lease* lease = nullptr;
  baton::lease_options lease_options;
};

/// `<token>-<n>`, see run_context::run_id.
std::string make_run_id(std::uint64_t token, std::uint64_t n);

struct run_result {
  run_outcome outcome = run_outcome::failed;
  int exit_status = -1;  // command: exit code or 128+signal; http: status code
  std::chrono::steady_clock::duration duration{};
  std::string detail;  // why it failed, timed out or could not be stopped; the start of an HTTP answer's body
  bool kill_failed = false;  // a signal to the command's group was refused, or the group outlived SIGKILL
  /// A command's last output_tail_bytes of stdout and of stderr, each marked when earlier output was cut.
  std::string stdout_tail, stderr_tail;
  bool stdout_cut = false, stderr_cut = false;
  /// Set when processes of the command's group could not be killed (kill(2) refused, or they outlived
  /// SIGKILL): completes once the group is gone, repeating SIGKILL meanwhile. The run is reported at once;
  /// the job counts as running until this completes, so no second copy starts beside the first.
  std::function<boost::asio::awaitable<void>()> outlived;
};

/// A handle to stop a run from outside (the runtime keeps one per run in flight). Used on the runtime's
/// executor only.
class run_control {
 public:
  explicit run_control(const boost::asio::any_io_executor& ex);
  /// Asks the run to stop (idempotent); the run reports `stopped`.
  void stop();
  /// Asks the run to stop because the lease it runs under was lost (idempotent); the run reports `lost`.
  void lose();
  bool lost() const { return lost_; }
  /// Asks the run to stop because a newer run of its job takes its place (`overlap: replace`); `by` says
  /// which (it becomes the run's `detail`). The run is stopped as stop() does and reports `replaced`, unless
  /// it was already asked to stop.
  void replace(std::string by);
  bool stop_requested() const { return stop_requested_; }
  bool replaced() const { return !replaced_by_.empty(); }
  const std::string& replaced_by() const { return replaced_by_; }
  boost::asio::steady_timer& wake() { return wake_; }

  /// The runtime marks the run over once nothing of it is left (its process group included); whoever waits
  /// for it (a run that replaces it) waits on `ended()`, which is cancelled then.
  void mark_ended();
  bool has_ended() const { return ended_; }
  boost::asio::steady_timer& ended() { return ended_timer_; }

 private:
  bool stop_requested_ = false;
  bool lost_ = false;
  bool ended_ = false;
  std::string replaced_by_;
  boost::asio::steady_timer wake_;
  boost::asio::steady_timer ended_timer_;
};

/// How much of each stream's end a run keeps (run_result::stdout_tail), and how much of a run's output, per
/// stream, goes to the log before the rest is only counted.
constexpr std::size_t output_tail_bytes = 2048;
constexpr std::size_t output_log_bytes = 1024 * 1024;

/// RFC 3339 in UTC, seconds precision: 2026-11-30T03:00:00Z.
std::string rfc3339(std::chrono::sys_seconds t);

/// Runs `job` once. Never throws for job failures; the outcome says what happened.
boost::asio::awaitable<run_result> run_job(const job_config& job, const run_context& ctx,
                                           std::shared_ptr<run_control> control);

}  // namespace baton::agent
