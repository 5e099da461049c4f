// SPDX-License-Identifier: Apache-2.0
#pragma once
// The lock service: the lock table made durable and shared between threads.
//
// One mutex serialises every table operation together with the append of its log record, so the log's
// order is the order of effects (per-key linearizability). No answer, success or refusal, reports a state
// that a crash could roll back: each waits until the log is durable up to the last record that state rests
// on. For most answers that is simply the last record appended; a successful renew needs only its own
// lease's records (its acquire, and the extend of any renew that raised its TTL), so a renew is answered
// from memory when nothing about the lease is pending.
//
// Long-poll waiters park on a timer of their own executor; a change to their key cancels the timer.
// The timer is batond's steady_timer unless the service is given other timers (the simulation's run on its
// virtual clock: tests/sim).

#include "journal.hpp"
#include "lock_table.hpp"
#include "metrics.hpp"
#include "planted_defects.hpp"
#include "protocol.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace baton::server {

/// A queued acquire's answer: the grant (or, once its wait passed, the refusal naming the holder), and how
/// long the request waited at the server before the grant (0 when granted at once): the holder's TTL runs
/// from the grant, so a client may count it from its send time plus `queued` (docs/protocol.md).
struct queued_answer {
  acquire_result result;
  milliseconds queued{0};
};

/// Thrown when the journal cannot store a change; the request is answered 503.
struct storage_unavailable : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Thrown by wait() when the key, or the server, has as many long-poll waiters as allowed; the request is
/// answered 503 `too_many_waiters` with Retry-After.
struct waiters_exhausted : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Thrown by acquire() when a grant would add a lock past the server's limit (`server_wide`: 503
/// `too_many_locks`) or past the client's quota (429 `lock_quota_exceeded`). Checked before anything
/// changes: no token is taken and nothing is logged.
struct locks_exhausted : std::runtime_error {
  locks_exhausted(bool whole_server, const std::string& what)
      : std::runtime_error(what), server_wide(whole_server) {}
  bool server_wide;
};

class lock_service {
 public:
  /// The clock expiry is decided on (docs/design.md, "Time").
  using clock_function = time_point (*)();

  /// What a long-poll waiter sleeps on, on its own executor: wait() completes once the clock reaches the
  /// expiry, after cancel(), or when the awaiting coroutine is cancelled (terminal).
  class wait_timer {
   public:
    virtual ~wait_timer() = default;
    virtual boost::asio::any_io_executor get_executor() = 0;
    virtual void expires_at(time_point at) = 0;
    virtual boost::asio::awaitable<void> wait() = 0;
    virtual void cancel() = 0;
  };
  using wait_timer_factory = std::function<std::unique_ptr<wait_timer>(const boost::asio::any_io_executor&)>;

  /// `now` is steady_clock in batond; a test may pass a clock it advances by hand. wait()'s timers run on
  /// steady_clock whatever `now` is, so long-polls need the real clock, unless `timers` makes them on the
  /// same clock as `now` (empty: steady_timer).
  lock_service(journal& j, server_metrics& metrics, clock_function now = &clock::now,
               wait_timer_factory timers = {});

  /// The table, for recovery before the service starts serving.
  lock_table& table() { return table_; }

  /// False once the journal has failed: nothing can be acknowledged any more (batond then exits).
  bool storage_healthy() const { return !journal_.failed(); }
  std::string storage_failure() const { return journal_.failure_message(); }

