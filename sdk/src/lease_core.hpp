// SPDX-License-Identifier: Apache-2.0
#pragma once
// The shared state behind a client, a lease handle and its renewal. Private to the SDK.
//
// Threads: fields marked "executor only" are touched only on the client's executor; every public entry point
// hands its work to that executor first (co_spawn onto it), so a caller on another thread or strand never
// touches them. Fields marked "any thread" are atomics or guarded by a mutex.

#include "baton/backend.hpp"
#include "baton/client.hpp"
#include "baton/config.hpp"
#include "baton/detail/co_spawn_relayed.hpp"
#include "baton/detail/lease_fsm.hpp"
#include "renewal_scheduler.hpp"
#include "timer.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/append.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/basic_waitable_timer.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <atomic>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

// Whether the calling coroutine was cancelled. A macro, not a coroutine: awaiting anything in a cancelled
// coroutine throws before the awaited body runs, which is what this check is there to avoid.
#define BATON_CANCELLED() \
  ((co_await boost::asio::this_coro::cancellation_state).cancelled() != boost::asio::cancellation_type::none)

namespace baton::detail {

/// Timers that coroutines wait on until something happens; the event cancels them all. A waiter registers
/// for the duration of one wait (the registration removes itself when the waiting frame ends, even when the
/// frame is destroyed without resuming).
class wakeup_list {
 public:
  class registration {
   public:
    registration(wakeup_list& l, timer* t) : list_(l), it_(l.waiters_.insert(l.waiters_.end(), t)) {}
    ~registration() { list_.waiters_.erase(it_); }
    registration(const registration&) = delete;
    registration& operator=(const registration&) = delete;

   private:
    wakeup_list& list_;
    std::list<timer*>::iterator it_;
  };
  void wake_all() {
    for (auto* t : waiters_)
      t->cancel();
  }
  /// Wakes the waiter whose timer expires last, if any, and returns its timer.
  const timer* wake_latest() {
    timer* latest = nullptr;
    for (auto* t : waiters_)
      if (!latest || t->expiry() > latest->expiry()) latest = t;
    if (latest) latest->cancel();
    return latest;
  }

 private:
  std::list<timer*> waiters_;
};

/// What a client shares with its leases (leases may outlive the client object). Its time_base is the client's
/// strand and clock: every timer and every reading of the time in the SDK goes through it.
struct client_shared : time_base, std::enable_shared_from_this<client_shared> {
  client_config config;
  std::shared_ptr<baton::backend> backend;
  std::string identity;

  // Executor only.
  jitter_rng rng{0};
  bool shutting_down = false;
  wakeup_list on_shutdown;  // waits that end when shutdown() begins (acquire's long-poll and backoff)
  int in_flight = 0;        // acquire requests, and clean-ups of their grants, still running
  wakeup_list on_idle;      // woken when in_flight drops
  std::shared_ptr<renew_batcher> batcher;  // made at the first renewal that may join a batch
  renewal_scheduler renewals{*this};       // the leases' renewals
  /// Waiting acquires long-poll until then: the backend does not queue them (backend::acquire_queued).
  clock::time_point queue_unsupported_until{};

  // Any thread.
  std::atomic<bool> context_gone{false};  // the io_context is shut down or destroyed: post nothing to it
  std::atomic<std::uint64_t> acquires{0}, acquire_refusals{0}, acquire_retries{0}, renews{0},
      renew_retries{0}, losses{0}, releases{0};
  std::atomic<std::int64_t> last_renew_us{0}, max_renew_us{0};

  void emit(lease_event::kind what, std::string_view key, std::uint64_t token,
            std::chrono::microseconds latency = {}, std::string_view reason = {}) const {
    if (config.on_event) config.on_event(lease_event{what, key, token, latency, reason});
  }
  /// A jittered exponential backoff for the `attempt`-th failure (1-based). Executor only.
  clock::duration backoff(int attempt) { return detail::backoff(config.retry, attempt, rng); }

  /// Leases of this client that may still be active, for shutdown(). Any thread.
  void track(const std::shared_ptr<lease_core>& c);
  std::vector<std::shared_ptr<lease_core>> tracked();
  /// Whether a live lease of this client holds `key` with `token`. Any thread.
  bool holds(const std::string& key, std::uint64_t token);

