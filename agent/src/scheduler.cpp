// SPDX-License-Identifier: Apache-2.0
#include "scheduler.hpp"

#include <algorithm>

namespace baton::agent {

scheduler::scheduler(std::vector<scheduled_job> jobs) : jobs_(std::move(jobs)), state_(jobs_.size()) {}

std::vector<slot_decision> scheduler::on_elected(sys_seconds now, std::chrono::seconds misfire_window,
                                                 const std::map<std::string, sys_seconds>& decided,
                                                 bool handover) {
  leading_ = true;
  last_now_ = now;
  std::vector<slot_decision> out;
  for (std::size_t i = 0; i < jobs_.size(); ++i) {
    auto& s = state_[i];
    if (jobs_[i].elsewhere) {
      s.next.reset();
      continue;
    }
    s.next = jobs_[i].sched.next_fire(now, jobs_[i].tz);
    const auto window = jobs_[i].misfire_window.value_or(misfire_window);
    if (const auto known = decided.find(jobs_[i].name); known != decided.end()) {
      // The group knows where the last leader stopped: every slot since is this leader's to run or count.
      const auto [count, latest] = slots_between(jobs_[i].sched, jobs_[i].tz, known->second, now);
      s.decided = std::max(known->second, latest.value_or(known->second));
      if (count == 0) continue;
      if ((jobs_[i].run_missed_once || handover) && *latest + window >= now)
        out.push_back({decide(i), i, *latest, count - 1});
      else
        out.push_back({slot_decision::kind::missed, i, *latest, count});
      continue;
    }
    if (!jobs_[i].run_missed_once) continue;
    // The most recent slot at or before `now`: the first slot after (now - window) that is not after now.
    auto candidate = jobs_[i].sched.next_fire(now - window - std::chrono::seconds(1), jobs_[i].tz);
    std::optional<sys_seconds> latest;
    while (candidate && *candidate <= now) {
      latest = candidate;
      candidate = jobs_[i].sched.next_fire(*candidate, jobs_[i].tz);
    }
    if (!latest) continue;
    s.decided = latest;
    out.push_back({decide(i), i, *latest, 0});
  }
  return out;
}

slot_span slots_between(const schedule& sched, const date::time_zone* tz, sys_seconds after,
                        sys_seconds until) {
  std::uint64_t count = 0;
  std::optional<sys_seconds> latest;
  auto slot = sched.next_fire(after, tz);
  while (slot && *slot <= until) {
    latest = slot;
    // Bounded: past a million slots the walk jumps to the last two days before `until` (so the latest slot is
    // still found), and the count is a lower bound.
    constexpr auto tail = std::chrono::hours(48);
    if (++count == 1'000'000 && until - *slot > tail) {
      slot = sched.next_fire(until - tail, tz);
      continue;
    }
    slot = sched.next_fire(*slot, tz);
  }
  return {count, latest};
}

void scheduler::on_lost() {
  leading_ = false;
  last_now_.reset();
  for (auto& s : state_)
    s.next.reset();
}

std::vector<slot_decision> scheduler::due(sys_seconds now) {
  std::vector<slot_decision> out;
  if (!leading_) return out;
  if (last_now_ && now < *last_now_) {
    // The wall clock went back. `next` lies after the old time and would hold each job until the clock
    // catches up again.
    const bool reset = *last_now_ - now > max_unrepeated_step;
    for (std::size_t i = 0; i < jobs_.size(); ++i)
      if (!jobs_[i].elsewhere && (reset || jobs_[i].sched.is_interval()))
        state_[i].next = jobs_[i].sched.next_fire(now, jobs_[i].tz);
  }
  last_now_ = now;
  for (std::size_t i = 0; i < jobs_.size(); ++i) {
    auto& s = state_[i];
    if (!s.next || *s.next > now) continue;
    // Walk to the latest due slot; the ones before it are missed, not run (no backlog after a pause).
    sys_seconds slot = *s.next;
    std::uint64_t missed = 0;
    auto following = jobs_[i].sched.next_fire(slot, jobs_[i].tz);
    // Bounded: a schedule firing every second over a pause of a day is 86,400 steps; past the bound the rest
    // of the gap is skipped in one jump (still no backlog, only the count is then a lower bound).
    while (following && *following <= now) {
      if (++missed > 1'000'000) {
        following = jobs_[i].sched.next_fire(now, jobs_[i].tz);
        break;
      }
      slot = *following;
      following = jobs_[i].sched.next_fire(slot, jobs_[i].tz);
    }
    s.next = following;
    s.decided = slot;
    out.push_back({decide(i), i, slot, missed});
  }
  return out;
}

std::optional<sys_seconds> scheduler::next_due() const {
  if (!leading_) return std::nullopt;
  std::optional<sys_seconds> best;
  for (const auto& s : state_)
    if (s.next && (!best || *s.next < *best)) best = s.next;
  return best;
}

std::vector<std::optional<std::size_t>> scheduler::replace_jobs(std::vector<scheduled_job> jobs) {
  std::vector<job_state> state(jobs.size());
  std::vector<std::optional<std::size_t>> before(jobs.size());
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    for (std::size_t j = 0; j < jobs_.size(); ++j)
      if (jobs_[j].name == jobs[i].name) {
        before[i] = j;
        state[i].running = state_[j].running;
        state[i].decided = state_[j].decided;
      }
    if (leading_ && last_now_ && !jobs[i].elsewhere)
      state[i].next = jobs[i].sched.next_fire(*last_now_, jobs[i].tz);
  }
  jobs_ = std::move(jobs);
  state_ = std::move(state);
  return before;
}

std::optional<std::chrono::milliseconds> retry_wait(int attempt, std::chrono::milliseconds backoff,
                                                    double unit, std::chrono::system_clock::time_point now,
                                                    std::optional<sys_seconds> next_slot) {
  const int doublings = std::clamp(attempt - 1, 0, 10);
  const double factor = 0.5 + 0.5 * std::clamp(unit, 0.0, 1.0);
  const auto wait = std::chrono::milliseconds(static_cast<std::int64_t>(
      static_cast<double>(backoff.count() * (std::int64_t{1} << doublings)) * factor));
  if (next_slot && now + wait >= *next_slot) return std::nullopt;
  return wait;
}

slot_decision::kind scheduler::decide(std::size_t job) const {
  const auto& j = jobs_[job];
  // Suspension comes first: a suspended job starts nothing, so it replaces nothing either.
  if (j.suspended) return slot_decision::kind::skip_suspended;
  if (state_[job].running == 0 || j.allow_overlap) return slot_decision::kind::start;
  return j.replace_running ? slot_decision::kind::replace : slot_decision::kind::skip_overlap;
}

void scheduler::run_started(std::size_t job) {
  ++state_.at(job).running;
}
void scheduler::run_finished(std::size_t job) {
  if (state_.at(job).running > 0) --state_.at(job).running;
}

}  // namespace baton::agent