  // `client` is the authenticated name of the caller (empty without authentication); see lock_table.
  // `client_quota` caps the locks `client` may hold (none: no cap); see locks_exhausted. `value` is published
  // with a granted lease and logged with it (docs/protocol.md).
  // `lock_delay` (0: none) keeps the key unavailable that long after the lease ends by expiry or a break
  // (lock_table::acquire); it is logged with the grant, and the answer waits for it.
  // `permits` > 1 asks for one of that many permits of the key (lock_table::acquire_permit; docs/protocol.md,
  // "semaphores"): each permit is a lock for the limits, and while queued acquires of another count wait
  // for the key, the answer is acquire_mismatch.
  boost::asio::awaitable<acquire_result> acquire(std::string_view key, std::string_view owner,
                                                 milliseconds ttl, std::string_view client = {},
                                                 std::optional<std::size_t> client_quota = std::nullopt,
                                                 std::string_view value = {},
                                                 milliseconds lock_delay = milliseconds{0},
                                                 std::uint32_t permits = 1);
  boost::asio::awaitable<renew_result> renew(std::string_view key, std::string_view owner,
                                             std::uint64_t token, milliseconds ttl,
                                             std::string_view client = {});
  /// Renews every entry of a batch (`POST /v1/renew`) as renew() would, in order, under one acquisition of
  /// the mutex, and answers them all after ONE wait: for the highest log position any answer rests on (a
  /// success's lease records, a refusal's last appended record). The answers are renew()'s, in the entries'
  /// order; a storage failure (storage_unavailable) leaves every entry's outcome unknown, as for one renew.
  /// `entries` must outlive the operation (as the string_views of the other calls must).
  boost::asio::awaitable<std::vector<renew_result>> renew_batch(const std::vector<renew_batch_entry>& entries,
                                                                std::string_view client = {});
  /// Replaces the value of the lease `owner` holds with `token` (lock_table::proclaim). The new value is
  /// logged and durable before the answer, and wakes the key's long-poll waiters; a refusal waits, as a
  /// renew's does, for every record it could reflect.
  boost::asio::awaitable<proclaim_result> proclaim(std::string_view key, std::string_view owner,
                                                   std::uint64_t token, std::string_view value,
                                                   std::string_view client = {});
  /// Replaces the lock's record of `key` (lock_table::write_record): logged and durable before the answer,
  /// like a grant; a refusal waits, as a renew's does, for every record it could reflect. The lease is
  /// untouched and no waiter is woken (a long-poll watches the holder, not the record).
  boost::asio::awaitable<record_write_result> write_record(std::string_view key, std::string_view owner,
                                                           std::uint64_t token, std::string_view value,
                                                           std::string_view client = {});
  /// The lock's record of `key`, once every write it could reflect is durable.
  boost::asio::awaitable<std::optional<lock_record>> read_record(std::string_view key);
  boost::asio::awaitable<release_result> release(std::string_view key, std::string_view owner,
                                                 std::uint64_t token, std::string_view client = {});
  boost::asio::awaitable<std::optional<lease_view>> get(std::string_view key);

  /// A page of the held locks under `prefix` after `after` (lock_table::list), each with the number of
  /// queued acquires waiting for it; answered once every record the page could reflect is durable, as get().
  boost::asio::awaitable<list_page> list(std::string_view prefix, std::string_view after, std::size_t limit);

  /// An operator's break of `key` (lock_table::break_lease; `token`, if given, must be the holder's). A
  /// broken lease is logged as a release and durable before the answer, wakes the key's long-polls and hands
  /// the key to its queue, as a release does; the next grant takes a larger token, as always. `by` is the
  /// authenticated name of the operator (empty without authentication), written in the audit line
  /// (`event=lease_broken`) once the break is durable. An expired lease is logged as expired first, and the
  /// break then finds the key not held.
  boost::asio::awaitable<break_result> break_lease(std::string_view key, std::optional<std::uint64_t> token,
                                                   std::string_view by = {});

