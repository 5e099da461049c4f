// SPDX-License-Identifier: Apache-2.0
#pragma once
// The agent's runtime: campaigns for the election key with the SDK's baton::election, publishing who it is
// and where its sidecar answers, schedules the jobs while it leads, runs them with the lease's token, stops
// them the moment leadership is lost, and campaigns again.

#include "config.hpp"
#include "group_state.hpp"
#include "job_history.hpp"
#include "job_run.hpp"
#include "lock_server_health.hpp"
#include "scheduler.hpp"

#include "baton/client.hpp"
#include "baton/election.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>

#include <atomic>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>

namespace baton::agent {

class agent_runtime {
 public:
  agent_runtime(boost::asio::any_io_executor ex, agent_config config);

  /// Campaigns, leads, runs jobs, until shutdown(); then stops the jobs, releases the lease and returns.
  boost::asio::awaitable<void> run();

  /// SIGTERM: stop scheduling, stop running jobs (grace), release the lease, let run() return.
  void shutdown();
  /// Give up leadership (release the lease) and campaign again once another agent leads or after a hold-off.
  /// Returns false when this agent does not lead.
  bool resign();

  /// A reloaded job list (SIGHUP, POST /v1/reload): the scheduler takes it by name (scheduler::replace_jobs),
  /// so no slot from before the change starts because of it. Runs in flight go on with the settings they
  /// started with, and a job they belong to keeps counting them for `overlap`, even when it was removed and
  /// comes back. Leadership and its token are kept. Call on the runtime's executor.
  void apply_jobs(std::vector<job_config> jobs);
  /// A changed `election` section. Leader mode: a leader stops its runs and releases its lease as a resign
  /// does, then campaigns at once with the new key and lease settings (a new token); an agent campaigning
  /// campaigns again with them. Per-job mode: the next runs' locks use them; runs in flight keep theirs.
  /// Call on the runtime's executor.
  void restart_election(std::string key, lease_options election);
  /// The settings read when they are used (the next resign request, the next shutdown).
  void apply_settings(std::string resign_token, std::chrono::milliseconds shutdown_grace);
  /// Where the sidecar answers (`http://host:port`), published with the leadership from the next campaign
  /// on (leader_value()). Call before run(), on the runtime's executor.
  void set_api_url(std::string url) { api_url_ = std::move(url); }
  /// What this agent publishes with its leadership (docs/agent.md, "The leader's published value"):
  /// `{"identity":"<identity>","api":"<url>"}`, `api` only once set_api_url() was called.
  std::string leader_value() const;

  struct status {
    bool leader = false;
    std::uint64_t token = 0;
  };
  /// Whether this agent leads now (its election lease is active: a lease past its deadline is not, even
  /// before the runtime has handled the loss), and with which token. Call on the runtime's executor.
  status current() const;
  const agent_config& config() const { return config_; }
  const std::string& identity() const { return client_.identity(); }
  client& lock_client() { return client_; }
  /// Whether the lock server answers this agent's requests, the latest error and since when it fails (for
  /// /readyz); updated by every request the agent sends there.
  lock_server_status lock_server() const { return lock_server_.status(); }
  std::string render_metrics() const;
  /// The configuration applied: `hash` of its file (at start, and after each reload that applied one), or a
  /// reload that was refused (`applied` false: the hash stays). For /metrics. Call on the runtime's executor.
  void note_config(bool applied, std::string hash = {});

  /// What POST /v1/jobs/{name}/run got.
  struct manual_run {
    enum class result {
      started,       // a run started now: run_id, token and slot say which
      unknown_job,   // no job has that name
      not_leader,    // this agent does not lead (or is stepping down)
      running,       // overlap: forbid, and a run of the job is going
      per_job_mode,  // the job runs in per-job mode: no agent leads it
    };
    result what = result::unknown_job;
    std::string run_id;
    std::uint64_t token = 0;
    std::chrono::sys_seconds slot{};
    /// The run's handle (started only): ended() says when it and its retries are over.
    std::shared_ptr<run_control> control;
  };
  /// Starts a run of `name` now, with the leader's token, outside the schedule: its slot is now (whole
  /// seconds). The run is logged, counted and kept in the history like any other, as `trigger=manual`, and
  /// counts for overlap as a scheduled run does. Call on the runtime's executor.
  manual_run run_now(const std::string& name);

