// SPDX-License-Identifier: Apache-2.0
#pragma once
// Whether the agent reaches its lock server, from the outcome of every request it sends there. The SDK
// retries a failed acquire or renew on its own and says nothing while it does; without this an agent that
// cannot reach the server (wrong URL, server down, firewall) logs nothing at all.
//
// The bookkeeping is pure (time is an argument), so the log's rate limit is unit-tested; observe_backend()
// feeds it from the SDK's backend interface, which sees every request, retries included.

#include "baton/backend.hpp"

#include <boost/system/error_code.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace baton::agent {

/// True when `ec` means the lock server did not give a usable answer: no connection, no answer in time, TLS
/// refused, a 5xx or 429, a token refused, an answer that breaks the protocol. False for success and for
/// the protocol's own refusals (`held`, a renew answered `lost`), which are answers, and for cancellation.
bool is_lock_server_failure(const boost::system::error_code& ec);

/// What to log after an outcome (lock_server_health::failed / answered).
struct lock_server_notice {
  enum class kind {
    unreachable,        // the first failure after an answer (or at start): log at once
    still_unreachable,  // failures go on: at most one line per log_every
    reachable,          // the first answer after failures
  };
  kind what;
  std::string error;                      // the latest failure
  std::uint64_t failures = 0;             // failures since the server last answered
  std::chrono::milliseconds down_for{0};  // since the first of those failures
};

/// A snapshot for /readyz and /metrics.
struct lock_server_status {
  bool reachable = false;    // the latest request was answered (false until one is)
  std::uint64_t errors = 0;  // failed requests since the agent started
  std::string last_error;    // the latest failure, empty if none yet
  std::optional<std::chrono::system_clock::time_point> unreachable_since;  // while not reachable
};

class lock_server_health {
 public:
  explicit lock_server_health(std::chrono::milliseconds log_every = std::chrono::seconds(30))
      : log_every_(log_every) {}

  /// A request failed (is_lock_server_failure). `now` decides the rate limit; `wall` is only displayed.
  std::optional<lock_server_notice> failed(std::chrono::steady_clock::time_point now,
                                           std::chrono::system_clock::time_point wall, std::string error);
  /// A request was answered.
  std::optional<lock_server_notice> answered(std::chrono::steady_clock::time_point now);

  const lock_server_status& status() const { return status_; }

 private:
  std::chrono::milliseconds log_every_;
  lock_server_status status_;
  std::uint64_t failures_ = 0;  // since the last answer
  std::optional<std::chrono::steady_clock::time_point> down_since_, last_logged_;
};

/// Wraps `inner` so that `observe(ec, diagnostic)` is called after every request it completes, on the
/// backend's executor, with the request's outcome. The wrapper forwards reload_tls: client::reload_tls()
/// reaches `inner` (invalid_config when `inner` cannot read its TLS files again).
std::shared_ptr<backend> observe_backend(
    std::shared_ptr<backend> inner,
    std::function<void(const boost::system::error_code&, const std::string&)> observe);

}  // namespace baton::agent
