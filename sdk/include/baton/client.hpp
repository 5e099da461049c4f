// SPDX-License-Identifier: Apache-2.0
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

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/error.hpp>

#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

namespace baton {

namespace detail {
struct client_shared;
struct client_access;
}

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
  std::uint64_t acquire_retries = 0;   // acquire tries and long-polls that failed without an answer, retried
  std::uint64_t renews = 0;            // confirmed renews
  std::uint64_t renew_retries = 0;     // renews that failed without an answer and were retried
  std::uint64_t losses = 0;            // leases lost
  std::uint64_t releases = 0;          // leases released
  std::chrono::microseconds last_renew_latency{0};
  std::chrono::microseconds max_renew_latency{0};
};

/// A client of one lock server.
///
/// Threads: every member may be called from any thread, and its coroutines awaited on any executor: each
/// operation is handed to the client's executor on entry and completes on the caller's. The client's executor
/// is a strand of its own on the executor given at construction, so a client is safe on a thread pool or an
/// io_context run by several threads (get_executor() returns that strand).
///
/// Lifetime: movable, not copyable; a moved-from client throws baton::exception(error::empty_handle) (a
/// deferred operation made before the move still runs: it holds the client's state, not the object). Leases
/// keep what they need alive, so they may outlive the client object (they stop renewing only when released,
/// lost, destroyed or shut down). Destroying the client does not release its leases; shutdown() does.
///
/// Cancellation: every awaitable operation throws baton::exception with boost::asio::error::operation_aborted
/// when cancelled (terminal, partial and total cancellation are all honoured, as terminal); the
/// completion-token forms complete with that code. A cancelled acquire never leaves a lock behind: its
/// request, if already sent, finishes in the background (bounded by request_timeout), and what it was granted
/// is released, conditional on owner and token (lease_event::kind::acquire_abandoned). Acquisitions that set
/// the same lease_options::owner must not overlap: the clean-up of one could otherwise find the other's grant
/// (it never touches a lease this client holds).
class client {
 public:
  /// Validates `config` and connects lazily. Throws baton::exception(error::invalid_config).
  client(boost::asio::any_io_executor ex, client_config config);
  /// Uses a given backend (another protocol, or a test double such as baton::testing::memory_backend).
  client(boost::asio::any_io_executor ex, client_config config, std::shared_ptr<backend> b);
  ~client();
  client(client&&) noexcept;
  client& operator=(client&&) noexcept;
  client(const client&) = delete;
  client& operator=(const client&) = delete;

  /// One try: the lease, or the holder if the lock is held. Transport errors and 503s are retried with
  /// jittered backoff (same owner string, so a retry after a lost reply or a 503 storage_unavailable, which
  /// may both follow a grant, is recognised by the server and supersedes it) up to retry_policy.max_attempts,
  /// then thrown as baton::exception. Such an error means "outcome unknown", not "not acquired": the server
  /// may hold the lock for this try's owner until the TTL passes. Throws error::invalid_config for bad
  /// options, error::shut_down after shutdown().
  ///
  /// No argument has a default: each shorter form is an overload (GCC 12 and defaulted class-type arguments,
  /// docs/design.md).
  boost::asio::awaitable<acquire_result> try_acquire(std::string key, lease_options options);
  boost::asio::awaitable<acquire_result> try_acquire(std::string key);

  /// Acquires, waiting as long as it takes: between tries it long-polls the lock, so it wakes the moment the
  /// holder releases or its lease expires; transport errors and 503s are retried with jittered backoff, with
  /// the same owner string (each retry is a lease_event::kind::acquire_retry). With `wait_timeout`, gives up
  /// with baton::exception(error::wait_timeout) once it has passed (its diagnostic says when the last try's
  /// outcome was unknown); a zero `wait_timeout` means one try. Without it, waits as long as it takes.
  /// Cancellable; see the class comment.
  boost::asio::awaitable<lease> acquire(std::string key, lease_options options, milliseconds wait_timeout);
  boost::asio::awaitable<lease> acquire(std::string key, lease_options options);
  boost::asio::awaitable<lease> acquire(std::string key);

  /// The current holder, or empty when the lock is free. Retries like try_acquire.
  boost::asio::awaitable<std::optional<holder_info>> get(std::string key);

  /// Stops the client: acquires in progress and new ones fail with error::shut_down, every live lease is
  /// released (its guarded work sees it released), and it waits until those releases finish or `timeout`
  /// passes (releases still running then go on in the background, bounded by the retry policy). Idle
  /// connections are closed. Cancellation ends the wait only. Without `timeout`: 5 s.
  boost::asio::awaitable<void> shutdown(milliseconds timeout);
  boost::asio::awaitable<void> shutdown();

