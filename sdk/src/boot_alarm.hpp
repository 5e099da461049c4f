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

#include "baton/lease_state.hpp"

#include <boost/asio/any_io_executor.hpp>

namespace baton::detail {

/// Makes sure the lease-clock timers of `ex`'s execution context that are set to `at` complete no later
/// than `at` on CLOCK_BOOTTIME, a suspend of the host included. Call it when such a timer is set to `at`.
/// Thread-safe. Without a CLOCK_BOOTTIME timerfd (never on Linux 3.15 or later) it does nothing.
void wake_on_boot_clock(const boost::asio::any_io_executor& ex, lease_clock::time_point at);

}  // namespace baton::detail
