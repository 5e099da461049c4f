#pragma once
// The shared state behind a lease handle and its renewal task. Private to the SDK.

#include "baton/backend.hpp"
#include "baton/client.hpp"
#include "baton/config.hpp"
#include "baton/detail/lease_fsm.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/steady_timer.hpp>

#include <atomic>
#include <list>
#include <memory>
#include <mutex>
#include <random>
#include <string>

namespace baton::detail {

/// What a client shares with its leases (leases may outlive the client object).
struct client_shared {
  boost::asio::any_io_executor ex;
  client_config config;
  std::shared_ptr<baton::backend> backend;
  std::string identity;
  std::mt19937_64 rng;

  std::atomic<std::uint64_t> acquires{0}, acquire_refusals{0}, renews{0}, renew_retries{0}, losses{0}, releases{0};
  std::atomic<std::int64_t> last_renew_us{0}, max_renew_us{0};

  void emit(lease_event::kind what, std::string_view key, std::uint64_t token,
            std::chrono::microseconds latency = {}, std::string_view reason = {}) const {
    if (config.on_event) config.on_event(lease_event{what, key, token, latency, reason});
  }
  /// A jittered exponential backoff for the `attempt`-th failure (1-based).
  clock::duration backoff(int attempt);
};

struct lease_core : std::enable_shared_from_this<lease_core> {
  lease_core(std::shared_ptr<client_shared> c, std::string k, std::string o, std::uint64_t t, lease_options opts,
             clock::time_point sent);

  // Immutable after construction.
  std::shared_ptr<client_shared> client;
  std::string key;
  std::string owner;
  std::uint64_t token;
  lease_options options;

  // Executor only.
  lease_fsm fsm;
  boost::asio::steady_timer wake;
  std::list<boost::asio::steady_timer*> lost_waiters;
  boost::asio::cancellation_signal stop_renewal;
  bool renewal_running = false;
  bool release_started = false;

  // Any thread.
  std::atomic<lease_state> state{lease_state::active};
  std::atomic<clock::rep> deadline_ticks;
  mutable std::mutex reason_mu;
  std::string reason;

  /// Copies the state machine's verdict to the thread-safe fields; wakes loss waiters once not active.
  void publish();
  /// Starts the renewal task.
  void start();
  /// Stops renewal (release or abandonment): executor only.
  void stop();
  /// Best-effort conditional release in the background (destroyed handle, late renew).
  void release_in_background();
};

}  // namespace baton::detail
