// SPDX-License-Identifier: Apache-2.0
#pragma once
// The lease state machine: when to renew, when the local deadline passes, what a renew answer means.
// Pure: no I/O, no clock of its own (every call takes `now`), a seeded random source for jitter. The Asio
// driver in lease.cpp carries out what it decides; the unit tests drive it by hand.

#include "baton/config.hpp"
#include "baton/lease_state.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <random>
#include <string>

namespace baton {

namespace detail {

using clock = lease_clock;

/// A small random bit generator (splitmix64): 8 bytes of state instead of mt19937_64's 2.5 KB, which matters
/// when one process holds thousands of leases. Jitter needs spread, not cryptographic strength.
class jitter_rng {
 public:
  using result_type = std::uint64_t;
  explicit jitter_rng(std::uint64_t seed) : state_(seed) {}
  static constexpr result_type min() { return 0; }
  static constexpr result_type max() { return ~result_type{0}; }
  result_type operator()() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }

 private:
  std::uint64_t state_;
};

/// When a batching client's driver wakes for `f`'s next look (docs/design.md, "Batch renewal in the client"):
/// wake_at() moved up to the next multiple of `step` on lease_clock, so that renewals falling due within one
/// step wake the process together; unchanged when step is not positive, when the look is for the deadline
/// itself, or when the moved wake would leave less than `budget` (a whole request) before the deadline.
/// Never earlier than wake_at(), and later by less than one step.
inline clock::time_point wake_on_grid(clock::time_point wake_at, clock::time_point deadline,
                                      clock::duration step, clock::duration budget) {
  if (step <= clock::duration::zero() || wake_at >= deadline) return wake_at;
  const auto since = wake_at.time_since_epoch();
  const auto on_grid = clock::time_point((since + step - clock::duration(1)) / step * step);
  return on_grid + budget <= deadline ? on_grid : wake_at;
}

/// The batch window of a lease renewed every `renew_every` when the client does not set one: a hundredth of
/// the renew period, so the wait for others costs every lease the same small share of its lead time, at least
/// 2 ms and at most a quarter of `request_timeout` (docs/design.md, "Batch renewal in the client").
inline milliseconds default_batch_window(milliseconds renew_every, milliseconds request_timeout) {
  const auto w = std::max(std::chrono::ceil<milliseconds>(renew_every / 100.0), milliseconds(2));
  return std::min(w, request_timeout / 4);
}

/// The pause before the `attempt`-th retry (1-based): initial_backoff doubled per earlier failure, capped at
/// max_backoff, drawn uniformly from [b * (1 - jitter), b]. The one backoff rule of the SDK (acquire,
/// release, get and renew retries).
clock::duration backoff(const retry_policy& policy, int attempt, jitter_rng& rng);

/// The one rule for a lease that ends on its own: it is lost once its local deadline passes, whatever the
/// renewal scheduler has seen yet. The state machine, lease::state() and the election all decide with it.
constexpr bool past_deadline(lease_clock::time_point deadline, lease_clock::time_point now) noexcept {
  return now >= deadline;
}

/// The state a reader sees: `published` (what the renewal scheduler last decided), lost once past the
/// deadline.
constexpr lease_state observed_state(lease_state published, lease_clock::time_point deadline,
                                     lease_clock::time_point now) noexcept {
  return published == lease_state::active && past_deadline(deadline, now) ? lease_state::lost : published;
}

class lease_fsm {
 public:
  struct timing {
    milliseconds ttl;
    milliseconds renew_every;
    milliseconds safety_margin;
    double jitter;
    retry_policy retry;

    static timing from(const lease_options& o, const retry_policy& r) {
      return {o.ttl, o.effective_renew_every(), o.effective_safety_margin(), o.jitter, r};
    }
  };

  enum class action { wait, renew, declare_lost };
  enum class renew_outcome { renewed, too_late };

  /// `acquire_sent` is when the acquire request that succeeded was sent: the server started the lease after
  /// it.
  lease_fsm(timing t, clock::time_point acquire_sent, std::uint64_t seed);

  lease_state state() const { return state_; }
  /// Local deadline: the last instant the holder may consider itself the owner.
  clock::time_point deadline() const { return deadline_; }
  /// When the next renew should be sent.
  clock::time_point next_renew() const { return next_renew_; }
  /// When the driver must look again: the earlier of next_renew() and deadline().
  clock::time_point wake_at() const { return std::min(next_renew_, deadline_); }
  int consecutive_failures() const { return failures_; }
  const std::string& loss_reason() const { return loss_reason_; }

  /// What to do at `now`. Declares the lease lost once `now` reaches the deadline.
  action poll(clock::time_point now);

  /// A renew sent at `sent` was confirmed at `now`. If the deadline passed meanwhile the lease stays lost
  /// (too_late): the driver then releases it in the background.
  renew_outcome on_renew_ok(clock::time_point sent, clock::time_point now);
  /// The server refused the renew (it no longer holds the lease for us): lost at once.
  void on_renew_refused(std::string reason);
  /// A renew failed without an answer (transport error, timeout): retry after a jittered backoff, always
  /// before the deadline while time remains.
  void on_renew_failed(clock::time_point now);
  /// The holder released the lease.
  void on_released();
  /// The lease is lost for a reason outside the state machine (e.g. the client shut down).
  void on_lost(std::string reason);

 private:
  clock::duration jittered_period();

  timing t_;
  jitter_rng rng_;
  lease_state state_ = lease_state::active;
  clock::time_point deadline_;
  clock::time_point next_renew_;
  int failures_ = 0;
  std::string loss_reason_;
};

}  // namespace detail
}  // namespace baton
