#pragma once
// The Baton client: acquires leases from a lock server and keeps them renewed.
//
//   boost::asio::io_context ioc;
//   baton::client c(ioc.get_executor(), {.server_url = "http://127.0.0.1:7070"});
//   co_spawn(ioc, [&]() -> awaitable<void> {
//     baton::lease l = co_await c.acquire("jobs/nightly", {.ttl = 10s});
//     co_await baton::with_lease(l, run_job(l.token()));
//     co_await l.release();
//   }, detached);

#include "baton/backend.hpp"
#include "baton/config.hpp"
#include "baton/error.hpp"
#include "baton/lease.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace baton {

/// The answer to one acquire try: the lease, or who holds the lock.
struct acquire_result {
  std::optional<lease> acquired;
  /// When not acquired: the current holder.
  holder_info holder;
};

/// Counters of a client's lease activity (for metrics). Read with client::stats().
struct client_stats {
  std::uint64_t acquires = 0;          // leases granted
  std::uint64_t acquire_refusals = 0;  // tries answered "held"
  std::uint64_t renews = 0;            // confirmed renews
  std::uint64_t renew_retries = 0;     // renews that failed without an answer and were retried
  std::uint64_t losses = 0;            // leases lost
  std::uint64_t releases = 0;          // leases released
  std::chrono::microseconds last_renew_latency{0};
  std::chrono::microseconds max_renew_latency{0};
};

/// A client of one lock server. All coroutines must run on the executor given at construction (use a strand
/// if that is a multi-threaded io_context). Not copyable; leases keep what they need alive, so they may
/// outlive the client (they stop renewing only when released, lost or destroyed).
class client {
 public:
  /// Validates `config` and connects lazily. Throws baton::exception(error::invalid_config).
  client(boost::asio::any_io_executor ex, client_config config);
  /// Uses a given backend (another protocol, or a test double).
  client(boost::asio::any_io_executor ex, client_config config, std::shared_ptr<backend> b);
  ~client();
  client(const client&) = delete;
  client& operator=(const client&) = delete;

  /// One try: the lease, or the holder if the lock is held. Transport errors and 503s are retried with
  /// jittered backoff (same owner string, so a retry after a lost reply or a 503 storage_unavailable, which
  /// may both follow a grant, is recognised by the server and supersedes it) up to retry_policy.max_attempts,
  /// then thrown as baton::exception. Such an error means "outcome unknown", not "not acquired": the server
  /// may hold the lock for this try's owner until the TTL passes. Throws error::invalid_config for bad
  /// options.
  boost::asio::awaitable<acquire_result> try_acquire(std::string key, lease_options options = {});

  /// Acquires, waiting as long as it takes: between tries it long-polls the lock, so it wakes the moment the
  /// holder releases or its lease expires; transport errors and 503s are retried with jittered backoff, with
  /// the same owner string. With `wait_timeout`, gives up with baton::exception(error::wait_timeout) (its
  /// diagnostic says when the last try's outcome was unknown). Cancellable (terminal): throws
  /// operation_aborted.
  boost::asio::awaitable<lease> acquire(std::string key, lease_options options = {},
                                        std::optional<milliseconds> wait_timeout = std::nullopt);

  /// The current holder, or empty when the lock is free. Retries like try_acquire.
  boost::asio::awaitable<std::optional<holder_info>> get(std::string key);

  /// The owner prefix of this client (`config.identity`, or `<hostname>:<pid>`).
  const std::string& identity() const;
  const client_config& config() const;
  client_stats stats() const;
  /// The backend, for stateless calls (the CLI's renew and release of a lease held elsewhere).
  const std::shared_ptr<backend>& get_backend() const;

 private:
  struct impl;
  std::shared_ptr<impl> impl_;
};

}  // namespace baton
