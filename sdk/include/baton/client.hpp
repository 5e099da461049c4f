// SPDX-License-Identifier: Apache-2.0
#pragma once
// The Baton client: acquires leases from a lock server and keeps them renewed.
//
//   boost::asio::io_context ioc;
//   baton::client c(ioc.get_executor(), {.server_url = "http://127.0.0.1:7070"});
//   co_spawn(ioc, [&]() -> awaitable<void> {
//     baton::lease l = co_await c.async_acquire("jobs/nightly", {.ttl = 10s});
//     co_await baton::with_lease(l, run_job(l.token()));
//     co_await l.async_release();
//   }, detached);

#include "baton/backend.hpp"
#include "baton/completion.hpp"
#include "baton/config.hpp"
#include "baton/detail/co_spawn_relayed.hpp"
#include "baton/error.hpp"
#include "baton/lease.hpp"

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace baton {

class semaphore;

namespace detail {
struct client_shared;
struct client_access;
template <class F>
using lock_value_t = typename std::invoke_result_t<std::decay_t<F>&, lease&>::value_type;
template <class T>
struct lock_signature_of {
  using type = void(std::exception_ptr, T);
};
template <>
struct lock_signature_of<void> {
  using type = void(std::exception_ptr);
};
template <class F>
using lock_signature = typename lock_signature_of<lock_value_t<F>>::type;
}  // namespace detail

/// The answer to one acquire try: the lease, or who holds the lock.
struct acquire_result {
  std::optional<lease> acquired;
  /// When not acquired: the current holder (of a semaphore: the permit that expires first).
  holder_info holder;
  /// When not acquired: the key's permit count (1 for a lock), and, for a semaphore, every live permit in
  /// slot order (empty for a lock).
  std::uint32_t permits = 1;
  std::vector<holder_info> holders{};
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
/// lost, destroyed or shut down). Destroying the client does not release its leases; async_shutdown() does.
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

  // Every operation is one function async_x(args..., token) for any Asio completion token. The default token
  // makes `co_await c.async_acquire(k)` work in a boost::asio::awaitable coroutine and throws
  // baton::exception (the code and the server's message); any other token (use_future, deferred, as_tuple, a
  // callback) gets an error_code first, and baton::with_diagnostics adds the message (completion.hpp). Every
  // error reaches the handler: bad options, a shut-down client and a moved-from client (error::empty_handle)
  // included; the initiating call never throws. Handlers run on their own associated executor (a coroutine's,
  // for the default token), never inside the initiating call.
  //
  // No argument of a class type has a default (the token's is an empty, trivially copyable object): each
  // shorter form is an overload (GCC 12 and class-type temporaries of a co_await expression, docs/design.md).
  // Cancellation is per operation, through the token's cancellation slot (a coroutine's own, for the default
  // token): terminal, partial and total are all honoured as terminal.

  /// One try: the lease, or the holder if the lock is held. `void(error_code, acquire_result)`. Transport
  /// errors and 503s are retried with jittered backoff (same owner string, so a retry after a lost reply or a
  /// 503 storage_unavailable, which may both follow a grant, is recognised by the server and supersedes it)
  /// up to retry_policy.max_attempts, then reported. Such an error means "outcome unknown", not "not
  /// acquired": what the last try may have been granted is released in the background. error::invalid_config
  /// for bad options, error::shut_down after async_shutdown(). Cancellable; see the class comment.
  template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(boost::system::error_code, acquire_result))
                Token = default_token_t>
  auto async_try_acquire(std::string key, lease_options options, Token&& token = {}) {
    return boost::asio::async_initiate<Token, void(boost::system::error_code, acquire_result)>(
        [s = shared_](auto handler, std::string k, lease_options o) {
          auto* diag = detail::diagnostic_slot(handler);
          start_try_acquire(s, std::move(k), o, 1, diag, std::move(handler));
        },
        token, std::move(key), options);
  }
  template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(boost::system::error_code, acquire_result)) Token>
  auto async_try_acquire(std::string key, Token&& token) {
    return async_try_acquire(std::move(key), lease_options{}, std::forward<Token>(token));
  }
  boost::asio::awaitable<acquire_result> async_try_acquire(std::string key);

  /// Acquires, waiting as long as it takes: `void(error_code, lease)`, the lease empty on error. Between
  /// tries it long-polls the lock, so it wakes the moment the holder releases or its lease expires; transport
  /// errors and 503s are retried with jittered backoff, with the same owner string (each retry is a
  /// lease_event::kind::acquire_retry). With `wait_timeout`, gives up with error::wait_timeout once it has
  /// passed (its diagnostic says when the last try's outcome was unknown); a zero `wait_timeout` means one
  /// try. Cancellable; see the class comment.
  template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(boost::system::error_code, lease)) Token = default_token_t>
  auto async_acquire(std::string key, lease_options options, milliseconds wait_timeout, Token&& token = {}) {
    return initiate_acquire(std::move(key), options, wait_timeout, std::forward<Token>(token));
  }
  template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(boost::system::error_code, lease)) Token = default_token_t>
  auto async_acquire(std::string key, lease_options options, Token&& token = {}) {
    return initiate_acquire(std::move(key), options, std::nullopt, std::forward<Token>(token));
  }
  template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(boost::system::error_code, lease)) Token>
  auto async_acquire(std::string key, Token&& token) {
    return initiate_acquire(std::move(key), lease_options{}, std::nullopt, std::forward<Token>(token));
  }
  boost::asio::awaitable<lease> async_acquire(std::string key);

  /// The current holder, or empty when the lock is free: `void(error_code, std::optional<holder_info>)`.
  /// Retries like async_try_acquire.
  template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(boost::system::error_code, std::optional<holder_info>))
                Token = default_token_t>
  auto async_get(std::string key, Token&& token = {}) {
    return boost::asio::async_initiate<Token, void(boost::system::error_code, std::optional<holder_info>)>(
        [s = shared_](auto handler, std::string k) {
          auto* diag = detail::diagnostic_slot(handler);
          start_get(s, std::move(k), diag, std::move(handler));
        },
        token, std::move(key));
  }

  /// The lock's record of `key` (docs/protocol.md, "record"; lease::async_write_record writes it):
  /// `void(error_code, std::optional<lock_record>)`, empty when the key has none. It outlives leases, so it
  /// reads the same whoever holds the key, or nobody. Retries transient errors like async_get.
  /// error::invalid_config when the server does not keep records (feature `lock_record`; nothing sent).
  template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(boost::system::error_code, std::optional<lock_record>))
                Token = default_token_t>
  auto async_read_record(std::string key, Token&& token = {}) {
    return boost::asio::async_initiate<Token, void(boost::system::error_code, std::optional<lock_record>)>(
        [s = shared_](auto handler, std::string k) {
          auto* diag = detail::diagnostic_slot(handler);
          start_read_record(s, std::move(k), diag, std::move(handler));
        },
        token, std::move(key));
  }

  /// One page of the held locks whose key starts with `prefix` (docs/protocol.md, "list"): `void(error_code,
  /// lock_page)`, at most `limit` locks (1 to the server's `list_max`, batond 1,000) in key order after the
  /// key `after` (empty: from the first). The page's `next` is the `after` of the following page, empty after
  /// the last. A read: retried like async_get. error::forbidden without read access to `prefix`;
  /// error::bad_request for a bad prefix, cursor or limit; error::invalid_config, nothing sent, when the
  /// server or backend cannot list (feature `list_locks`; the etcd backend does not list). Cancellation
  /// abandons the request.
  template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(boost::system::error_code, lock_page))
                Token = default_token_t>
  auto async_list(std::string prefix, std::string after, std::size_t limit, Token&& token = {}) {
    return boost::asio::async_initiate<Token, void(boost::system::error_code, lock_page)>(
        [s = shared_](auto handler, std::string p, std::string a, std::size_t n) {
          auto* diag = detail::diagnostic_slot(handler);
          start_list(s, std::move(p), std::move(a), n, diag, std::move(handler));
        },
        token, std::move(prefix), std::move(after), limit);
  }
  /// The first page of 100.
  template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(boost::system::error_code, lock_page))
                Token = default_token_t>
  auto async_list(std::string prefix, Token&& token = {}) {
    return async_list(std::move(prefix), std::string(), 100, std::forward<Token>(token));
  }

  /// An operator's break (docs/protocol.md, "break"): ends the lease on `key` whoever holds it, or, with a
  /// non-zero `expected_token`, only the lease with that token (the one the operator looked at):
  /// `void(error_code, holder_info)`, the lease ended. error::not_held: no lease holds the key;
  /// error::token_mismatch: another token holds it (the diagnostic names the holder); error::forbidden: the
  /// token has no admin access to the key; error::invalid_config, nothing sent, when the server or backend
  /// cannot break (feature `break_lease`). Never retried (without a token a retry could break the next
  /// holder): after a transient error the outcome is unknown; list or get to see. Cancellation abandons the
  /// request, whose outcome is then unknown as well.
  template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(boost::system::error_code, holder_info))
                Token = default_token_t>
  auto async_break(std::string key, std::uint64_t expected_token, Token&& token = {}) {
    return boost::asio::async_initiate<Token, void(boost::system::error_code, holder_info)>(
        [s = shared_](auto handler, std::string k, std::uint64_t t) {
          auto* diag = detail::diagnostic_slot(handler);
          start_break(s, std::move(k), t, diag, std::move(handler));
        },
        token, std::move(key), expected_token);
  }
  /// Whoever holds it.
  template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(boost::system::error_code, holder_info))
                Token = default_token_t>
  auto async_break(std::string key, Token&& token = {}) {
    return async_break(std::move(key), std::uint64_t{0}, std::forward<Token>(token));
  }

  /// Stops the client: `void(error_code)`. Acquires in progress and new ones fail with error::shut_down,
  /// every live lease is released (its guarded work is cancelled first), and it waits until those releases
  /// finish or `timeout` passes (releases still running then go on in the background, bounded by the retry
  /// policy). Idle connections are closed. Cancellation ends the wait only. Without `timeout`: 5 s.
  template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(boost::system::error_code)) Token = default_token_t>
  auto async_shutdown(milliseconds timeout, Token&& token = {}) {
    return boost::asio::async_initiate<Token, void(boost::system::error_code)>(
        [s = shared_](auto handler, milliseconds t) {
          auto* diag = detail::diagnostic_slot(handler);
          start_shutdown(s, t, diag, std::move(handler));
        },
        token, timeout);
  }
  template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(boost::system::error_code)) Token = default_token_t>
  auto async_shutdown(Token&& token = {}) {
    return async_shutdown(milliseconds{5'000}, std::forward<Token>(token));
  }

  /// Runs `fn(lease&)` under a lease of `key`: acquires (waiting, like async_acquire), runs the awaitable
  /// `fn` returns under with_lease, and releases on every path — success, exception, loss and cancellation
  /// (the release is shielded from cancellation, see lease::async_release). Completes with
  /// `void(std::exception_ptr, T)` (`void(std::exception_ptr)` when `fn`'s awaitable returns void), as
  /// co_spawn does: the work's own exception passes through unchanged, and the lease's loss is
  /// error::lease_lost; with the default token, `co_await` returns T or throws. T must be default
  /// constructible. A lease lost while the work ran is reported as soon as it is lost, never as a success;
  /// its release then goes on in the background. A failed release is not reported (the lock is then freed
  /// by its TTL). The work runs on the handler's associated executor (the awaiting coroutine's), or the
  /// client's for a handler without one.
  ///
  /// GCC 12 destroys a lambda temporary made inside a co_await expression twice when it captures by value
  /// something with a destructor (`[job = std::move(job)]`): the program would free memory twice. On GCC
  /// before 14 such a temporary does not compile here; capture by reference (`[&]`), or pass a named
  /// function object (docs/design.md, "Arguments that GCC 12's coroutines cannot hurt").
  ///
  /// With `wait_timeout`, the acquire gives up as async_acquire(key, options, wait_timeout) does:
  /// error::wait_timeout, and `fn` never runs.
  template <class F, BOOST_ASIO_COMPLETION_TOKEN_FOR(detail::lock_signature<F>) Token = default_token_t>
  auto async_with_lock(std::string key, lease_options options, F&& fn, Token&& token = {}) {
    check_lock_function<F>();
    return initiate_with_lock(shared_, std::move(key), options, 1, std::nullopt,
                              std::decay_t<F>(std::forward<F>(fn)), std::forward<Token>(token));
  }
  template <class F, BOOST_ASIO_COMPLETION_TOKEN_FOR(detail::lock_signature<F>) Token = default_token_t>
  auto async_with_lock(std::string key, lease_options options, milliseconds wait_timeout, F&& fn,
                       Token&& token = {}) {
    check_lock_function<F>();
    return initiate_with_lock(shared_, std::move(key), options, 1, wait_timeout,
                              std::decay_t<F>(std::forward<F>(fn)), std::forward<Token>(token));
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
    static_assert(
        std::is_lvalue_reference_v<F> || std::is_trivially_copyable_v<std::decay_t<F>>,
        "baton::client::with_lock: on GCC before 14 a temporary function object that owns resources "
        "(a lambda capturing a std::string or a shared_ptr by value, say) is destroyed twice inside "
        "co_await. Capture by reference ([&]) or pass a named function object.");
#endif
  }

  template <class Token>
  auto initiate_acquire(std::string key, lease_options options, std::optional<milliseconds> wait_timeout,
                        Token&& token) {
    return initiate_acquire(shared_, std::move(key), options, 1, wait_timeout, std::forward<Token>(token));
  }
  // `permits`: 1 for a lock, more for a semaphore's permit (baton/semaphore.hpp).
  template <class Token>
  static auto initiate_acquire(std::shared_ptr<detail::client_shared> shared, std::string key,
                               lease_options options, std::uint32_t permits,
                               std::optional<milliseconds> wait_timeout, Token&& token) {
    return boost::asio::async_initiate<Token, void(boost::system::error_code, lease)>(
        [s = std::move(shared), permits](auto handler, std::string k, lease_options o,
                                         std::optional<milliseconds> w) {
          auto* diag = detail::diagnostic_slot(handler);
          start_acquire(s, std::move(k), o, permits, w, diag, std::move(handler));
        },
        token, std::move(key), options, wait_timeout);
  }
  template <class Token>
  static auto initiate_try_acquire(std::shared_ptr<detail::client_shared> shared, std::string key,
                                   lease_options options, std::uint32_t permits, Token&& token) {
    return boost::asio::async_initiate<Token, void(boost::system::error_code, acquire_result)>(
        [s = std::move(shared), permits](auto handler, std::string k, lease_options o) {
          auto* diag = detail::diagnostic_slot(handler);
          start_try_acquire(s, std::move(k), o, permits, diag, std::move(handler));
        },
        token, std::move(key), options);
  }

  template <class Fn, class Token>
  static auto initiate_with_lock(std::shared_ptr<detail::client_shared> shared, std::string key,
                                 lease_options options, std::uint32_t permits,
                                 std::optional<milliseconds> wait_timeout, Fn fn, Token&& token) {
    using T = detail::lock_value_t<Fn>;
    static_assert(std::is_void_v<T> || std::is_default_constructible_v<T>,
                  "baton::client::async_with_lock: the work's result type must be default constructible "
                  "(it completes like co_spawn, with a value on every path)");
    return boost::asio::async_initiate<Token, detail::lock_signature<Fn>>(
        [s = std::move(shared), permits](auto handler, std::string k, lease_options o,
                                         std::optional<milliseconds> w, Fn f) {
          auto ex = boost::asio::get_associated_executor(handler, work_executor(s));
          detail::co_spawn_relayed(ex, with_lock_impl(s, std::move(k), o, permits, w, std::move(f)),
                                   std::move(handler));
        },
        token, std::move(key), options, wait_timeout, std::move(fn));
  }

  template <class F>
  static auto with_lock_impl(std::shared_ptr<detail::client_shared> s, std::string key, lease_options options,
                             std::uint32_t permits, std::optional<milliseconds> wait_timeout, F fn)
      -> boost::asio::awaitable<detail::lock_value_t<F>> {
    using T = detail::lock_value_t<F>;
    lease l = co_await acquire_for(s, std::move(key), options, wait_timeout, permits);
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
      // The work's own awaited operation, cancelled with this call: every failure of an SDK call,
      // cancellation included, is a baton::exception.
      if (e.code() == boost::asio::error::operation_aborted)
        failure = std::make_exception_ptr(exception(e.code(), "with_lock was cancelled while its work ran"));
      else
        failure = std::current_exception();
    } catch (...) {
      failure = std::current_exception();
    }
    // async_release() starts the release when called; awaiting it may throw at once if this coroutine was
    // cancelled, and its outcome is not reported either way. A lease that is no longer active (lost, or
    // released by async_shutdown()) is not waited for: the loss is reported now, and what release there is
    // goes on in the background (a lost lease's conditional release only frees the key sooner).
    const bool lost = l.state() == lease_state::lost;
    auto released = l.async_release(boost::asio::as_tuple(boost::asio::use_awaitable));
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
  friend class semaphore;               // a semaphore's permits are this client's acquisitions
  const std::shared_ptr<detail::client_shared>& shared() const;
  // Static, and given the shared state: a deferred operation may be launched after the client moved. A null
  // state (a moved-from client) completes the handler with error::empty_handle. `diag`: where the message
  // goes (detail::diagnostic_slot), or null.
  static void start_acquire(std::shared_ptr<detail::client_shared> s, std::string key, lease_options options,
                            std::uint32_t permits, std::optional<milliseconds> wait_timeout,
                            std::string* diag,
                            boost::asio::any_completion_handler<void(boost::system::error_code, lease)> h);
  static void start_try_acquire(
      std::shared_ptr<detail::client_shared> s, std::string key, lease_options options, std::uint32_t permits,
      std::string* diag,
      boost::asio::any_completion_handler<void(boost::system::error_code, acquire_result)> h);
  static void start_get(
      std::shared_ptr<detail::client_shared> s, std::string key, std::string* diag,
      boost::asio::any_completion_handler<void(boost::system::error_code, std::optional<holder_info>)> h);
  static void start_read_record(
      std::shared_ptr<detail::client_shared> s, std::string key, std::string* diag,
      boost::asio::any_completion_handler<void(boost::system::error_code, std::optional<lock_record>)> h);
  static void start_list(std::shared_ptr<detail::client_shared> s, std::string prefix, std::string after,
                         std::size_t limit, std::string* diag,
                         boost::asio::any_completion_handler<void(boost::system::error_code, lock_page)> h);
  static void start_break(
      std::shared_ptr<detail::client_shared> s, std::string key, std::uint64_t expected, std::string* diag,
      boost::asio::any_completion_handler<void(boost::system::error_code, holder_info)> h);
  static void start_shutdown(std::shared_ptr<detail::client_shared> s, milliseconds timeout,
                             std::string* diag,
                             boost::asio::any_completion_handler<void(boost::system::error_code)> h);
  // async_acquire with the default token, for async_with_lock.
  static boost::asio::awaitable<lease> acquire_for(std::shared_ptr<detail::client_shared> s, std::string key,
                                                   lease_options options,
                                                   std::optional<milliseconds> wait_timeout,
                                                   std::uint32_t permits = 1);
  // Where async_with_lock runs the work of a handler without an executor of its own.
  static boost::asio::any_io_executor work_executor(const std::shared_ptr<detail::client_shared>& s);
  std::shared_ptr<detail::client_shared> shared_;
};

inline boost::asio::awaitable<acquire_result> client::async_try_acquire(std::string key) {
  return async_try_acquire(std::move(key), lease_options{}, default_token);
}

inline boost::asio::awaitable<lease> client::async_acquire(std::string key) {
  return initiate_acquire(std::move(key), lease_options{}, std::nullopt, default_token);
}

}  // namespace baton
