// SPDX-License-Identifier: Apache-2.0
#pragma once
// A held lock: the lease handle, its automatic renewal, and running work under it.

#include "baton/backend.hpp"
#include "baton/completion.hpp"
#include "baton/error.hpp"
#include "baton/fence.hpp"
#include "baton/lease_state.hpp"

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>

#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>

namespace baton {

class lease;

namespace detail {
struct lease_core;
struct release_op;
/// One caller's release: the operation it started (or joined), set by whichever of its steps runs first.
using release_ticket = std::shared_ptr<std::shared_ptr<release_op>>;
/// Completes when `l` is lost (not when it is released).
boost::asio::awaitable<void> until_lost(const lease& l);
/// Completes when `l` is no longer active: lost, or released (by anyone); with_lease's watch.
boost::asio::awaitable<void> until_inactive(const lease& l);
/// While alive, `l` has guarded work running: client::async_shutdown() lets it end before it releases the
/// lease.
class guarded_work {
 public:
  explicit guarded_work(const lease& l);
  ~guarded_work();
  guarded_work(const guarded_work&) = delete;
  guarded_work& operator=(const guarded_work&) = delete;

 private:
  std::shared_ptr<lease_core> core_;
};
lease make_lease(std::shared_ptr<lease_core> core);
/// The state behind a handle (empty for an empty handle); election::resign's way back to its lease.
std::shared_ptr<lease_core> core_of(const lease& l);
}  // namespace detail

/// A lease on one lock, renewed automatically in the background until it is released or lost.
///
/// Move-only. The holder may act only while active(): `token()` is the fencing token to pass with every
/// write. The lease is lost when its local deadline — (time the last acquire/renew was *sent*) + ttl −
/// safety margin, on lease_clock — passes without a confirmed renew, or when the server refuses a renew. Lost
/// and released are final: a lease never becomes active again; acquiring again gives a new lease with a new
/// token.
///
/// A default-constructed or moved-from lease is an empty handle: `bool(l)` is false, and every other member
/// throws baton::exception(error::empty_handle).
///
/// Threads: every member may be called from any thread. The operations (wait_lost, release and their token
/// forms) run on the client's executor — they are handed to it on entry — and complete on the caller's.
/// Destroying an active lease (from any thread) starts its release in the background, on the client's
/// executor. If that executor's io_context is stopped and never run again, nothing is sent: the lease
/// stays held on the server until its TTL passes. If the io_context is already destroyed, destroying a lease
/// does nothing (and is safe).
class lease {
 public:
  /// An empty handle.
  lease() noexcept = default;
  lease(lease&&) noexcept;
  /// Releases the lease this handle held (like destruction), then takes `other`'s.
  lease& operator=(lease&&) noexcept;
  lease(const lease&) = delete;
  lease& operator=(const lease&) = delete;
  ~lease();

  /// False for an empty handle.
  explicit operator bool() const noexcept { return core_ != nullptr; }

  const std::string& key() const;
  /// The owner string of this acquisition: `<identity>#<random>`, or lease_options::owner.
  const std::string& owner() const;
  /// The value published with the lease: lease_options::value, or the last one election::async_proclaim
  /// published with it; empty when none. A copy: a proclaim may change it from another thread.
  std::string value() const;
  /// The fencing token. Pass it with every write to the protected resource.
  std::uint64_t token() const;
  /// A semaphore's permit (baton/semaphore.hpp): its slot, 0 to permits() - 1. 0 for a lock.
  std::uint32_t slot() const;
  /// The key's permit count this lease was granted under: 1 for a lock.
  std::uint32_t permits() const;
  /// What to pass to the protected resource: the token, the slot and the count (docs/fencing.md). A resource
  /// fences a permit holder per (key, slot), so a stale holder of one slot is refused while the others'
  /// writes go on, and refuses a slot past the count of a newer token (fence_guard::apply(resource, fence,
  /// fn)). For a lock: token(), slot 0, count 1.
  baton::fence fence() const;
  /// active until the local deadline passes (checked against the clock here, so state() and active() never
  /// disagree), then lost; released after async_release().
  lease_state state() const;
  /// True while state() is active.
  bool active() const;
  /// The local deadline on lease_clock. Moves forward with every confirmed renew.
  lease_clock::time_point deadline() const;
  /// Why the lease was lost (empty while active or after release).
  std::string loss_reason() const;

