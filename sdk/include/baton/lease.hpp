#pragma once
// A held lock: the lease handle, its automatic renewal, and running work under it.

#include "baton/backend.hpp"
#include "baton/detail/lease_fsm.hpp"
#include "baton/error.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>

#include <chrono>
#include <cstdint>
#include <exception>
#include <optional>
#include <memory>
#include <string>
#include <type_traits>

namespace baton {

namespace detail {
struct lease_core;
}

/// A lease on one lock, renewed automatically in the background until it is released or lost.
///
/// Move-only. The holder may act only while active(): `token()` is the fencing token to pass with every
/// write. The lease is lost when its local deadline — (time the last acquire/renew was *sent*) + ttl −
/// safety margin — passes without a confirmed renew, or when the server refuses a renew. Lost and released
/// are final: a lease never becomes active again; acquiring again gives a new lease with a new token.
///
/// Thread-safety: key(), owner(), token(), state(), active(), deadline() and loss_reason() may be called
/// from any thread. The coroutines (wait_lost, release) must run on the client's executor.
/// Destroying an active lease (from any thread) starts a best-effort release in the background.
class lease {
 public:
  lease(lease&&) noexcept;
  lease& operator=(lease&&) noexcept;
  lease(const lease&) = delete;
  lease& operator=(const lease&) = delete;
  ~lease();

  const std::string& key() const;
  /// The owner string of this acquisition: `<identity>#<random>`.
  const std::string& owner() const;
  /// The fencing token. Pass it with every write to the protected resource.
  std::uint64_t token() const;
  lease_state state() const;
  /// True while the lease is active and its local deadline has not passed. Checks the clock itself, so it
  /// is exact even if the renewal task has not run yet.
  bool active() const;
  /// The local deadline (steady clock). Moves forward with every confirmed renew.
  std::chrono::steady_clock::time_point deadline() const;
  /// Why the lease was lost (empty while active or after release).
  std::string loss_reason() const;

  /// Completes once the lease is no longer active (lost or released); at once if it already is not.
  /// Cancellation: completes with boost::asio::error::operation_aborted (thrown) if cancelled first.
  boost::asio::awaitable<void> wait_lost();

  /// Stops renewal, then releases the lock on the server, conditional on owner and token. Transport errors
  /// are retried (safe by protocol) up to the client's retry_policy.max_attempts. Returns what the server
  /// said: released, already_free (it had expired or was released before) or not_owner (another owner or
  /// token holds it). After release() the lease is `released` (or stays `lost` if it was lost).
  /// Throws baton::exception if the server could not be reached within the retries.
  boost::asio::awaitable<release_outcome> release();

 private:
  friend class client;
  explicit lease(std::shared_ptr<detail::lease_core> core);
  std::shared_ptr<detail::lease_core> core_;
};

namespace detail {

/// The outcome of an awaitable as a value: Asio's `||` waits for the first operation to *succeed*, so an
/// exception must not escape a branch, or the race would wait for the other branch instead.
template <class T>
struct captured {
  std::optional<T> value;
  std::exception_ptr error;
};
template <>
struct captured<void> {
  std::exception_ptr error;
};

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

}  // namespace detail

/// Runs `work` while `l` is active. The moment the lease is lost, `work` receives terminal cancellation
/// (the awaited operation inside it completes with operation_aborted), and once it has finished,
/// with_lease throws baton::exception(error::lease_lost). If the lease was released while `work` ran, it
/// throws baton::exception(error::released). Otherwise returns what `work` returned, or rethrows what it
/// threw. Must run on the client's executor.
template <class T>
boost::asio::awaitable<T> with_lease(lease& l, boost::asio::awaitable<T> work) {
  using namespace boost::asio::experimental::awaitable_operators;
  if (!l.active()) {
    if (l.state() == lease_state::released) throw exception(error::released, "the lease was released");
    throw exception(error::lease_lost, l.loss_reason());
  }
  auto result = co_await (detail::capture(std::move(work)) || l.wait_lost());
  if (result.index() == 1) {
    if (l.state() == lease_state::released) throw exception(error::released, "the lease was released");
    throw exception(error::lease_lost, l.loss_reason());
  }
  auto& done = std::get<0>(result);
  if (done.error) std::rethrow_exception(done.error);
  if constexpr (!std::is_void_v<T>) co_return std::move(*done.value);
}

}  // namespace baton