  /// What POST /v1/jobs/{name}/suspend|resume got.
  enum class suspend_result {
    done,         // applied, and (leader mode) kept in the group's state before this answer
    unknown_job,  // no job has that name
    not_leader,   // leader mode: only the leader changes the group's suspension
    not_saved,    // leader mode: the group's state could not be written (leadership ending): nothing changed
  };
  /// Suspends or resumes job `name` (POST /v1/jobs/{name}/suspend|resume): a suspended job's slots are
  /// skipped (`reason=suspended`); runs in flight go on; a manual run still runs it. Idempotent. Leader mode:
  /// for the group, on the leader only, kept in the group's state (a new leader and a restart keep it).
  /// Per-job mode: on this agent, until it restarts. Call on the runtime's executor.
  boost::asio::awaitable<suspend_result> set_suspended(std::string name, bool suspended);

  /// Followers in leader mode: reads the group's state (for GET /v1/jobs), keeping the last one read when
  /// the lock server cannot be reached. A no-op on the leader (its own is current) and in per-job mode.
  boost::asio::awaitable<void> refresh_group_state();
  /// Who wrote the group's state last (the leader's identity and token), as far as this agent knows it.
  std::pair<std::string, std::uint64_t> group_writer() const { return {group_.leader, group_.token}; }

  /// A job as GET /v1/jobs reports it.
  struct job_status {
    std::shared_ptr<const job_config> job;
    /// The job's first slot after `now` (this agent runs it only if it leads then).
    std::optional<std::chrono::sys_seconds> next_run;
    int running = 0;
    bool suspended = false;
    std::vector<run_record> runs;  // this agent's finished runs of the job, newest first
  };
  /// Every configured job, in the file's order. Call on the runtime's executor.
  std::vector<job_status> jobs(std::chrono::system_clock::time_point now) const;
  /// One job by name; empty when no job has that name. Call on the runtime's executor.
  std::optional<job_status> job(const std::string& name, std::chrono::system_clock::time_point now) const;

