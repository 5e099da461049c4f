// SPDX-License-Identifier: Apache-2.0
#pragma once
// batond's abuse limits (docs/security.md, "Limits"): the sizes, counts and rates past which a request is
// answered with an error instead of being served. The rate limiter is pure: it takes `now` and never reads a
// clock, so its tests drive time by hand.

#include <chrono>
#include <cstddef>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace baton::server {

struct limits_options {
  /// Open client connections at once. Past it a new connection gets 503 `too_many_connections` with
  /// `Retry-After` and is closed (--max-connections).
  std::size_t max_connections = 4096;
  /// Open connections from one remote IP address; past it the same 503, `too_many_connections_from_address`
  /// (--max-connections-per-address). One address cannot take every slot.
  std::size_t max_connections_per_address = 256;
  /// With tokens: how long a connection that has not yet made an authenticated request may stay open
  /// waiting for one (--unauthenticated-timeout-ms). Its answers without a valid token close it as well, so
  /// nobody without a token keeps a connection by sending a request every few seconds.
  std::chrono::milliseconds unauthenticated_timeout{5'000};
  /// Locks held at once (leases in the table); past it an acquire of a free key gets 503 `too_many_locks`
  /// (--max-locks). A client's own cap is `max_locks=N` in the tokens file (429 `lock_quota_exceeded`).
  std::size_t max_locks = 1'000'000;
  /// Lock records kept (docs/protocol.md, "record"), counted apart from locks: a record outlives its lease
  /// and is never removed, so past it the first write of a new key's record gets 507 `too_many_records`
  /// (--max-records); a key's record may always be replaced.
  std::size_t max_records = 10'000;
  /// Request line plus headers; past it 431 `header_too_large` (--max-header-bytes).
  std::size_t max_header_bytes = 8 * 1024;
  /// Request body; past it 413 `body_too_large` (--max-body-bytes).
  std::size_t max_body_bytes = 8 * 1024;
  /// Sustained requests per second per client (its authenticated name, or its address without a valid
  /// token); 0 turns the limit off (--rate-limit).
  double rate_per_second = 0;
  /// Requests a client may send at once above the sustained rate (--rate-burst).
  double rate_burst = 0;
  /// Long-poll waiters on one key, and in total; past either 503 `too_many_waiters` (--max-waiters-per-key,
  /// --max-waiters).
  /// The total is half of max_connections by default, so waiters never take every connection slot from
  /// acquires and renews.
  std::size_t max_waiters_per_key = 1024;
  std::size_t max_waiters = 2048;
};

/// Throws std::invalid_argument naming the flag when an option is out of range.
void validate(const limits_options& o);

/// A token bucket: `burst` tokens, refilled at `rate` per second. Pure: time is an argument.
class token_bucket {
 public:
  using clock = std::chrono::steady_clock;

  token_bucket(double rate, double burst, clock::time_point now);

  /// Takes one token when there is one (returns nullopt); otherwise takes nothing and returns how long until
  /// a token is available, rounded up to the millisecond.
  std::optional<std::chrono::milliseconds> take(clock::time_point now);

  /// True when the bucket is full at `now`: it remembers nothing a fresh bucket would not.
  bool full(clock::time_point now) const;

 private:
  double level(clock::time_point now) const;

  double rate_;
  double burst_;
  double tokens_;
  clock::time_point last_;
};

/// One token bucket per client, keyed by a string: batond keeps one table keyed by authenticated client name
/// and one keyed by remote IP address (requests without a valid token). Thread-safe.
///
/// Memory is bounded: at most `max_clients` buckets. When the table is full, buckets that are full again
/// (clients idle long enough to have forgotten) are dropped; if none is, clients without a bucket share one
/// overflow bucket, so a flood of new addresses is still limited, as a whole.
class rate_limiter {
 public:
  using clock = token_bucket::clock;

  rate_limiter(double rate, double burst, std::size_t max_clients = 65536);

  /// nullopt: serve the request. Otherwise refuse it; the value is how long the client should wait.
  /// Always nullopt when the rate is 0 (limit off).
  std::optional<std::chrono::milliseconds> admit(std::string_view client, clock::time_point now);

  /// Buckets held (for tests and metrics).
  std::size_t tracked() const;

 private:
  double rate_;
  double burst_;
  std::size_t max_clients_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, token_bucket> buckets_;
  std::optional<token_bucket> overflow_;
  std::optional<clock::time_point> last_scan_;
};

/// Open connections per remote address, counted from accept to close (--max-connections-per-address; the
/// accept loop and every worker). Thread-safe.
class address_connections {
 public:
  explicit address_connections(std::size_t max_per_address) : max_(max_per_address) {}

  /// Counts one more connection from `address`; false, counting nothing, when it has its maximum.
  bool take(const std::string& address);
  /// Counts one connection from `address` fewer.
  void release(const std::string& address);

 private:
  std::size_t max_;
  std::mutex mu_;
  std::unordered_map<std::string, std::size_t> open_;
};

/// The value of a `Retry-After` header for a wait: whole seconds, rounded up, at least 1.
std::string retry_after_seconds(std::chrono::milliseconds wait);

}  // namespace baton::server
