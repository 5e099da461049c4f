// SPDX-License-Identifier: Apache-2.0
#pragma once
// Test support for code that uses Baton: an in-memory lock server with a clock the test moves by hand, and
// faults on demand, so a unit test needs no server and no sleeps.
//
//   boost::asio::io_context ioc;
//   auto server = std::make_shared<baton::testing::memory_backend>(ioc.get_executor());
//   baton::client c(ioc.get_executor(), {}, server);
//   ... co_await c.async_acquire("jobs/report", opts) ...
//   server->expire("jobs/report");      // as if the TTL had passed: the next renew is refused, the lease
//   lost server->pause(); ... server->resume();   // a server that stops answering, then catches up

#include "baton/backend.hpp"
#include "baton/lease_state.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/system/error_code.hpp>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace baton::detail {
class manual_clock;
}

namespace baton::testing {

/// A backend that is itself the lock server, following docs/protocol.md's rules: tokens strictly increase
/// across all keys, a same-owner acquire supersedes that owner's lease with a newer token (and its value:
/// holders are reported with the value their acquire published), renew, release and proclaim (a new value,
/// same token and expiry) are conditional on owner and token, a long-poll answers at a change of holder (and,
/// when it names a value, at a change of value). It keeps lock records (write_record, read_record) as
/// batond does: beyond any lease, replaced only by the live holder, never with a smaller token. It keeps
/// semaphores as batond does (docs/protocol.md, "Semaphores"; baton/semaphore.hpp): a key of N permits has
/// slots 0..N-1, a grant takes the lowest free one, the same owner again keeps its slot with a newer token,
/// a full key answers `held` with every holder, and an acquire with another count while any permit is held
/// is refused with error::permits_mismatch; lock-delay is per slot. A long-poll of a key of several permits
/// also answers at any change of its permits (a test double may wake a waiter early: it asks again).
///
/// Its clock is the test's: it starts at zero and moves only with advance(). Leases expire when it passes
/// their expiry. By default the clients' own clocks (local deadlines, renew periods, backoffs, request
/// timeouts) run on real time, so a test ends a lease with expire() or advance() and the lease learns it at
/// its next renew. With `drives_clients`, this clock is also the clock of every client made with this
/// backend (`baton::client(ex, config, server)`): only advance() moves their deadlines, renewals, backoffs
/// and request timeouts, and this server's own, so a test of a 15 s lease runs in milliseconds without a
/// sleep. Move it in steps no longer than the renew period and let the io_context run between them
/// (`server->advance(1s); ioc.poll();`), as real time would; one long step is a suspended host: the lease is
/// lost at its deadline before it could renew.
///
/// Not thread-safe: call it on the client's executor, or while that executor's io_context is not running.
class memory_backend final : public backend {
 public:
  struct options {
    /// The clients made with this backend run on its clock (see above).
    bool drives_clients = false;
  };
  explicit memory_backend(boost::asio::any_io_executor ex);
  memory_backend(boost::asio::any_io_executor ex, options o);
  ~memory_backend() override;

  // --- the clock ---
  /// Moves the server's clock forward: leases whose TTL passes expire, long-polls whose wait passes answer.
  /// The clock counts nanoseconds, so a test that moves it with real time (a steady_clock difference) grants
  /// a lease for exactly its TTL from the request; remaining TTLs are reported in whole milliseconds, rounded
  /// up.
  void advance(std::chrono::nanoseconds d);
  /// The server's time since it started, in whole milliseconds (rounded down).
  milliseconds now() const { return std::chrono::floor<milliseconds>(now_); }
  /// The time on the clients' clock: what their leases' deadline() is measured against (lease_clock::now()
  /// without `drives_clients`).
  lease_clock::time_point client_time() const;
  /// The clock of this backend's clients with `drives_clients` (the SDK's own use); null otherwise.
  const std::shared_ptr<detail::manual_clock>& clients_clock() const noexcept { return clients_clock_; }

  // --- what the server holds ---
  /// The holder of `key` (of a semaphore: its lowest held slot), or empty when it is free.
  std::optional<holder_info> holder(const std::string& key) const;
  /// Every live lease of `key` in slot order (one for a held lock, none when free).
  std::vector<holder_info> holders(const std::string& key) const;
  /// The last token granted (0 before the first grant).
  std::uint64_t last_token() const { return last_token_; }
  /// The lock record of `key`, or empty when it has none.
  std::optional<lock_record> record(const std::string& key) const;
  /// Ends the lease on `key` (every permit of a semaphore) now, as if its TTL had passed (its lock-delay,
  /// if any, begins now).
  void expire(const std::string& key);
  /// Ends the permit of `key` with `token` now, as if its TTL had passed; nothing when none has it.
  void expire(const std::string& key, std::uint64_t token);

  // --- faults ---
  /// From now on requests get no answer until resume(): each waits, up to its own timeout (then it fails
  /// with error::request_timeout, like a server that never answered).
  void pause();
  /// Answers the waiting requests, in arrival order.
  void resume();
  /// What a paused server does with a request whose client gave up (timed out or cancelled) before resume():
  /// `apply` it at resume() anyway — a server that had received it and was only slow, the default — or
  /// `drop` it (the request never arrived).
  enum class abandoned { apply, drop };
  void on_abandoned(abandoned a) { abandoned_ = a; }
  /// The next `n` requests fail with `ec` (e.g. error::connection_failed, error::storage_unavailable)
  /// without any effect.
  void fail_next(int n, boost::system::error_code ec);

  /// Requests received, by kind (failed and abandoned ones included).
  struct call_counts {
    int acquire = 0, renew = 0, release = 0, get = 0, proclaim = 0, write_record = 0, read_record = 0,
        list = 0, break_lease = 0;
  };
  const call_counts& calls() const { return calls_; }

