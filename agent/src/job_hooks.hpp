// SPDX-License-Identifier: Apache-2.0
#pragma once
// A job's notifications (docs/agent.md, "Notifications"): `on_failure`, `on_success` and `on_missed`, each a
// webhook (an HTTP POST of the event's JSON, retried) or a command (the event in its environment). Fired
// once per slot, on its final outcome (not on each retried attempt), by the agent that ran the slot;
// `on_missed` by the one that counted the slots.

#include "config.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <string>

namespace baton::agent {

/// One event for a hook: `event` is `failure`, `success` or `missed`; `body` its JSON (the run, or the slots
/// missed), sent as the webhook's body and given to a command as BATON_HOOK_JSON.
struct hook_event {
  std::string event;
  std::string job;
  std::string body;
};

/// How many times a webhook is sent before the event is given up on (logged at error), and the first pause
/// between tries (doubling).
constexpr int hook_attempts = 4;
constexpr std::chrono::milliseconds hook_first_backoff{500};
/// Bound on one try of a webhook and on a hook command's run.
constexpr std::chrono::milliseconds hook_timeout{10'000};

/// Delivers `e` to `hook`; never throws. Logs each failure (`event=hook_failed`) and the outcome
/// (`event=hook_delivered`, or `hook_given_up` at error after the last try).
boost::asio::awaitable<void> deliver_hook(job_hook hook, hook_event e);

}  // namespace baton::agent