  /// Runs `fn(lease&)` under a lease of `key`: acquires (waiting, like acquire()), runs the awaitable `fn`
  /// returns under with_lease, and releases on every path — success, exception, loss and cancellation (the
  /// release is shielded from cancellation, see lease::release). Returns what `fn`'s awaitable returned;
  /// throws what it threw, or error::lease_lost. A failed release is not thrown (the lock is then freed by
  /// its TTL).
  ///
  /// GCC 12 destroys a lambda temporary made inside a co_await expression twice when it captures by value
  /// something with a destructor (`[job = std::move(job)]`): the program would free memory twice. On GCC
  /// before 14 such a temporary does not compile here; capture by reference (`[&]`), or pass a named
  /// function object (docs/design.md, "Arguments that GCC 12's coroutines cannot hurt").
  ///
  /// With `wait_timeout`, the acquire gives up as acquire(key, options, wait_timeout) does: with_lock then
  /// throws error::wait_timeout and `fn` never runs.
  template <class F>
  auto with_lock(std::string key, lease_options options, F&& fn)
      -> boost::asio::awaitable<typename std::invoke_result_t<std::decay_t<F>&, lease&>::value_type> {
    check_lock_function<F>();
    return with_lock_impl(std::move(key), options, std::nullopt, std::decay_t<F>(std::forward<F>(fn)));
  }
  template <class F>
  auto with_lock(std::string key, lease_options options, milliseconds wait_timeout, F&& fn)
      -> boost::asio::awaitable<typename std::invoke_result_t<std::decay_t<F>&, lease&>::value_type> {
    check_lock_function<F>();
    return with_lock_impl(std::move(key), options, wait_timeout, std::decay_t<F>(std::forward<F>(fn)));
  }

  // Completion-token forms (use_awaitable, use_future, deferred, as_tuple, callbacks, ...). Each completes
  // with an empty error_code on success and with the code the awaitable form would throw otherwise (no
  // diagnostic: use the awaitable form to get the server's message); invalid options and a moved-from
  // client throw baton::exception at once, from the initiating call. Cancellation is per operation, through
  // the token's associated cancellation slot (bind_cancellation_slot): terminal, partial and total are all
  // honoured as terminal.