  /// Completes once the lease is no longer active (lost or released), at once if it already is not:
  /// `void(error_code)`. Cancellation (terminal, partial or total): completes with
  /// boost::asio::error::operation_aborted. error::empty_handle for an empty handle.
  template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(boost::system::error_code)) Token = default_token_t>
  auto async_wait_lost(Token&& token = {}) {
    return boost::asio::async_initiate<Token, void(boost::system::error_code)>(
        [](auto handler, std::shared_ptr<detail::lease_core> core) {
          auto* diag = detail::diagnostic_slot(handler);
          start_wait_lost(std::move(core), diag, std::move(handler));
        },
        token, core_);
  }

  /// Stops renewal, then releases the lock on the server, conditional on owner and token:
  /// `void(error_code, release_outcome)`. Transport errors are retried (safe by protocol) up to the client's
  /// retry_policy.max_attempts. The outcome is what the server said: released, already_free (it had expired
  /// or was released before) or not_owner (another owner or token holds it). After it the lease is
  /// `released` (or stays `lost` if it was lost). Calls made while a release is in flight share its outcome;
  /// a call after it finished sends it again (a retry after an error; after a success the server answers
  /// already_free). An error means the server could not be reached within the retries (the lock is then
  /// freed by its TTL); error::empty_handle for an empty handle.
  ///
  /// Shielded from cancellation: the call itself starts the release (on the client's executor), whatever
  /// the token, and it runs to its end, bounded by the retry policy (max_attempts x (request_timeout +
  /// max_backoff)), whether or not the caller is cancelled or awaits it at all; a bound cancellation slot is
  /// ignored. In a coroutine that was already cancelled, `co_await l.async_release()` still releases, but
  /// the co_await itself throws operation_aborted (Asio refuses to await in a cancelled coroutine).
  template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(boost::system::error_code, release_outcome))
                Token = default_token_t>
  auto async_release(Token&& token = {}) {
    auto ticket = begin_release(core_);
    return boost::asio::async_initiate<Token, void(boost::system::error_code, release_outcome)>(
        [](auto handler, std::shared_ptr<detail::lease_core> core, detail::release_ticket ticket) {
          auto* diag = detail::diagnostic_slot(handler);
          start_release(std::move(core), std::move(ticket), diag, std::move(handler));
        },
        token, core_, std::move(ticket));
  }

  /// Replaces the lock's record of this lease's key with `value` (docs/protocol.md, "record"): a value the
  /// lock server keeps for the key beyond any lease (its release, its expiry, server restarts), which only
  /// the live holder of the key, with its current token, may replace. Any reader sees it through
  /// client::async_read_record. `void(error_code, std::uint64_t version)`: the record's version after this
  /// write (1 for the first; a retried write counts again). Durable on the server before it completes. The
  /// lease is not renewed and its value is unchanged.
  ///
  /// Errors: error::lease_lost when the server no longer holds the lease for this owner and token (a deposed
  /// holder's write is refused even before the next holder writes; nothing changed), and when the lease is
  /// no longer active here before a request is sent; error::stale_token when the record was written with a
  /// larger token; error::invalid_config when the lease was released, or the server does not keep records
  /// (feature `lock_record`) or the value is over its `record_max_bytes` (nothing sent then);
  /// error::empty_handle for an empty handle. Transport errors are retried (the write is idempotent) up to
  /// retry_policy.max_attempts, while the lease stays active. Cancellable (terminal, partial or total:
  /// operation_aborted); a request already sent may still take effect.
  template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(boost::system::error_code, std::uint64_t))
                Token = default_token_t>
  auto async_write_record(std::string value, Token&& token = {}) {
    return boost::asio::async_initiate<Token, void(boost::system::error_code, std::uint64_t)>(
        [](auto handler, std::shared_ptr<detail::lease_core> core, std::string v) {
          auto* diag = detail::diagnostic_slot(handler);
          start_write_record(std::move(core), std::move(v), diag, std::move(handler));
        },
        token, core_, std::move(value));
  }

  /// Stops renewing and lets go of the lease without releasing it: it stays held on the server until its
  /// TTL passes, for whoever knows its owner and token to renew or release (the CLI's `baton acquire` prints
  /// them for a script). The handle becomes empty; guarded work sees the lease released.
  void detach();

 private:
  friend class client;
  friend boost::asio::awaitable<void> detail::until_lost(const lease& l);
  friend boost::asio::awaitable<void> detail::until_inactive(const lease& l);
  friend class detail::guarded_work;
  friend lease detail::make_lease(std::shared_ptr<detail::lease_core> core);
  friend std::shared_ptr<detail::lease_core> detail::core_of(const lease& l);
  explicit lease(std::shared_ptr<detail::lease_core> core);
  const detail::lease_core& core() const;
  // Starts the release of `core` now (null: nothing to start); the ticket tells start_release which one.
  static detail::release_ticket begin_release(const std::shared_ptr<detail::lease_core>& core);
  static void start_release(
      std::shared_ptr<detail::lease_core> core, detail::release_ticket ticket, std::string* diag,
      boost::asio::any_completion_handler<void(boost::system::error_code, release_outcome)> h);
  static void start_wait_lost(std::shared_ptr<detail::lease_core> core, std::string* diag,
                              boost::asio::any_completion_handler<void(boost::system::error_code)> h);
  static void start_write_record(
      std::shared_ptr<detail::lease_core> core, std::string value, std::string* diag,
      boost::asio::any_completion_handler<void(boost::system::error_code, std::uint64_t)> h);
  std::shared_ptr<detail::lease_core> core_;
};

