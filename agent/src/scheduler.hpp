// SPDX-License-Identifier: Apache-2.0
#pragma once
// The job scheduler's decisions, with no clock, no processes and no network: given the jobs, the time and the
// agent's leadership, which slots start now, which are skipped and when to look again. The agent's runtime
// carries these decisions out; the unit tests drive them with explicit times.
//
// Rules (docs/agent.md):
// - Slots are computed from each job's schedule and time zone; wall-clock time is what cron is about.
// - Nothing starts unless the agent leads (on_elected .. on_lost).
// - A run starts for the latest slot that is due; older slots that passed while the agent was busy or paused
//   are not run one by one (no backlog), they are counted as missed.
// - overlap forbid: a slot that comes due while the previous run of that job is still going is skipped;
//   replace: it is started in place of the runs going (the runtime stops them first).
// - misfire run_once: on election, a job whose most recent slot lies within the misfire window before the
//   election runs once at once (the previous leader may have died before running it); skip: it does not.
// - A suspended job's slots come due as usual and are skipped (skip_suspended), so they are counted and
//   logged, and resuming it starts nothing from before: its next run is its next slot.
// - A backward wall-clock step (a time-sync correction, an operator's `date -s`) is noticed by the next
//   due(): interval schedules follow the clock from the new time, so their slots come again rather than
//   pausing for the length of the step; time-of-day schedules do not run a slot twice, as across a
//   daylight-saving repeat (docs/cron.md), unless the step is longer than max_unrepeated_step, which is taken
//   as a reset of the clock, after which every job follows the clock.