  /// A queued acquire (feature acquire_queue): granted at once when the key is free, out of lock-delay, and
  /// nobody waits for it, or when the caller holds it; otherwise the request joins the key's queue and is
  /// granted, first come first served, the moment the key is released, or expires (or is broken) and its
  /// lock-delay, if any, is over, its TTL counted from then. When `wait` passes first it is answered as
  /// acquire() refuses, with the holder. A retry by an owner already in the queue takes the older request's
  /// place (which is then refused). Cancellation (terminal, through the awaiting coroutine's cancellation
  /// slot: batond's client closed its connection) gives the place up, and releases a grant made for the
  /// request but not yet answered; the answer is then nullopt, which is no answer. Waiting requests count
  /// against the waiter limits (waiters_exhausted), and limits on locks are checked at the grant
  /// (locks_exhausted, thrown to that request only). Every answer waits, as acquire()'s, for the records it
  /// rests on. Must run on a single-threaded executor, as wait().
  boost::asio::awaitable<std::optional<queued_answer>> acquire_queued(
      std::string_view key, std::string_view owner, milliseconds ttl, milliseconds wait,
      std::string_view client = {}, std::optional<std::size_t> client_quota = std::nullopt,
      std::string_view value = {}, milliseconds lock_delay = milliseconds{0}, std::uint32_t permits = 1);

  /// Caps the locks in the table (call before serving; default: unlimited).
  void set_lock_limit(std::size_t max_locks);

  /// Caps the lock records kept (call before serving; default: unlimited). Records restored at start-up
  /// count, but are never refused: past the cap, only new keys' first writes are.
  void set_record_limit(std::size_t max_records);

  /// Caps long-poll waiters per key and in total (call before serving; defaults: unlimited).
  void set_waiter_limits(std::size_t per_key, std::size_t total);

  /// Switches known defects back on (the simulation only; call before serving).
  void plant(planted_defects d) {
    defects_ = d;
    table_.plant_shorten_lease(d.shorten_lease);
    table_.plant_permit_past_count(d.permit_past_count);
  }

  /// Long-poll: answers as soon as the holder's token differs from `token` (0 = free), or, when `value` is
  /// given, its value differs from `value` ("" when free), or after `wait`. On a key of more than one
  /// permit: as soon as no live permit has `token` (0: as soon as one is held).
  /// Must run on a single-threaded executor (each batond worker thread has its own io_context). Throws
  /// waiters_exhausted, before waiting, when a waiter limit is reached. Cancellation (terminal, through the
  /// awaiting coroutine's cancellation slot) ends the wait at once with nullopt, which is then no answer.
  boost::asio::awaitable<std::optional<lease_view>> wait(std::string_view key, std::uint64_t token,
                                                         milliseconds wait,
                                                         std::optional<std::string> value = std::nullopt);

  /// One step of the expiry sweep: removes up to sweep_step_leases leases whose expiry second has passed
  /// (lock_table::expire_some), logs their expiry and wakes their waiters; then as many keys whose
  /// lock-delay is over (lock_table::end_delays), logging that and handing them to their queues. It visits
  /// only those leases, so a table of a million that are merely held costs nothing; a million falling due at
  /// once are a series of short steps (well under a millisecond each), and a caller that yields its thread
  /// between them (http_server's sweep loop) never holds the mutex, or that thread's requests, for long.
  static constexpr std::size_t sweep_step_leases = 256;
  struct sweep_result {
    std::size_t expired = 0;
    bool pass_done = false;      // no lease whose expiry second has passed is left
    std::uint64_t last_lsn = 0;  // the log position of the step's last expire record (0: none)
  };
  sweep_result sweep_step();
  /// Completes once the log is durable up to `lsn` (a sweep step's last_lsn), or has failed. The sweep
  /// waits for it between steps: a million leases expiring at once would otherwise queue 40 MB of expire
  /// records ahead of every durable request's own record; paced, at most one step's records (256) share
  /// a request's batch.
  boost::asio::awaitable<void> wait_logged(std::uint64_t lsn);

  /// Wakes every long-poll waiter and makes new ones answer at once (shutdown).
  void wake_all();