 private:
  struct run_slot;
  boost::asio::awaitable<void> lead(lease& l);
  /// Leader mode: carries out the scheduler's decisions under `l`: each covers its slot in the group's state,
  /// which is written before any run starts (a run starts only for a slot the group knows was decided).
  boost::asio::awaitable<void> carry_out(std::vector<slot_decision> decisions, lease& l);
  /// Reads the group's state at election into group_ (group_known_ says whether it could be read).
  boost::asio::awaitable<void> load_group_state();
  /// Writes group_ as it is now under the leader's lease; completes once that version (or a later one) is
  /// durable: true, or false when it could not be written (lease lost, lock server unreachable). Writes are
  /// one at a time, each the latest version, so an older one never lands after a newer one. True at once
  /// while the lock server keeps no records (memory only, as before them).
  boost::asio::awaitable<bool> persist_group_state();
  /// Per-job mode, holding `key` (jobs/<name>) for `slot`: reads the job's record; when the slot was not run
  /// yet, counts the slots no replica ran since the last one, writes the slot as decided, and returns the
  /// record to carry the outcome. Empty when the slot must not run here (it ran already, or the record
  /// could not be read or written; each logged) and when the lock server keeps no records
  /// (records_unsupported_ then set: the caller runs the slot as before records).
  boost::asio::awaitable<std::optional<group_state>> claim_per_job_slot(const job_config& job,
                                                                        const std::string& key,
                                                                        sys_seconds slot, lease& l);
  boost::asio::awaitable<void> release_quietly(lease& l, const std::string& key);
  /// The lock server keeps no records: from now on state stays in memory; said once, with `effect`.
  void note_records_unsupported(const std::string& key, const std::string& reason, std::string_view effect);
  /// The job suspension `names` everywhere it is applied (scheduler, metrics, status).
  void apply_suspended(const std::set<std::string>& names);
  using run_list = std::vector<std::shared_ptr<run_control>>;
  /// Starts a run of job `job` for `slot` under the leader's lease `l`; returns its run id. The run begins
  /// once every run of `replacing` has ended (overlap: replace).
  std::string start_run(std::size_t job, std::chrono::sys_seconds slot, const lease& l, bool manual = false,
                        run_list replacing = {}, std::shared_ptr<run_control>* control = nullptr);
  /// Bookkeeping of a run that began or ended, by job name (indices change with apply_jobs()).
  void job_run_began(const std::string& job, std::size_t index, const std::shared_ptr<run_control>& control);
  void job_run_ended(const std::string& job, const std::shared_ptr<run_control>& control);
  /// overlap: replace: asks every run of job `job` in flight to stop in favour of the run for `slot`, and
  /// returns them, for that run to wait for.
  run_list replace_runs(const std::string& job, std::chrono::sys_seconds slot);
  /// Waits until every run of `replacing` has ended; false when `control` is stopped first (the run that
  /// waits must then not start).
  boost::asio::awaitable<bool> replaced_runs_ended(const run_list& replacing,
                                                   std::shared_ptr<run_control> control);
  /// Leader jobs: campaigns, leads, campaigns again, until shutdown (idle while no job is a leader job and
  /// the file's `mode` is per-job).
  boost::asio::awaitable<void> run_elections();
  /// Per-job jobs: schedules them on this replica, each run under its own lock, until shutdown.
  boost::asio::awaitable<void> run_per_job();
  /// Whether this agent campaigns: the file's `mode` is leader, or a job's is.
  bool campaigns() const;
  /// The leader jobs among `names` (the group's suspension holds leader jobs only).
  std::set<std::string> leader_jobs_in(const std::set<std::string>& names) const;
  /// Leader mode after a resign: waits until another agent leads, at most `hold_off`, or a wake-up.
  boost::asio::awaitable<void> let_another_lead(std::chrono::milliseconds hold_off);
  /// `misfire`: a slot the agent found already past (at start), which may be retried while the lock server
  /// cannot be reached, within the misfire window.
  void start_per_job_run(std::size_t job, std::chrono::sys_seconds slot, bool misfire,
                         run_list replacing = {});
  /// Counts a slot decision's missed and overlap-skipped slots, and logs the skip.
  void note_skips(const slot_decision& d);
  /// How long before the election (or start, in per-job mode) a slot may have passed and still run once.
  std::chrono::seconds misfire_window() const;
  /// `job`'s starting_deadline, or misfire_window().
  std::chrono::seconds misfire_window(const job_config& job) const;
  /// Called with the outcome of every request to the lock server.
  void observe_lock_server(const boost::system::error_code& ec, const std::string& diagnostic);
  /// Runs one job under `l`, stopping it gracefully (TERM, grace, KILL) if the lease is lost meanwhile.
  boost::asio::awaitable<run_result> run_guarded(std::shared_ptr<const job_config> job, run_context ctx,
                                                 std::shared_ptr<run_control> control, lease* l);
  /// Logs, counts and keeps in the history a run that ended; `started` is when it began.
  /// Runs attempts of `job` for ctx.slot: the first, then after each failed one (failed, timed_out,
  /// spawn_failed) another, up to the job's `retries`, waiting retry_wait() between them, while the run is
  /// not stopped and its lease (`l`, or the leader's) still holds. Each attempt is logged, counted and kept
  /// in the history; `next_run_id` names each retry. Returns the last attempt's result.
  boost::asio::awaitable<run_result> run_attempts(std::shared_ptr<const job_config> job, run_context ctx,
                                                  std::shared_ptr<run_control> control, lease* l, bool manual,
                                                  std::function<std::string()> next_run_id);
  void log_result(const job_config& job, const run_context& ctx, const run_result& r,
                  std::chrono::system_clock::time_point started, bool manual);
  job_status status_of(std::size_t index, std::chrono::system_clock::time_point now) const;
  /// Stops every run in flight and waits until all are gone. With `let_finish`, runs first get that long to
  /// end on their own (shutdown), while leadership is still held. With `lease_lost`, they stop because the
  /// lease was lost (run_control::lose()).
  boost::asio::awaitable<void> stop_all_runs(const std::list<std::shared_ptr<run_control>>& runs,
                                             std::chrono::milliseconds let_finish = {},
                                             bool lease_lost = false);
  /// The election loop's wait: ends early on shutdown, resign, new election settings or a wake-up.
  boost::asio::awaitable<void> sleep_or_wake(std::chrono::steady_clock::duration d);
  /// The per-job loop's wait: ends early on shutdown or a reload.
  boost::asio::awaitable<void> per_job_sleep(std::chrono::steady_clock::duration d);
  void record_run(const job_config& job, const run_result& r);