#include "cron.hpp"

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace baton::agent {

using sys_seconds = std::chrono::sys_seconds;

struct scheduled_job {
  std::string name;
  schedule sched;
  const date::time_zone* tz = nullptr;
  bool allow_overlap = false;
  bool run_missed_once = false;
  bool suspended = false;
  /// The job's own misfire window (`starting_deadline`), instead of the one on_elected() is given.
  std::optional<std::chrono::seconds> misfire_window;
  /// overlap replace: a slot that comes due while runs of the job are going replaces them (instead of
  /// allow_overlap's running beside them, or the default skip).
  bool replace_running = false;
  /// Scheduled by another of the agent's schedulers (a job of the other `mode`): never due here, while its
  /// runs still count (run_started), so a job that changes mode keeps its overlap rule.
  bool elsewhere = false;
};

struct slot_decision {
  enum class kind {
    start,           // start a run of `job` for `slot`
    skip_overlap,    // the slot came due while the previous run was still going (overlap: forbid)
    skip_suspended,  // the slot came due while the job was suspended
    replace,         // stop the runs of `job` in flight, then start a run for `slot` (overlap: replace)
    missed,          // nothing to start: `missed` slots up to `slot` passed while no leader ran them
  };
  kind what;
  std::size_t job;
  sys_seconds slot;
  /// Slots of this job that passed without a run since the last decision (paused or late agent).
  std::uint64_t missed = 0;
};

/// The wait before retrying after failed attempt `attempt` (1-based): `backoff` doubled for each attempt
/// before it (backoff, 2 backoff, 4 backoff, ..., at most 1024 backoff), scaled by a factor in [0.5, 1)
/// taken from `unit` in [0, 1), so that retries of many agents or jobs do not fall together. Empty when the
/// retry would start at or after `next_slot`: a retry never runs into the job's next slot, whose run takes
/// over. Pure; thread-safe.
std::optional<std::chrono::milliseconds> retry_wait(int attempt, std::chrono::milliseconds backoff,
                                                    double unit, std::chrono::system_clock::time_point now,
                                                    std::optional<sys_seconds> next_slot);

/// The slots of `sched` in `tz` in (after, until]: how many, and the latest. Bounded: past a million slots
/// the walk jumps to the last two days before `until` (so the latest is still found), and the count is a
/// lower bound.
struct slot_span {
  std::uint64_t count = 0;
  std::optional<sys_seconds> latest;
};
slot_span slots_between(const schedule& sched, const date::time_zone* tz, sys_seconds after,
                        sys_seconds until);

class scheduler {
 public:
  /// A backward step up to this long keeps time-of-day schedules from repeating their slots; a longer one is
  /// a reset of the clock (a daily job should not wait a week because the clock had been set a week ahead).
  /// Three hours covers any daylight-saving shift and the corrections time-sync daemons make.
  static constexpr std::chrono::hours max_unrepeated_step{3};

  explicit scheduler(std::vector<scheduled_job> jobs);

  /// Leadership starts at `now`. Returns the misfire runs to start at once: for each run_missed_once job, its
  /// latest slot within its own misfire window (or `misfire_window`) before `now`.
  ///
  /// `decided`: what the group's state says of earlier leaderships, the latest slot of each job (by name) a
  /// leader decided (started it, skipped it or counted it missed; last_decided()). For a job named there the
  /// slots after it up to `now` are the ones no leader decided: the latest runs if it is run_missed_once and
  /// within the window (a slot a leader decided never runs again), and every other one is counted as missed
  /// (kind::missed when nothing starts). A job not named there is decided from the window alone.
  /// With `handover` (the last leader handed leadership over on purpose, a deploy or a resign, rather than
  /// failing), every job named in `decided` runs its latest undecided slot within the window as
  /// run_missed_once jobs do: those slots came due while leadership changed hands, they were not missed by a
  /// failure.
  std::vector<slot_decision> on_elected(sys_seconds now, std::chrono::seconds misfire_window,
                                        const std::map<std::string, sys_seconds>& decided = {},
                                        bool handover = false);
  /// The latest slot of job `job` a decision of this scheduler covered (a start, a skip, a count of missed
  /// slots), for the group's state; empty before any.
  std::optional<sys_seconds> last_decided(std::size_t job) const { return state_.at(job).decided; }
  /// Leadership ended: nothing is due any more until the next election.
  void on_lost();
  bool leading() const { return leading_; }

  /// Everything due at `now` (slots ≤ now), in job order. Advances each job past `now`. A `now` before the
  /// previous call's is a backward clock step: pending slots are recomputed from `now` first (see above).
  std::vector<slot_decision> due(sys_seconds now);
  /// The earliest pending slot of any job (when to look again); empty when not leading or nothing can fire.
  std::optional<sys_seconds> next_due() const;

  /// Takes a new job list (a reloaded configuration), matching jobs by name: a job kept keeps its count of
  /// runs in flight; every job's next slot is computed afresh (its schedule may have changed) from the last
  /// time the slots were computed, so no slot before the change starts because of it. Returns, for each new
  /// index, the index the job had before (empty for a new job), so the caller can re-point runs in flight.
  std::vector<std::optional<std::size_t>> replace_jobs(std::vector<scheduled_job> jobs);

  /// Suspends or resumes a job from now on: its slots are skipped (skip_suspended) while suspended.
  void set_suspended(std::size_t job, bool suspended) { jobs_.at(job).suspended = suspended; }

  void run_started(std::size_t job);
  void run_finished(std::size_t job);
  int running(std::size_t job) const { return state_.at(job).running; }
  const scheduled_job& job(std::size_t i) const { return jobs_.at(i); }
  std::size_t size() const { return jobs_.size(); }

 private:
  /// What a slot of `job` that is due now gets, from its settings and its runs in flight.
  slot_decision::kind decide(std::size_t job) const;

  struct job_state {
    std::optional<sys_seconds> next;  // next slot strictly after the last one considered
    int running = 0;
    std::optional<sys_seconds> decided;  // see last_decided()
  };
  std::vector<scheduled_job> jobs_;
  std::vector<job_state> state_;
  bool leading_ = false;
  std::optional<sys_seconds> last_now_;  // the latest time the slots were computed from
};

}  // namespace baton::agent