  /// Called when the io_context shuts down (its destructor, or shutdown()): from then on nothing is posted to
  /// it, and the backend lets go of its sockets while their services still exist.
  void context_shutdown();

 private:
  std::mutex live_mu_;
  std::vector<std::weak_ptr<lease_core>> live_;
  std::size_t prune_at_ = 64;
};

/// Registers `s` with its io_context, so that the context's shutdown reaches it (client_shared::
/// context_shutdown).
void watch_context(const std::shared_ptr<client_shared>& s);

/// One release of a lease: started once, awaited by any number of callers.
struct release_op {
  bool done = false;
  release_reply reply;
  wakeup_list on_done;
};

struct lease_core : std::enable_shared_from_this<lease_core> {
  lease_core(std::shared_ptr<client_shared> c, std::string k, std::string o, std::uint64_t t,
             lease_options opts, clock::time_point sent);

  // Immutable after construction.
  std::shared_ptr<client_shared> client;
  std::string key;
  std::string owner;
  std::uint64_t token;
  /// A semaphore's permit: its slot and the key's permit count (slot 0 of 1 for a lock). Set before start().
  std::uint32_t slot = 0;
  std::uint32_t permits = 1;
  /// What the lease keeps of its lease_options. Not the whole struct: it carries the owner and the value
  /// inline (bounded_string, 1.3 KB), which the lease holds as strings of their own size (owner, value).
  struct kept_options {
    milliseconds ttl;
    milliseconds renew_every;  // lease_options::effective_renew_every()
  } options;

  // Executor only.
  lease_fsm fsm;
  wakeup_list on_state_change;      // wait_lost and with_lease's loss watch
  renewal_scheduler::slot renewal;  // where its renewal stands
  std::shared_ptr<release_op> release;
  std::unique_ptr<baton::loss_watch> watch;  // the backend's watch on the key while active (null: none)

  // Any thread.
  std::atomic<lease_state> state{lease_state::active};
  std::atomic<clock::rep> deadline_ticks;
  std::atomic<int> guarded{0};  // with_lease calls running (detail::guarded_work)
  wakeup_list on_guard_end;     // executor only: woken when `guarded` drops to 0
  mutable std::mutex reason_mu;
  std::string reason;
  std::string value;  // guarded by reason_mu: options.value, then what election::async_proclaim published