 private:
  struct waiter {
    std::unique_ptr<wait_timer> timer;
  };
  // A waiting request (a long-poll, a queued acquire) counted against the waiter limits from its admission
  // (waiting_ and waiting_per_key_ raised under mu_) until this goes.
  struct waiter_admission {
    lock_service& self;
    std::string key;
    ~waiter_admission();
  };
  // One request in a key's queue. Its fields are read and written under mu_, except timer, which only its
  // own thread uses (others post a cancel to it).
  struct queued_acquire {
    std::string key, owner, client, value;
    milliseconds ttl{0};
    milliseconds lock_delay{0};
    std::uint32_t permits = 1;
    std::optional<std::size_t> quota;
    time_point deadline{};
    std::unique_ptr<wait_timer> timer;
    bool queued = false;         // in queues_[key]; false once granted, refused, replaced or gone
    bool granted = false;        // the key was handed to this request
    acquire_result result;       // the grant, once made
    std::exception_ptr refusal;  // a limit that refused the grant
    std::uint64_t lsn = 0;       // the grant's record
    time_point granted_at{};
  };
  /// acquire()'s decision with mu_ held (limits, table, log); returns the log position its answer rests on.
  std::uint64_t acquire_locked(std::string_view key, std::string_view owner, milliseconds ttl,
                               std::string_view client, std::optional<std::size_t> client_quota,
                               std::string_view value, milliseconds lock_delay, std::uint32_t permits,
                               time_point now, acquire_result& result);
  /// acquire_mismatch when queued acquires of another count than `permits` wait for `key`.
  std::optional<acquire_mismatch> queue_mismatch(std::string_view key, std::uint32_t permits) const;
  /// Logs a lease that release() `r` removed from the table (as released, or as expired), wakes the key's
  /// long-polls and hands the key to its queue; returns the record's log position.
  std::uint64_t removed_locked(std::string_view key, const release_result& r, time_point now);
  /// The same for a lease `token` that ended otherwise (a break), logged as `logged_as` (release or expire).
  std::uint64_t removed_locked(std::string_view key, record_type logged_as, std::uint64_t token,
                               time_point now);
  /// Grants a free `key` (not held, not in lock-delay) to the first request of its queue that may take it,
  /// and wakes that request.
  void hand_off_locked(std::string_view key, time_point now);
  void leave_queue_locked(const std::shared_ptr<queued_acquire>& q);
  void count_acquire(const acquire_result& r);

  // The wait for record `lsn` to be durable, co_awaited in the request's own coroutine as
  //   if (must_wait(lsn)) check_durable(co_await wait_durable(lsn));
  // rather than in a coroutine of its own, whose frame cost a heap allocation per request.
  bool must_wait(std::uint64_t lsn) const { return journal_.durable() < lsn; }
  boost::asio::awaitable<std::tuple<boost::system::error_code>> wait_durable(std::uint64_t lsn);
  /// Throws storage_unavailable when the wait failed (the log can no longer make the record durable).
  void check_durable(std::tuple<boost::system::error_code> waited) const;
  /// Throws storage_unavailable once the log has failed: nothing more may be decided, let alone answered.
  void refuse_if_failed() const;
  /// renew()'s decision for one lease, with mu_ held; returns the log position its answer rests on.
  std::uint64_t renew_locked(std::string_view key, std::string_view owner, std::uint64_t token,
                             milliseconds ttl, std::string_view client, time_point now, renew_result& result);
  void notify_locked(std::string_view key);
  void expire_due_locked(std::string_view key, time_point now);
  static void wake(const std::shared_ptr<waiter>& w);

  journal& journal_;
  server_metrics& metrics_;
  clock_function now_;
  wait_timer_factory timers_;
  std::mutex mu_;
  lock_table table_;
  bool stopping_ = false;
  std::unordered_map<std::string, std::vector<std::shared_ptr<waiter>>> waiters_;
  std::unordered_map<std::string, std::deque<std::shared_ptr<queued_acquire>>> queues_;
  // Admitted long-polls, counted from admission to answer (a woken waiter briefly leaves waiters_).
  std::size_t max_locks_ = SIZE_MAX;
  std::size_t max_waiters_per_key_ = SIZE_MAX;
  std::size_t max_waiters_ = SIZE_MAX;
  std::size_t waiting_ = 0;
  planted_defects defects_;
  std::unordered_map<std::string, std::size_t> waiting_per_key_;
};

}  // namespace baton::server