  // --- backend ---
  boost::asio::awaitable<acquire_reply> acquire(std::string key, std::string owner, milliseconds ttl,
                                                std::string value, milliseconds timeout) override;
  /// Lock-delay as batond keeps it (docs/protocol.md, "Lock-delay"): a release frees the key at once, an
  /// expiry (advance() or expire()) keeps it from everyone for the delay. Without `wait` only: a queued
  /// acquire is refused as acquire_queued() is.
  boost::asio::awaitable<acquire_reply> acquire_with_delay(std::string key, std::string owner,
                                                           milliseconds ttl, std::string value,
                                                           milliseconds lock_delay,
                                                           std::optional<milliseconds> wait,
                                                           milliseconds timeout) override;
  /// Semaphores as batond keeps them (above); without `wait` only: a queued acquire is refused as
  /// acquire_queued() is.
  boost::asio::awaitable<acquire_reply> acquire_with(acquire_request request) override;
  boost::asio::awaitable<renew_reply> renew(std::string key, std::string owner, std::uint64_t token,
                                            milliseconds ttl, milliseconds timeout) override;
  boost::asio::awaitable<release_reply> release(std::string key, std::string owner, std::uint64_t token,
                                                milliseconds timeout) override;
  boost::asio::awaitable<proclaim_reply> proclaim(std::string key, std::string owner, std::uint64_t token,
                                                  std::string value, milliseconds timeout) override;
  boost::asio::awaitable<record_write_reply> write_record(std::string key, std::string owner,
                                                          std::uint64_t token, std::string value,
                                                          milliseconds timeout) override;
  boost::asio::awaitable<record_read_reply> read_record(std::string key, milliseconds timeout) override;
  /// Lists and breaks as batond does (docs/protocol.md, "list" and "break"); `waiters` is always 0.
  boost::asio::awaitable<list_reply> list(std::string prefix, std::string after, std::size_t limit,
                                          milliseconds timeout) override;
  boost::asio::awaitable<break_reply> break_lease(std::string key, std::optional<std::uint64_t> token,
                                                  milliseconds timeout) override;
  boost::asio::awaitable<get_reply> get(std::string key, std::optional<wait_for_change> wait,
                                        milliseconds timeout) override;
  void close() override {}

 private:
  struct lock {
    std::string owner;
    std::uint64_t token = 0;
    std::chrono::nanoseconds expiry{0};
    std::string value;
    milliseconds lock_delay{0};
  };
  /// A key: a lock is a key of 1 permit, its lease in slot 0.
  struct key_state {
    std::uint32_t permits = 1;
    std::map<std::uint32_t, lock> held;  // slot -> its lease
    // Slots in lock-delay (docs/protocol.md, "Lock-delay"): the token of the lease that ended, and the end.
    std::map<std::uint32_t, std::pair<std::uint64_t, std::chrono::nanoseconds>> delays;
    std::uint64_t changed_at = 0;  // changes_ at the last change of its leases: long-polls of semaphores
  };
  struct waiter;

  // Carries out one request: at once, or, while paused, at resume() (answered if its client still waits).
  template <class Reply>
  boost::asio::awaitable<Reply> serve(milliseconds timeout, std::function<Reply()> effect);
  bool injected_failure(boost::system::error_code& ec);
  void expire_due();
  void changed();

  /// The lease `owner` holds on `key` with `token`; null, with renew's refusal in `r` (its reasons, in its
  /// order; for a semaphore, docs/protocol.md, "Semaphores"), when it holds none.
  lock* held_by(renew_reply& r, const std::string& key, const std::string& owner, std::uint64_t token);
  acquire_reply do_acquire(const std::string& key, const std::string& owner, milliseconds ttl,
                           const std::string& value, milliseconds lock_delay = milliseconds{0},
                           std::uint32_t permits = 1);
  /// Removes a lease that ended by expiry at `ended`: its slot stays in lock-delay until ended + its delay.
  std::map<std::uint32_t, lock>::iterator erase_expired(key_state& k,
                                                        std::map<std::uint32_t, lock>::iterator it,
                                                        std::chrono::nanoseconds ended);
  /// Marks a change of `k`'s leases (for long-polls), and forgets `k` once nothing of it is left.
  void touched(std::map<std::string, key_state>::iterator k);
  holder_info info(const lock& l, std::uint32_t slot) const;
  renew_reply do_renew(const std::string& key, const std::string& owner, std::uint64_t token,
                       milliseconds ttl);
  proclaim_reply do_proclaim(const std::string& key, const std::string& owner, std::uint64_t token,
                             const std::string& value);
  record_write_reply do_write_record(const std::string& key, const std::string& owner, std::uint64_t token,
                                     const std::string& value);
  release_reply do_release(const std::string& key, const std::string& owner, std::uint64_t token);

  milliseconds remaining(std::chrono::nanoseconds expiry) const;

  boost::asio::any_io_executor ex_;
  std::shared_ptr<detail::manual_clock> clients_clock_;  // drives_clients: moved by advance() with now_
  std::chrono::nanoseconds now_{0};
  std::uint64_t last_token_ = 0;
  std::map<std::string, key_state> keys_;  // keys with a lease or a slot in lock-delay
  std::map<std::string, lock_record> records_;
  call_counts calls_;
  bool paused_ = false;
  abandoned abandoned_ = abandoned::apply;
  int failures_left_ = 0;
  boost::system::error_code failure_;
  std::uint64_t changes_ = 0;
  std::deque<std::shared_ptr<waiter>> paused_waiters_;  // in arrival order
  std::list<waiter*> change_waiters_;                   // long-polls
};

}  // namespace baton::testing