/// The outcome of an awaitable as a value: what it returned (`value`, absent for `void`), or what it threw
/// (`error`). Made by capture().
template <class T>
struct captured {
  std::optional<T> value;
  std::exception_ptr error;
};
template <>
struct captured<void> {
  std::exception_ptr error;
};

/// Runs `work` and returns its outcome as a value instead of throwing it, for races with Asio's
/// awaitable operators: `||` waits for the first branch to *succeed*, so a branch that throws would leave the
/// race waiting for the others. `co_await (capture(c.acquire(k, o)) || timer.async_wait(use_tuple))` ends
/// with the acquire's outcome, a failure included, or with the timer. Cancellation reaches `work` unchanged
/// (a cancelled branch's operation_aborted is captured like any other error). Adds no thread-safety or
/// executor requirement of its own.
template <class T>
boost::asio::awaitable<captured<T>> capture(boost::asio::awaitable<T> work) {
  captured<T> out;
  try {
    if constexpr (std::is_void_v<T>)
      co_await std::move(work);
    else
      out.value.emplace(co_await std::move(work));
  } catch (...) {
    out.error = std::current_exception();
  }
  co_return out;
}

/// Runs `work` while `l` is active. The moment the lease stops being active — lost, or released by anyone
/// (lease::async_release(), client::async_shutdown(), the handle's destruction) — `work` receives terminal
/// cancellation (the awaited operation inside it completes with operation_aborted), and with_lease waits for
/// it to finish. Then:
///  - the lease was lost, at any moment while `work` ran, even if `work` returned normally (it may have seen
///    `!l.active()` and returned before the loss was announced): throws baton::exception(error::lease_lost);
///  - the lease was released while `work` ran and `work` ended by the cancellation: throws
///    baton::exception(error::released); a `work` that returned or threw anything else is reported as it
///    ended, so `co_await l.async_release()` as `work`'s last step returns normally;
///  - otherwise returns what `work` returned, or rethrows what it threw.
/// client::async_shutdown() waits for guarded work to finish before it sends the release (up to its timeout);
/// lease::async_release() cancels the work at once but does not wait for it (it may be the work's own last
/// step). Throws error::released or error::lease_lost at once if `l` is not active when called, and
/// error::empty_handle for an empty handle. May run on any executor.
template <class T>
boost::asio::awaitable<T> with_lease(lease& l, boost::asio::awaitable<T> work) {
  using namespace boost::asio::experimental::awaitable_operators;
  if (!l) throw exception(error::empty_handle);
  if (!l.active()) {
    if (l.state() == lease_state::released) throw exception(error::released);
    throw exception(error::lease_lost, l.loss_reason());
  }
  detail::guarded_work guard(l);
  // The work's outcome is kept whichever branch ends the race: the watch's win cancels the work, and the race
  // waits for it to finish.
  captured<T> done;
  auto run = [](captured<T>& out, boost::asio::awaitable<T> w) -> boost::asio::awaitable<void> {
    out = co_await capture(std::move(w));
  };
  co_await (run(done, std::move(work)) || detail::until_inactive(l));
  const auto state = l.state();  // checked against the clock: a deadline that passed counts as lost
  if (state == lease_state::lost) throw exception(error::lease_lost, l.loss_reason());
  if (state == lease_state::released && done.error) {
    bool cancelled = false;
    try {
      std::rethrow_exception(done.error);
    } catch (const boost::system::system_error& e) {
      cancelled = e.code() == boost::asio::error::operation_aborted;
    } catch (...) {
    }
    if (cancelled)
      throw exception(error::released, "the lease was released while its work ran: the work was cancelled");
  }
  if (done.error) std::rethrow_exception(done.error);
  if constexpr (!std::is_void_v<T>) co_return std::move(*done.value);
}

}  // namespace baton
