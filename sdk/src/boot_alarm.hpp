// SPDX-License-Identifier: Apache-2.0
#pragma once
// Lease-clock timers that fire on time across a host suspend. Private to the SDK.
//
// Asio waits for all of a reactor's timers with one CLOCK_MONOTONIC timerfd armed with a relative
// duration, and CLOCK_MONOTONIC stops while the host is suspended. After a resume, a wait on a lease-clock
// (CLOCK_BOOTTIME) timer whose instant passed during the suspend therefore ends only when the relative wait
// runs out: a lease's loss would be declared, and its guarded work cancelled, as late as the suspend was
// long, while the server may already have given the lock to someone else.
//
// So each io_context gets one CLOCK_BOOTTIME timerfd, armed at an absolute instant: the earliest instant a
// lease timer of that context was set to. When it fires, an expired lease-clock timer is waited on, which
// makes the reactor compute its timeout again from lease_clock::now(): every timer whose instant has passed
// completes at once (docs/design.md, "Host suspend").
//
// An instant is kept only while its boot_wake lives: the timer's owner drops it when its wait ends. With no
// instant left the alarm has no wait pending, so a context whose leases are all released or lost runs out of
// work, and io_context::run() returns, instead of waiting for the last deadline a lease ever had.

#include "baton/lease_state.hpp"

#include <boost/asio/any_io_executor.hpp>

#include <memory>

namespace baton::detail {

struct boot_alarm_state;

/// One instant the boot alarm keeps, for as long as this object lives (or until reset()). Move-only; may be
/// destroyed on any thread, and after its execution context (then it does nothing).
class boot_wake {
 public:
  boot_wake() = default;
  boot_wake(boot_wake&& o) noexcept;
  boot_wake& operator=(boot_wake&& o) noexcept;
  boot_wake(const boot_wake&) = delete;
  boot_wake& operator=(const boot_wake&) = delete;
  ~boot_wake() { reset(); }
  /// Drops the instant: the alarm no longer wakes for it (nor waits at all, if it was the last).
  void reset() noexcept;

 private:
  friend boot_wake wake_on_boot_clock(const boost::asio::any_io_executor& ex, lease_clock::time_point at);
  std::shared_ptr<boot_alarm_state> state_;
  lease_clock::time_point at_{};
};

/// Makes sure the lease-clock timers of `ex`'s execution context that are set to `at` complete no later
/// than `at` on CLOCK_BOOTTIME, a suspend of the host included, while the returned object lives. Call it
/// when such a timer is set to `at`, and keep the result until the timer's wait ends. Thread-safe. Without a
/// CLOCK_BOOTTIME timerfd (never on Linux 3.15 or later) it does nothing.
[[nodiscard]] boot_wake wake_on_boot_clock(const boost::asio::any_io_executor& ex,
                                           lease_clock::time_point at);

}  // namespace baton::detail
