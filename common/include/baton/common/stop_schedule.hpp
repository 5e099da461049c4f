// SPDX-License-Identifier: Apache-2.0
#pragma once
// When a command run under a lease must be stopped, and how late its SIGKILL may come (docs/design.md, "A
// command's stop under a lease"). Pure: times are passed in, nothing is read or signalled here, and nothing
// allocates, so the supervisor process (group_guard) runs it between fork and _exit.
//
// Times are durations since boot on CLOCK_BOOTTIME (baton::lease_clock's epoch), the clock a lease's local
// deadline is kept on: it counts a host suspend, as the lock server's clock does.

#include <algorithm>
#include <chrono>

namespace baton {

/// How long after the local deadline the command may still run once the lease is lost: half the lease's
/// safety margin. The local deadline is (last renew sent) + ttl - margin, and the server may expire the lease
/// at (last renew sent) + ttl at the earliest, i.e. deadline + margin. The other half of the margin is kept
/// for what the kill itself takes (the supervisor's wake-up, the signal's delivery, a write already in the
/// kernel) and for clock-rate drift between client and server.
constexpr std::chrono::nanoseconds borrowed_time(std::chrono::nanoseconds safety_margin) {
  return safety_margin / 2;
}

/// The latest instant a command under a lease with local deadline `deadline` may get SIGKILL.
constexpr std::chrono::nanoseconds kill_by(std::chrono::nanoseconds deadline,
                                           std::chrono::nanoseconds safety_margin) {
  return deadline + borrowed_time(safety_margin);
}

/// Whether a stop's grace (SIGTERM to SIGKILL) fits after a loss: SIGTERM comes at the local deadline, and
/// SIGKILL no later than kill_by().
constexpr bool grace_fits(std::chrono::nanoseconds grace, std::chrono::nanoseconds safety_margin) {
  return grace <= borrowed_time(safety_margin);
}

/// How often a holder tells its supervisor the lease's deadline: a renew confirmed less than this before the
/// old deadline may still see the command stopped (on the safe side), so small against the TTL; and cheap,
/// a clock read when nothing changed.
constexpr std::chrono::milliseconds report_period(std::chrono::milliseconds ttl) {
  return std::clamp(ttl / 100, std::chrono::milliseconds(5), std::chrono::milliseconds(100));
}

/// The supervisor's decisions for one command: SIGTERM to its group when the local deadline passes without
/// an extension, SIGKILL `grace` later but no later than kill_by; each confirmed renew extends both, until
/// the stop has begun (a lease lost is never regained).
class stop_schedule {
 public:
  using time_point = std::chrono::nanoseconds;
  static constexpr time_point never = time_point::max();

  struct actions {
    bool term = false;
    bool kill = false;
  };

  /// term_at: the local deadline; kill_at: kill_by() of that deadline.
  constexpr stop_schedule(time_point term_at, time_point kill_at, std::chrono::nanoseconds grace)
      : term_at_(term_at), kill_at_(kill_at), grace_(grace) {}

  /// A confirmed renew moved the deadline. Ignored once the stop has begun, and for limits that are not
  /// later (a late or repeated report never shortens them either: the lease does not end sooner).
  constexpr void extend(time_point term_at, time_point kill_at) {
    if (terminating_) return;
    term_at_ = std::max(term_at_, term_at);
    kill_at_ = std::max(kill_at_, kill_at);
  }

  /// What to do at `now`; each action is returned once.
  constexpr actions poll(time_point now) {
    actions a;
    if (!terminating_ && now >= term_at_) {
      terminating_ = true;
      a.term = true;
      // The grace counts from SIGTERM as sent, and still ends by kill_at when SIGTERM itself came late.
      kill_at_ = std::min(kill_at_, now + grace_);
    }
    if (!killed_ && now >= kill_at_) {
      killed_ = true;
      a.kill = true;
    }
    return a;
  }

  /// When to call poll() next; `never` once SIGKILL has been decided.
  constexpr time_point wake_at() const {
    if (killed_) return never;
    return terminating_ ? kill_at_ : std::min(term_at_, kill_at_);
  }

  constexpr bool terminating() const { return terminating_; }
  constexpr bool killed() const { return killed_; }

 private:
  time_point term_at_;
  time_point kill_at_;
  std::chrono::nanoseconds grace_;
  bool terminating_ = false;
  bool killed_ = false;
};

}  // namespace baton
