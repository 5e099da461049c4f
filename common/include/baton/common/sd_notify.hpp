// SPDX-License-Identifier: Apache-2.0
#pragma once
// systemd's service notification protocol (sd_notify(3)), spoken directly: one datagram of `NAME=value`
// lines to the AF_UNIX socket named by NOTIFY_SOCKET. batond and baton-agent say READY=1 once they serve,
// WATCHDOG=1 while their serving loop turns, and STOPPING=1 when they shut down (docs/deploy.md).
// Outside systemd (no NOTIFY_SOCKET) every call does nothing.

#include <chrono>
#include <optional>
#include <string_view>

#include <sys/types.h>

namespace baton::sd_notify {

/// Sends `state` (one or more `NAME=value` lines, e.g. "READY=1\nSTATUS=serving") to NOTIFY_SOCKET: a file
/// system path, or an abstract socket when it starts with '@'. Does nothing when NOTIFY_SOCKET is unset or
/// empty. Never throws and never blocks (the socket is non-blocking; a full queue drops the message): a
/// failure is logged once per process at warn (`sd_notify_failed`) and later ones are dropped silently, as
/// the service manager that should hear them is the one thing missing. Thread-safe.
void notify(std::string_view state);

/// The interval systemd expects WATCHDOG=1 within, from WATCHDOG_USEC and WATCHDOG_PID: set when
/// WATCHDOG_USEC is a positive decimal number of microseconds and WATCHDOG_PID is unset or equals getpid()
/// (a child that inherited the variables must not ping for its parent). Pings go every half of it.
std::optional<std::chrono::microseconds> watchdog_timeout();

/// watchdog_timeout() on given values (nullptr: unset). Pure.
std::optional<std::chrono::microseconds> parse_watchdog(const char* watchdog_usec, const char* watchdog_pid,
                                                        pid_t self);

}  // namespace baton::sd_notify