  /// The state as lease::state() reports it: the published one, lost once the deadline passed (the renewal
  /// scheduler may not have looked yet at the deadline). Any thread.
  lease_state observed_state() const;
  /// Copies the state machine's verdict to the thread-safe fields; wakes state waiters once not active.
  void publish();
  /// Starts the renewal, and the backend's loss watch (backend::watch_loss()).
  void start();
  /// Stops renewal (release or abandonment). Executor only.
  void stop();
  /// Starts the conditional release: the lease becomes released if it was active, renewal stops, and the
  /// release runs in the background with retries. While one runs, later calls return it; after one
  /// succeeded, a call gets already_free at once (nothing sent, counted or reported again); after a failed
  /// one, a call sends it again.
  /// `by_holder`: the holder asked for it (counted and reported as a release). `after_guarded_work`: the
  /// request waits until the lease's guarded work (with_lease) has ended, up to `guard_wait` (shutdown).
  /// Executor only.
  std::shared_ptr<release_op> begin_release(bool by_holder, milliseconds guard_wait = milliseconds{0});
};

/// The SDK's one retry loop for a request that is safe to repeat (every protocol request is): calls `op()`
/// until its reply succeeds, fails for good, or `max_attempts` tries failed transiently (0: no limit),
/// waiting the client's jittered backoff between tries, and returns the last reply. `on_retry(attempt,
/// reply)` runs before each wait. A cancelled caller ends the wait with operation_aborted (one launched
/// without a cancellation slot, such as a release, never is). `op` and `on_retry` are kept in the coroutine
/// frame: give them reference captures only (GCC 12 and closures in co_await expressions, docs/design.md).
/// Executor only.
template <class Op, class OnRetry>
auto with_retries(std::shared_ptr<client_shared> s, int max_attempts, Op op, OnRetry on_retry)
    -> boost::asio::awaitable<typename decltype(op())::value_type> {
  for (int attempt = 1;; ++attempt) {
    auto r = co_await op();
    if (!r.ec || !is_transient(r.ec) || (max_attempts > 0 && attempt >= max_attempts)) co_return r;
    on_retry(attempt, r);
    timer t(*s, s->backoff(attempt));
    co_await t.async_wait(boost::asio::as_tuple(boost::asio::use_awaitable));
    auto state = co_await boost::asio::this_coro::cancellation_state;
    if (state.cancelled() != boost::asio::cancellation_type::none)
      throw exception(make_error_code(boost::asio::error::operation_aborted));
  }
}

/// An on_retry for with_retries that does nothing.
struct no_retry_hook_t {
  template <class Reply>
  void operator()(int, const Reply&) const noexcept {}
};
inline constexpr no_retry_hook_t no_retry_hook{};

/// Completes when the lease is lost (or, with `or_released`, released); at once if it already is. Throws
/// baton::exception(operation_aborted) when cancelled first. Runs on the client's executor.
boost::asio::awaitable<void> wait_state(std::shared_ptr<lease_core> c, bool or_released);

/// The outcome of the ticket's release, starting it if needed. Runs on the client's executor; not
/// cancellable (the release is bounded by the retry policy).
boost::asio::awaitable<release_reply> await_release(std::shared_ptr<lease_core> c, release_ticket ticket);

/// Completes a completion-token form's handler: through the client's executor (never inside the initiating
/// call), then on the handler's own executor.
template <class Handler, class... Args>
void complete(Handler h, const boost::asio::any_io_executor& ex, Args... args) {
  boost::asio::post(ex, [h = std::move(h), ex, ... args = std::move(args)]() mutable {
    auto hex = boost::asio::get_associated_executor(h, ex);
    boost::asio::dispatch(hex, boost::asio::append(std::move(h), std::move(args)...));
  });
}

/// Maps partial and total cancellation to terminal: each operation honours all three the same way.
inline boost::asio::cancellation_type any_cancellation_is_terminal(boost::asio::cancellation_type t) {
  return t != boost::asio::cancellation_type::none ? boost::asio::cancellation_type::terminal : t;
}

/// `op`, with every type of cancellation taken as terminal (run it as the coroutine co_spawn starts).
template <class T>
boost::asio::awaitable<T> honouring_any_cancellation(boost::asio::awaitable<T> op) {
  co_await boost::asio::this_coro::reset_cancellation_state(any_cancellation_is_terminal);
  co_return co_await std::move(op);
}

/// Rethrows `e` as baton::exception: a system_error keeps its code, Asio's multiple_exceptions becomes its
/// first exception; anything else is rethrown as it is.
[[noreturn]] void rethrow_as_baton_exception(std::exception_ptr e);

/// An exception as an error code (for the completion-token forms), its message (a baton::exception's
/// diagnostic) written to `*diag` when `diag` is given. Asio's multiple_exceptions (two branches of a race
/// failed) counts as its first exception.
boost::system::error_code to_error_code(const std::exception_ptr& e, std::string* diag = nullptr);

/// Runs `op` on the client's executor `ex`, with any cancellation of `h`'s slot taken as terminal (none when
/// not `cancellable`), and completes `h` with what it returned or the error it threw (the message in
/// `*diag`).
template <class T, class Handler>
void launch(const boost::asio::any_io_executor& ex, boost::asio::awaitable<T> op, std::string* diag,
            Handler h, bool cancellable = true) {
  auto slot = cancellable ? h.get_cancellation_slot() : boost::asio::cancellation_slot();
  if constexpr (std::is_void_v<T>) {
    co_spawn_relayed(
        ex, honouring_any_cancellation(std::move(op)),
        boost::asio::bind_cancellation_slot(slot, [h = std::move(h), ex, diag](std::exception_ptr e) mutable {
          complete(std::move(h), ex, to_error_code(e, diag));
        }));
  } else {
    co_spawn_relayed(ex, honouring_any_cancellation(std::move(op)),
                     boost::asio::bind_cancellation_slot(
                         slot, [h = std::move(h), ex, diag](std::exception_ptr e, T v) mutable {
                           complete(std::move(h), ex, to_error_code(e, diag), std::move(v));
                         }));
  }
}

}  // namespace baton::detail
