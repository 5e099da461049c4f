// SPDX-License-Identifier: Apache-2.0
#pragma once
// A counting semaphore on one key: at most `permits` holders at once, each with a lease of its own (renewed,
// released and lost like a lock's) and a fencing token larger than every token granted before. A lock is a
// semaphore of 1 permit: locks and semaphores share the key space (docs/protocol.md, "Semaphores").
//
//   baton::semaphore workers(c, "pools/encoder", 3);           // at most 3 encoders at once
//   int n = co_await workers.async_with_permit({.ttl = 10s}, [&](baton::lease& l) -> awaitable<int> {
//     co_return co_await encode(l.fence());                    // token, slot and count, for the resource
//   });

#include "baton/client.hpp"
#include "baton/completion.hpp"
#include "baton/config.hpp"
#include "baton/lease.hpp"

#include <boost/asio/awaitable.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

namespace baton {

/// The permits of `key` on a client: a key and a permit count bound to the client's state (it keeps that
/// state alive, not the client object, so it may outlive a moved client). Copyable and cheap to copy.
///
/// Each permit is a lease (baton::lease): `token()` its fencing token, `slot()` its slot (0 to permits - 1,
/// the lowest free one when granted), `permits()` the count, `fence()` all three, to pass to the protected
/// resource, which fences per (key, slot) and refuses a slot past a newer holder's count (docs/fencing.md,
/// "Semaphores"). Renewal, loss, release,
/// with_lease, async_write_record and shutdown are a lock's. The same owner (lease_options::owner) acquiring
/// again while it holds a permit gets the same slot with a newer token.
///
/// The permit count is fixed while the key is in use: while any permit is held or any queued acquire waits,
/// an acquire with another count, a lock's (1) included, fails with error::permits_mismatch (the diagnostic
/// names the count in use) and changes nothing; once nothing holds or waits, the next grant sets it again.
///
/// Backends: batond with feature `semaphores` (docs/protocol.md; a count over its `permits_max` is
/// error::bad_request naming the bound; a server without the feature: error::invalid_config, nothing sent),
/// etcd (its own layout, docs/design.md, "Semaphores on etcd") and baton::testing::memory_backend. A backend
/// of your own refuses more than 1 permit with error::invalid_config unless it overrides
/// backend::acquire_with().
///
/// Every operation completes like the client's (completion.hpp): one function async_x(args..., token), errors
/// through the handler, a moved-from client's error::empty_handle and a bad count (not 1 to 65535:
/// error::invalid_config) included. Threads and cancellation as the client's: any thread, completes on the
/// caller's executor; a cancelled acquire leaves no permit behind. No argument of a class type has a default
/// (GCC 12, docs/design.md): each shorter form is an overload.
class semaphore {
 public:
  /// Binds `key` and `permits` to `c`'s state. Checks nothing: a bad count fails each operation.
  semaphore(client& c, std::string key, std::uint32_t permits)
      : shared_(c.shared_), key_(std::move(key)), permits_(permits) {}

  const std::string& key() const noexcept { return key_; }
  std::uint32_t permits() const noexcept { return permits_; }

  /// One try: a permit, or, when every slot is held, who holds them: `void(error_code, acquire_result)`,
  /// `acquired` engaged on a grant; otherwise `holder` is the permit that expires first, `holders` every
  /// live permit in slot order and `permits` the key's count. Retries transient errors like
  /// client::async_try_acquire. error::permits_mismatch when the key is in use with another count.
  template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(boost::system::error_code, acquire_result))
                Token = default_token_t>
  auto async_try_acquire(lease_options options, Token&& token = {}) {
    return client::initiate_try_acquire(shared_, key_, options, permits_, std::forward<Token>(token));
  }
  template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(boost::system::error_code, acquire_result)) Token>
  auto async_try_acquire(Token&& token) {
    return async_try_acquire(lease_options{}, std::forward<Token>(token));
  }
  boost::asio::awaitable<acquire_result> async_try_acquire() {
    return async_try_acquire(lease_options{}, default_token);
  }

  /// Acquires a permit, waiting as long as it takes (or up to `wait_timeout`: then error::wait_timeout):
  /// `void(error_code, lease)`, the lease empty on error. Waits as client::async_acquire does: in the key's
  /// queue at a server that queues (batond, etcd), granted the moment a slot frees, first come first served;
  /// otherwise long-polling. error::permits_mismatch (not waited on) when the key is in use with another
  /// count. Cancellable: a cancelled acquire leaves no permit behind.
  template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(boost::system::error_code, lease)) Token = default_token_t>
  auto async_acquire(lease_options options, milliseconds wait_timeout, Token&& token = {}) {
    return client::initiate_acquire(shared_, key_, options, permits_, wait_timeout,
                                    std::forward<Token>(token));
  }
  template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(boost::system::error_code, lease)) Token = default_token_t>
  auto async_acquire(lease_options options, Token&& token = {}) {
    return client::initiate_acquire(shared_, key_, options, permits_, std::nullopt,
                                    std::forward<Token>(token));
  }
  template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(boost::system::error_code, lease)) Token>
  auto async_acquire(Token&& token) {
    return async_acquire(lease_options{}, std::forward<Token>(token));
  }
  boost::asio::awaitable<lease> async_acquire() { return async_acquire(lease_options{}, default_token); }

  /// Runs `fn(lease&)` under a permit: acquires (waiting, like async_acquire; with `wait_timeout` at most
  /// that long, then error::wait_timeout and `fn` never runs), runs the awaitable `fn` returns under
  /// with_lease — only while the permit's lease is held: the moment it is lost the work receives terminal
  /// cancellation and the call fails with error::lease_lost — and releases the permit on every path
  /// (success, exception, loss, cancellation). Completes as client::async_with_lock does, with
  /// `void(std::exception_ptr, T)` (`void(std::exception_ptr)` for work returning void); with the default
  /// token, `co_await` returns T or throws. On GCC before 14 a lambda written in place must capture by
  /// reference, as for async_with_lock.
  template <class F, BOOST_ASIO_COMPLETION_TOKEN_FOR(detail::lock_signature<F>) Token = default_token_t>
  auto async_with_permit(lease_options options, F&& fn, Token&& token = {}) {
    client::check_lock_function<F>();
    return client::initiate_with_lock(shared_, key_, options, permits_, std::nullopt,
                                      std::decay_t<F>(std::forward<F>(fn)), std::forward<Token>(token));
  }
  template <class F, BOOST_ASIO_COMPLETION_TOKEN_FOR(detail::lock_signature<F>) Token = default_token_t>
  auto async_with_permit(lease_options options, milliseconds wait_timeout, F&& fn, Token&& token = {}) {
    client::check_lock_function<F>();
    return client::initiate_with_lock(shared_, key_, options, permits_, wait_timeout,
                                      std::decay_t<F>(std::forward<F>(fn)), std::forward<Token>(token));
  }

 private:
  std::shared_ptr<detail::client_shared> shared_;
  std::string key_;
  std::uint32_t permits_;
};

}  // namespace baton