  boost::asio::any_io_executor ex_;
  agent_config config_;
  client client_;
  /// Leader mode: the election on config_.election_key, made anew when the key changes (restart_election())
  /// or when a release failed (the lease left to its TTL stays with the old object).
  std::optional<election> election_;
  std::string api_url_;          // published with the leadership (leader_value())
  scheduler scheduler_;          // the leader jobs (the others `elsewhere`)
  scheduler per_job_scheduler_;  // the per-job jobs (the others `elsewhere`)
  /// The jobs, indexed as in both schedulers. Shared with the runs in flight, which keep the settings they
  /// started with across a reload.
  std::vector<std::shared_ptr<const job_config>> jobs_;
  std::map<std::string, int> running_by_name_;  // runs in flight per job name, outlived groups included
  const lease* leading_lease_ = nullptr;        // leader mode: the lease while lead() schedules under it
  lease_options leading_options_;               // leader mode: the options that lease was taken with
  std::set<std::string> suspended_;  // jobs suspended on this agent (the file's `suspend`, then the API)
  job_history history_;
  /// The group's state (group_state.hpp): the leader's working copy, written through persist_group_state();
  /// a follower's copy of the last one read.
  group_state group_;
  bool group_known_ = false;          // group_ was read from the lock server (or it has none yet)
  bool records_unsupported_ = false;  // the lock server keeps no records: state in memory only
  bool warned_unsupported_ = false;
  /// Per-job mode: a record was read, so the lock server keeps them (until then a slot's lock is tried once
  /// and kept after the run, as without records: waiting for it is safe only where the record says what ran).
  bool records_seen_ = false;
  std::uint64_t state_version_ = 0, durable_version_ = 0;
  bool state_writing_ = false;
  boost::asio::steady_timer state_written_;  // cancelled when a write of the state completes
  lease* state_lease_ = nullptr;             // leader mode: the lease the state is written under, in lead()
  /// The group's state is kept under the protocol's smallest record bound (16 KiB), with room to spare.
  static constexpr std::size_t max_state_bytes = 15 * 1024;
  std::mt19937_64 random_{
      std::random_device{}()};         // retry jitter                // on the runtime's executor only
  boost::asio::steady_timer control_;  // cancelled to wake run_elections()/lead() on shutdown or resign
  boost::asio::steady_timer per_job_control_;  // cancelled to wake run_per_job() on shutdown or reload
  bool stopping_ = false;
  bool resigning_ = false;
  bool recampaign_ = false;             // the election settings changed: release and campaign again at once
  std::uint64_t runs_under_lease_ = 0;  // leader mode: runs started under the current leadership
  std::list<std::shared_ptr<run_control>> runs_;          // leader runs in flight (under the election lease)
  std::list<std::shared_ptr<run_control>> per_job_runs_;  // per-job runs in flight (each under its own lock)
  /// Every run by job name from job_run_began() to job_run_ended(): unlike runs_, it keeps a run whose group
  /// outlived SIGKILL until the group is gone, so a run that replaces it waits for that too.
  std::multimap<std::string, std::shared_ptr<run_control>> runs_by_job_;

  lock_server_health lock_server_;

  // Read by the sidecar and metrics (same executor, but kept simple to read). metrics_mu_ is only ever held
  // for a counter update or a copy, never across a call that might run a job or log.
  std::atomic<bool> leader_{false};
  std::atomic<std::uint64_t> token_{0};
  std::atomic<std::uint64_t> elections_won_{0}, leases_lost_{0};
  mutable std::mutex metrics_mu_;
  struct job_stats {
    std::map<std::string, std::uint64_t> outcomes;  // per attempt
    std::map<std::string, std::uint64_t> slots;     // per slot: the final outcome
    std::uint64_t consecutive_failures = 0;
    double duration_sum = 0;
    std::uint64_t duration_count = 0;
    std::uint64_t skipped_overlap = 0, missed = 0, skipped_suspended = 0;
    std::uint64_t kill_failures = 0;
  };
  std::map<std::string, job_stats> job_stats_;
  struct config_status {
    std::string hash;
    bool last_reload_ok = true;
    std::optional<std::chrono::system_clock::time_point> applied_at;
  };
  config_status config_status_;  // guarded by metrics_mu_
  /// Fires the job's on_failure or on_success hook for a slot's final outcome, and on_missed for `slots`
  /// slots counted as missed up to `through` (job_hooks.hpp).
  void notify_slot(const job_config& job, const run_result& r);
  void notify_missed(const job_config& job, std::uint64_t slots, sys_seconds through);
  /// Counts the final outcome of a slot (the last attempt's).
  void record_slot(const job_config& job, const run_result& r);
  std::atomic<std::int64_t> last_renew_us_{0};
  std::atomic<std::uint64_t> renews_{0};
  double renew_seconds_sum_ = 0;
};

}  // namespace baton::agent