  /// acquire(): `void(error_code, lease)`; the lease is empty on error. Cancellable. Without `wait_timeout`
  /// it waits as long as it takes.
  template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(boost::system::error_code, lease)) Token>
  auto async_acquire(std::string key, lease_options options, milliseconds wait_timeout, Token&& token) {
    return async_acquire_impl(std::move(key), options, wait_timeout, std::forward<Token>(token));
  }
  template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(boost::system::error_code, lease)) Token>
  auto async_acquire(std::string key, lease_options options, Token&& token) {
    return async_acquire_impl(std::move(key), options, std::nullopt, std::forward<Token>(token));
  }
  /// try_acquire(): `void(error_code, acquire_result)`. Cancellable.
  template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(boost::system::error_code, acquire_result)) Token>
  auto async_try_acquire(std::string key, lease_options options, Token&& token) {
    shared();
    options.validate();
    return boost::asio::async_initiate<Token, void(boost::system::error_code, acquire_result)>(
        [s = shared()](auto handler, std::string k, lease_options o) {
          start_try_acquire(s, std::move(k), std::move(o), std::move(handler));
        },
        token, std::move(key), std::move(options));
  }
  /// shutdown(): `void(error_code)`. Cancellation ends the wait only.
  template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(boost::system::error_code)) Token>
  auto async_shutdown(milliseconds timeout, Token&& token) {
    shared();
    return boost::asio::async_initiate<Token, void(boost::system::error_code)>(
        [s = shared()](auto handler, milliseconds t) { start_shutdown(s, t, std::move(handler)); }, token, timeout);
  }

  /// Reads the TLS files again (a certificate rotated at the same path) and, once the CA bundle, the
  /// certificate and its key all loaded and the key belongs to the certificate, makes the new context the one
  /// every connection made from then on uses, to the lock server and, for etcds://, to every member.
  /// Connections already open keep theirs until they close; leases, their renewals and requests in flight
  /// are untouched. The form with `tls` reads those files instead and uses them from then on, for later
  /// reloads too (config() still returns the configuration the client was made with).
  ///
  /// Errors are returned, never thrown (but a moved-from client throws baton::exception(error::empty_handle),
  /// as every member does): on any failure (a missing or unreadable file, a file that is not PEM, a key of
  /// another certificate, cert_file without key_file) nothing changes, and the result's ec is
  /// error::invalid_config with a diagnostic naming the setting, the file and the reason. A client of an
  /// http:// or etcd:// server, or one given a backend without TLS files (backend::reload_tls()'s default),
  /// gets error::invalid_config too.
  ///
  /// Thread-safety: may be called from any thread, concurrently with the client's operations (the new
  /// context is swapped in atomically); reloads are serialized. It reads the files on the calling thread and
  /// does not wait for the client's executor. Not an asynchronous operation: nothing to cancel.
  tls_reload_result reload_tls();
  tls_reload_result reload_tls(const tls_config& tls);

  /// The owner prefix of this client (`config.identity`, or `<hostname>:<pid>`).
  const std::string& identity() const;
  const client_config& config() const;
  client_stats stats() const;
  /// The executor the client's state lives on: its own strand on the executor it was given.
  const boost::asio::any_io_executor& get_executor() const;

 private:
  struct own_strand {};
  client(own_strand, boost::asio::any_io_executor strand, client_config config);
  client(own_strand, boost::asio::any_io_executor strand, client_config config, std::shared_ptr<backend> b);

  template <class F>
  static constexpr void check_lock_function() {
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 14
    static_assert(std::is_lvalue_reference_v<F> || std::is_trivially_copyable_v<std::decay_t<F>>,
                  "baton::client::with_lock: on GCC before 14 a temporary function object that owns resources "
                  "(a lambda capturing a std::string or a shared_ptr by value, say) is destroyed twice inside "
                  "co_await. Capture by reference ([&]) or pass a named function object.");
#endif
  }

  template <class Token>
  auto async_acquire_impl(std::string key, lease_options options, std::optional<milliseconds> wait_timeout,
                          Token&& token) {
    shared();
    options.validate();
    return boost::asio::async_initiate<Token, void(boost::system::error_code, lease)>(
        [s = shared()](auto handler, std::string k, lease_options o, std::optional<milliseconds> w) {
          start_acquire(s, std::move(k), std::move(o), w, std::move(handler));
        },
        token, std::move(key), std::move(options), wait_timeout);
  }

  // The awaitable acquire with an optional wait bound (the public forms are overloads).
  boost::asio::awaitable<lease> acquire_waiting(std::string key, lease_options options,
                                                std::optional<milliseconds> wait_timeout);

  template <class F>
  auto with_lock_impl(std::string key, lease_options options, std::optional<milliseconds> wait_timeout, F fn)
      -> boost::asio::awaitable<typename std::invoke_result_t<F&, lease&>::value_type> {
    using T = typename std::invoke_result_t<F&, lease&>::value_type;
    lease l = co_await acquire_waiting(std::move(key), options, wait_timeout);
    std::exception_ptr failure;
    std::optional<std::conditional_t<std::is_void_v<T>, int, T>> result;
    try {
      if constexpr (std::is_void_v<T>) {
        co_await with_lease(l, fn(l));
        result.emplace(0);
      } else {
        result.emplace(co_await with_lease(l, fn(l)));
      }
    } catch (const exception&) {
      failure = std::current_exception();
    } catch (const boost::system::system_error& e) {
      // The work's own awaited operation, cancelled with this call: every failure of an SDK call, cancellation
      // included, is a baton::exception.
      if (e.code() == boost::asio::error::operation_aborted)
        failure = std::make_exception_ptr(exception(e.code(), "with_lock was cancelled while its work ran"));
      else
        failure = std::current_exception();
    } catch (...) {
      failure = std::current_exception();
    }
    // release() starts the release when called; awaiting it may throw at once if this coroutine was
    // cancelled, and its outcome is not reported either way. A lease that is no longer active (lost, or
    // released by shutdown()) is not waited for: the loss is reported now, and what release there is goes on
    // in the background (a lost lease's conditional release only frees the key sooner).
    const bool lost = l.state() == lease_state::lost;
    auto released = l.release();
    if (!lost) {
      try {
        co_await std::move(released);
      } catch (...) {
      }
    }
    if (failure) std::rethrow_exception(failure);
    if constexpr (!std::is_void_v<T>) co_return std::move(*result);
  }

  friend struct detail::client_access;  // the SDK's own code (election): client_access.hpp
  const std::shared_ptr<detail::client_shared>& shared() const;
  // Static, and given the shared state: a deferred operation may be launched after the client moved.
  static void start_acquire(std::shared_ptr<detail::client_shared> s, std::string key, lease_options options,
                            std::optional<milliseconds> wait_timeout,
                     boost::asio::any_completion_handler<void(boost::system::error_code, lease)> h);
  static void start_try_acquire(std::shared_ptr<detail::client_shared> s, std::string key, lease_options options,
                         boost::asio::any_completion_handler<void(boost::system::error_code, acquire_result)> h);
  static void start_shutdown(std::shared_ptr<detail::client_shared> s, milliseconds timeout,
                             boost::asio::any_completion_handler<void(boost::system::error_code)> h);
  std::shared_ptr<detail::client_shared> shared_;
};

}  // namespace baton
