// SPDX-License-Identifier: Apache-2.0
#include "lock_service.hpp"
#include "planted_defects.hpp"

#include "baton/common/log.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>

namespace baton::server {
namespace asio = boost::asio;

namespace {

class steady_wait_timer final : public lock_service::wait_timer {
 public:
  explicit steady_wait_timer(const asio::any_io_executor& ex) : timer_(ex) {}
  asio::any_io_executor get_executor() override { return timer_.get_executor(); }
  void expires_at(time_point at) override { timer_.expires_at(at); }
  asio::awaitable<void> wait() override { co_await timer_.async_wait(asio::as_tuple(asio::use_awaitable)); }
  void cancel() override { timer_.cancel(); }

 private:
  asio::steady_timer timer_;
};

}  // namespace

lock_service::lock_service(journal& j, server_metrics& metrics, clock_function now, wait_timer_factory timers)
    : journal_(j), metrics_(metrics), now_(now), timers_(std::move(timers)) {
  if (!timers_)
    timers_ = [](const asio::any_io_executor& ex) -> std::unique_ptr<wait_timer> {
      return std::make_unique<steady_wait_timer>(ex);
    };
}

asio::awaitable<std::tuple<boost::system::error_code>> lock_service::wait_durable(std::uint64_t lsn) {
  return journal_.async_wait_durable(lsn, asio::as_tuple(asio::use_awaitable));
}

void lock_service::check_durable(std::tuple<boost::system::error_code> waited) const {
  if (std::get<0>(waited))
    throw storage_unavailable("write-ahead log unavailable: " + journal_.failure_message());
}

void lock_service::refuse_if_failed() const {
  if (journal_.failed())
    throw storage_unavailable("write-ahead log unavailable: " + journal_.failure_message());
}

void lock_service::wake(const std::shared_ptr<waiter>& w) {
  // The timer belongs to the waiter's own thread; cancel it there.
  asio::post(w->timer->get_executor(), [w] { w->timer->cancel(); });
}

void lock_service::notify_locked(std::string_view key) {
  if (waiters_.empty()) return;
  auto it = waiters_.find(std::string(key));
  if (it == waiters_.end()) return;
  for (auto& w : it->second)
    wake(w);
  waiters_.erase(it);
}

// An answer that shows a lease has expired (a 404, a long-poll woken by the expiry, a renew refused
// not_held) must not be rolled back by a crash: restored, the lease would be held again by an owner that
// was told it had lost it, after others were told the key was free. So the expiry is logged first, as the
// sweep logs it, and the answer then waits for that record like any other it rests on.
void lock_service::expire_due_locked(std::string_view key, time_point now) {
  auto e = table_.expire_key(key, now);
  auto permits = table_.expire_permits(key, now);  // a key of more than one permit: each slot
  if (!e && permits.empty()) return;
  refuse_if_failed();
  if (e) permits.push_back(std::move(*e));
  for (const auto& p : permits)
    journal_.append(record_type::expire, p.token, 0, p.key);
  metrics_.expired.fetch_add(permits.size(), std::memory_order_relaxed);
  metrics_.locks_held.fetch_sub(static_cast<std::int64_t>(permits.size()), std::memory_order_relaxed);
  count_delays_locked();
  notify_locked(key);
  hand_off_locked(key, now);
}

std::optional<acquire_mismatch> lock_service::queue_mismatch(std::string_view key,
                                                             std::uint32_t permits) const {
  if (queues_.empty()) return std::nullopt;
  auto it = queues_.find(std::string(key));
  if (it == queues_.end() || it->second.empty() || it->second.front()->permits == permits)
    return std::nullopt;
  return acquire_mismatch{it->second.front()->permits};
}

std::uint64_t lock_service::acquire_locked(std::string_view key, std::string_view owner, milliseconds ttl,
                                           std::string_view client, std::optional<std::size_t> client_quota,
                                           std::string_view value, milliseconds lock_delay,
                                           std::uint32_t permits, time_point now, acquire_result& result) {
  if (auto m = queue_mismatch(key, permits)) {
    result = *m;
    return journal_.last_appended();
  }
  // A key in lock-delay (a slot of one, for a key of permits, when no other slot is free) is refused (409)
  // whatever the limits say, as a held key is. The refusal reports that the lease before ended: when the
  // sweep has not logged its expiry yet, it is logged first, so that no crash can restore that lease as
  // held after others were told it had ended. (hand_off_locked() calls this only when the key has room, so
  // the expiry's own hand-off never runs inside it.)
  std::optional<acquire_result> refused;
  if (permits > 1) refused = table_.refusal(key, permits, now);
  const bool in_delay = permits <= 1
                            ? table_.delayed(key, now).has_value()
                            : refused && std::holds_alternative<acquire_refused>(*refused) &&
                                  std::get<acquire_refused>(*refused).lock_delay_remaining.count() > 0;
  if (in_delay) expire_due_locked(key, now);
  // Only a grant of a free key (a free slot of a key of permits) adds a lock; a held key is refused (409) or
  // re-granted to its holder. Keys in lock-delay count against the server's limit: each is kept in memory as
  // a held key is.
  const bool adds =
      permits <= 1 ? !in_delay && !table_.get(key, now) : !refused && !table_.holds(key, owner, client, now);
  if (adds) {
    if (table_.size() + table_.delay_count() >= max_locks_ && (permits > 1 || !table_.contains(key))) {
      metrics_.acquire_too_many_locks.fetch_add(1, std::memory_order_relaxed);
      throw locks_exhausted(true, "the server holds " + std::to_string(table_.size()) + " locks and " +
                                      std::to_string(table_.delay_count()) +
                                      " keys in lock-delay, its limit");
    }
    if (client_quota && table_.size_of(client) >= *client_quota) {
      metrics_.acquire_over_quota.fetch_add(1, std::memory_order_relaxed);
      throw locks_exhausted(false, "client \"" + std::string(client) + "\" holds " +
                                       std::to_string(table_.size_of(client)) + " locks, its quota");
    }
  }
  result = table_.acquire_permit(permits, key, owner, ttl, now, client, value, lock_delay);
  auto* g = std::get_if<acquire_granted>(&result);
  // A grant over a lease that expired with a lock-delay whose end has passed ends that delay too.
  count_delays_locked();
  if (!g) return journal_.last_appended();
  // The leases of the key's former count, expired, are logged as such before the grant of a new count: a
  // restart then never finds two counts for one key (docs/design.md, "Semaphores").
  for (const auto& e : g->retired)
    journal_.append(record_type::expire, e.token, 0, e.key);
  // So are the ends of the former count's lock-delays (as sweep_step logs them), after the expiries that
  // would begin them again: a replay must not find a delay of the old count beside the new count's leases.
  for (const auto& d : g->ended_delays)
    journal_.append(record_type::lock_delay, d.token, 0, d.key);
  metrics_.expired.fetch_add(g->retired.size(), std::memory_order_relaxed);
  metrics_.locks_held.fetch_sub(static_cast<std::int64_t>(g->retired.size()), std::memory_order_relaxed);
  // A permit is logged as an ordinary lease of its table key (permit_index.hpp).
  const std::string slot_key = g->permits > 1 ? permit_key(key, g->permits, g->slot) : std::string();
  const std::string_view table_key = g->permits > 1 ? std::string_view(slot_key) : key;
  const journal::entry grant{record_type::acquire,
                             g->token,
                             static_cast<std::uint64_t>(g->restore_ttl.count()),
                             table_key,
                             owner,
                             client,
                             value};
  // The lease's lock-delay is a promise to the next holder: durable before the grant is answered, and in
  // the grant's batch, so that no crash keeps the grant (a re-acquire's new token) without its delay.
  const auto lsn =
      g->lock_delay > milliseconds{0}
          ? journal_.append_together(grant, {record_type::lock_delay, g->token,
                                             static_cast<std::uint64_t>(g->lock_delay.count()), table_key})
          : journal_.append(grant.type, grant.token, grant.ttl_ms, table_key, owner, client, value);
  table_.mark_logged(table_key, g->token, lsn);
  metrics_.last_token.store(g->token, std::memory_order_relaxed);
  if (g->replaced_token == 0) metrics_.locks_held.fetch_add(1, std::memory_order_relaxed);
  notify_locked(key);
  return lsn;
}

asio::awaitable<acquire_result> lock_service::acquire(std::string_view key, std::string_view owner,
                                                      milliseconds ttl, std::string_view client,
                                                      std::optional<std::size_t> client_quota,
                                                      std::string_view value, milliseconds lock_delay,
                                                      std::uint32_t permits) {
  acquire_result result;
  std::uint64_t lsn;
  {
    std::lock_guard lk(mu_);
    refuse_if_failed();
    const auto now = now_();
    // With a queue on the key, a holder past its TTL is expired first, and a lock-delay that is over is
    // ended, either of which grants the key to the queue's head: an acquire that does not wait never takes
    // a key that queued acquires wait for.
    if (queues_.contains(std::string(key))) {
      expire_due_locked(key, now);
      hand_off_locked(key, now);
    }
    lsn = acquire_locked(key, owner, ttl, client, client_quota, value, lock_delay, permits, now, result);
  }
  if (must_wait(lsn)) check_durable(co_await wait_durable(lsn));
  count_acquire(result);
  co_return result;
}

std::uint64_t lock_service::renew_locked(std::string_view key, std::string_view owner, std::uint64_t token,
                                         milliseconds ttl, std::string_view client, time_point now,
                                         renew_result& result) {
  expire_due_locked(key, now);
  result = table_.renew(key, owner, token, ttl, now, client);
  if (auto* ok = std::get_if<renew_ok>(&result)) {
    // Success rests on the lease's own records: a same-TTL retry of a renew whose extend is still in
    // flight must wait for it too, or a crash could restore the lease with the shorter TTL.
    std::uint64_t lsn = ok->log_seq;
    if (ok->restore_ttl_grew) {
      const auto table_key = permit_key(key, ok->permits, ok->slot);
      lsn = journal_.append(record_type::extend, token, static_cast<std::uint64_t>(ttl.count()), table_key);
      table_.mark_logged(table_key, token, lsn);
    }
    return BATON_PLANTED(renew_before_durable) ? 0 : lsn;
  }
  // A refusal reports the key free or held by another, which may rest on any record still pending.
  return journal_.last_appended();
}

asio::awaitable<renew_result> lock_service::renew(std::string_view key, std::string_view owner,
                                                  std::uint64_t token, milliseconds ttl,
                                                  std::string_view client) {
  renew_result result;
  std::uint64_t lsn = 0;
  {
    std::lock_guard lk(mu_);
    refuse_if_failed();
    lsn = renew_locked(key, owner, token, ttl, client, now_(), result);
  }
  if (must_wait(lsn)) check_durable(co_await wait_durable(lsn));
  if (std::holds_alternative<renew_ok>(result))
    metrics_.renew_ok.fetch_add(1, std::memory_order_relaxed);
  else
    metrics_.renew_lost.fetch_add(1, std::memory_order_relaxed);
  co_return result;
}

// One wait for the whole batch (docs/design.md, "Batch renewal"): every answer rests on a position no
// higher than the largest, so waiting for that one holds back no answer a crash could roll back. The cost
// is that a fresh lease's pending grant delays its neighbours' answers by one fsync at most.
asio::awaitable<std::vector<renew_result>> lock_service::renew_batch(
    const std::vector<renew_batch_entry>& entries, std::string_view client) {
  std::vector<renew_result> results(entries.size());
  std::uint64_t lsn = 0;
  {
    std::lock_guard lk(mu_);
    refuse_if_failed();
    // One reading of the clock for the batch: the entries are decided at one instant, as if they had
    // arrived together (a renew's expiry is counted from when the server received it; they were).
    const auto now = now_();
    for (std::size_t i = 0; i < entries.size(); ++i) {
      const auto& e = entries[i];
      lsn = std::max(lsn, renew_locked(e.key, e.owner, e.token, e.ttl, client, now, results[i]));
    }
  }
  if (must_wait(lsn)) check_durable(co_await wait_durable(lsn));
  std::uint64_t ok = 0;
  for (const auto& r : results)
    ok += std::holds_alternative<renew_ok>(r) ? 1 : 0;
  metrics_.renew_ok.fetch_add(ok, std::memory_order_relaxed);
  metrics_.renew_lost.fetch_add(results.size() - ok, std::memory_order_relaxed);
  metrics_.renew_batches.fetch_add(1, std::memory_order_relaxed);
  co_return results;
}

// The record of a proclaim is an acquire record with the lease's own token (wal_record.hpp): replayed, it
// restores the lease with the new value exactly as a grant would, on this server and on any older one that
// reads values.
asio::awaitable<proclaim_result> lock_service::proclaim(std::string_view key, std::string_view owner,
                                                        std::uint64_t token, std::string_view value,
                                                        std::string_view client) {
  proclaim_result result;
  std::uint64_t lsn;
  {
    std::lock_guard lk(mu_);
    refuse_if_failed();
    const auto now = now_();
    expire_due_locked(key, now);
    result = table_.proclaim(key, owner, token, value, now, client);
    if (auto* ok = std::get_if<proclaim_ok>(&result)) {
      const auto table_key = permit_key(key, ok->permits, ok->slot);
      lsn = journal_.append(record_type::acquire, token, static_cast<std::uint64_t>(ok->restore_ttl.count()),
                            table_key, owner, client, value);
      table_.mark_logged(table_key, token, lsn);
      notify_locked(key);
    } else {
      lsn = journal_.last_appended();
    }
  }
  if (must_wait(lsn)) check_durable(co_await wait_durable(lsn));
  if (std::holds_alternative<proclaim_ok>(result))
    metrics_.proclaim_ok.fetch_add(1, std::memory_order_relaxed);
  else
    metrics_.proclaim_lost.fetch_add(1, std::memory_order_relaxed);
  co_return result;
}

// A record write has a log type of its own, and its batch a guard (wal_record.hpp): no older server may
// read the directory as if the write had not happened.
asio::awaitable<record_write_result> lock_service::write_record(std::string_view key, std::string_view owner,
                                                                std::uint64_t token, std::string_view value,
                                                                std::string_view client) {
  record_write_result result;
  std::uint64_t lsn;
  {
    std::lock_guard lk(mu_);
    refuse_if_failed();
    const auto now = now_();
    expire_due_locked(key, now);
    result = table_.write_record(key, owner, token, value, now, client);
    if (auto* ok = std::get_if<record_written>(&result))
      lsn = journal_.append(record_type::lock_record, token, ok->version, key, owner, client, value);
    else
      lsn = journal_.last_appended();  // a refusal reports the lease, which may rest on any pending record
  }
  if (must_wait(lsn)) check_durable(co_await wait_durable(lsn));
  if (std::holds_alternative<record_written>(result))
    metrics_.record_written.fetch_add(1, std::memory_order_relaxed);
  else if (std::holds_alternative<renew_refused>(result))
    metrics_.record_lost.fetch_add(1, std::memory_order_relaxed);
  else if (std::holds_alternative<record_stale>(result))
    metrics_.record_stale.fetch_add(1, std::memory_order_relaxed);
  else
    metrics_.record_too_many.fetch_add(1, std::memory_order_relaxed);
  co_return result;
}

asio::awaitable<std::optional<lock_record>> lock_service::read_record(std::string_view key) {
  std::optional<lock_record> found;
  std::uint64_t lsn;
  {
    std::lock_guard lk(mu_);
    if (const auto* r = table_.find_record(key)) found = *r;
    lsn = journal_.last_appended();
  }
  if (must_wait(lsn)) check_durable(co_await wait_durable(lsn));
  (found ? metrics_.record_found : metrics_.record_missing).fetch_add(1, std::memory_order_relaxed);
  co_return found;
}

std::uint64_t lock_service::removed_locked(std::string_view key, const release_result& r, time_point now) {
  return removed_locked(permit_key(key, r.permits, r.slot),
                        r.outcome == release_outcome::released ? record_type::release : record_type::expire,
                        r.removed_token, now);
}

// `table_key`: the removed lease's (a permit's: permit_key()); the key's waiters and queue are woken.
std::uint64_t lock_service::removed_locked(std::string_view table_key, record_type logged_as,
                                           std::uint64_t token, time_point now) {
  const auto lsn = journal_.append(logged_as, token, 0, table_key);
  const std::string_view key = user_key(table_key);
  metrics_.locks_held.fetch_sub(1, std::memory_order_relaxed);
  count_delays_locked();
  notify_locked(key);
  // The next in the key's queue gets it now; the release's answer rests on its own record only.
  hand_off_locked(key, now);
  return lsn;
}

asio::awaitable<release_result> lock_service::release(std::string_view key, std::string_view owner,
                                                      std::uint64_t token, std::string_view client) {
  release_result result;
  std::uint64_t lsn;
  {
    std::lock_guard lk(mu_);
    refuse_if_failed();
    const auto now = now_();
    std::optional<lease_view> any_holder;
    if (BATON_PLANTED(release_by_key) && (any_holder = table_.get(key, now)))
      result = table_.release(key, any_holder->owner, any_holder->token, now, any_holder->client);
    else
      result = table_.release(key, owner, token, now, client);
    if (result.removed_token != 0) {
      lsn = removed_locked(key, result, now);
    } else {
      // "Already free" may rest on a release that is not durable yet: answer only once it is.
      lsn = journal_.last_appended();
    }
  }
  if (must_wait(lsn)) check_durable(co_await wait_durable(lsn));
  switch (result.outcome) {
    case release_outcome::released:
      metrics_.release_released.fetch_add(1, std::memory_order_relaxed);
      break;
    case release_outcome::already_free:
      metrics_.release_already_free.fetch_add(1, std::memory_order_relaxed);
      break;
    case release_outcome::not_owner:
      metrics_.release_not_owner.fetch_add(1, std::memory_order_relaxed);
      break;
  }
  co_return result;
}

asio::awaitable<std::optional<lease_view>> lock_service::get(std::string_view key) {
  std::optional<lease_view> view;
  std::uint64_t lsn;
  {
    std::lock_guard lk(mu_);
    const auto now = now_();
    expire_due_locked(key, now);
    view = table_.get(key, now);
    lsn = journal_.last_appended();
  }
  if (must_wait(lsn)) check_durable(co_await wait_durable(lsn));
  co_return view;
}

asio::awaitable<list_page> lock_service::list(std::string_view prefix, std::string_view after,
                                              std::size_t limit) {
  list_page answer;
  std::uint64_t lsn;
  {
    std::lock_guard lk(mu_);
    answer = table_.list(prefix, after, limit, now_());
    if (!queues_.empty())
      for (auto& l : answer.leases)
        if (auto q = queues_.find(l.key); q != queues_.end()) l.waiters = q->second.size();
    lsn = journal_.last_appended();
  }
  if (must_wait(lsn)) check_durable(co_await wait_durable(lsn));
  metrics_.list_pages.fetch_add(1, std::memory_order_relaxed);
  co_return answer;
}

asio::awaitable<break_result> lock_service::break_lease(std::string_view key,
                                                        std::optional<std::uint64_t> token,
                                                        std::string_view by) {
  break_result result;
  std::uint64_t lsn;
  {
    std::lock_guard lk(mu_);
    refuse_if_failed();
    const auto now = now_();
    // An expired lease is logged as expired, as any answer that shows it gone does; then it is not held.
    expire_due_locked(key, now);
    result = table_.break_lease(key, token, now);
    if (auto* b = std::get_if<lease_broken>(&result)) {
      // Logged as a release: replay frees the key exactly as it must, and the log format (and a downgrade)
      // is unchanged. Who broke it is in the audit line, not in the log (docs/design.md). A lease with a
      // lock-delay is logged as expired instead: its one record both ends the lease and, replayed, begins
      // the key's delay (the lease's delay is in its grant's batch), so no crash can keep the end without
      // the delay, as a release and a delay record written apart could.
      const bool delayed = b->lease.lock_delay > milliseconds{0};
      removed_locked(permit_key(key, b->lease.permits, b->lease.slot),
                     delayed ? record_type::expire : record_type::release, b->lease.token, now);
    }
    lsn = journal_.last_appended();
  }
  if (must_wait(lsn)) check_durable(co_await wait_durable(lsn));
  if (const auto* b = std::get_if<lease_broken>(&result)) {
    metrics_.break_broken.fetch_add(1, std::memory_order_relaxed);
    log::warn("lease_broken", {{"by", by},
                               {"key", key},
                               {"token", b->lease.token},
                               {"owner", b->lease.owner},
                               {"client", b->lease.client},
                               {"remaining_ms", b->lease.remaining.count()}});
  } else if (std::holds_alternative<break_not_held>(result)) {
    metrics_.break_not_held.fetch_add(1, std::memory_order_relaxed);
  } else {
    metrics_.break_token_mismatch.fetch_add(1, std::memory_order_relaxed);
  }
  co_return result;
}

void lock_service::set_lock_limit(std::size_t max_locks) {
  std::lock_guard lk(mu_);
  max_locks_ = max_locks;
}

void lock_service::set_record_limit(std::size_t max_records) {
  std::lock_guard lk(mu_);
  table_.set_record_limit(max_records);
}

void lock_service::set_waiter_limits(std::size_t per_key, std::size_t total) {
  std::lock_guard lk(mu_);
  max_waiters_per_key_ = per_key;
  max_waiters_ = total;
}

asio::awaitable<std::optional<lease_view>> lock_service::wait(std::string_view key, std::uint64_t token,
                                                              milliseconds wait,
                                                              std::optional<std::string> value) {
  auto ex = co_await asio::this_coro::executor;
  const time_point deadline = now_() + wait;
  {
    std::lock_guard lk(mu_);
    auto& on_key = waiting_per_key_[std::string(key)];
    if (waiting_ >= max_waiters_ || on_key >= max_waiters_per_key_) {
      std::string why = waiting_ >= max_waiters_
                            ? "the server has " + std::to_string(waiting_) + " long-poll waiters, its limit"
                            : "this key has " + std::to_string(on_key) + " long-poll waiters, its limit";
      if (on_key == 0) waiting_per_key_.erase(std::string(key));
      throw waiters_exhausted(why);
    }
    ++waiting_;
    ++on_key;
  }
  const waiter_admission admitted{*this, std::string(key)};
  auto w = std::make_shared<waiter>(waiter{timers_(ex)});
  metrics_.waiters.fetch_add(1, std::memory_order_relaxed);
  struct gauge_guard {
    server_metrics& m;
    ~gauge_guard() { m.waiters.fetch_sub(1, std::memory_order_relaxed); }
  } guard{metrics_};
  for (;;) {
    std::optional<lease_view> view;
    std::uint64_t lsn = 0;
    bool answer;
    {
      std::lock_guard lk(mu_);
      time_point now = now_();
      expire_due_locked(key, now);
      view = table_.get(key, now);
      std::uint64_t current = view ? view->token : 0;
      // A key of permits changes for a waiter once no live permit has its token (0: once one is held).
      // (The view shows only the first holders: the table is asked, in O(1).)
      if (view && view->permits > 1 && token != 0 && table_.permit_held(key, token, now)) current = token;
      // A key in lock-delay after the lease `token` is still that lease's to a waiter: nobody can take the
      // key before the delay ends, so a waiter that would try is answered then, not at once (a client that
      // predates lock-delay would otherwise spin between this answer and a refused acquire). The same for a
      // slot of a key of permits in lock-delay after the permit `token`, whether or not other permits are
      // held: the waiter's own slot is the one it waits for.
      std::optional<key_delay> delay;
      if (token != 0 && current != token) {
        if (!view) delay = table_.delayed(key, now);
        if (!delay || delay->token != token) delay = table_.permit_delayed(key, token, now);
        if (delay && delay->token == token)
          current = token;
        else
          delay.reset();
      }
      // With `value`, a proclaim is a change too (an election's observer learns the new leader address).
      const bool value_changed =
          value && (view ? std::string_view(view->value) : std::string_view()) != *value;
      answer = current != token || value_changed || now >= deadline || stopping_;
      if (answer) {
        lsn = journal_.last_appended();
      } else {
        // Wake at the deadline, or at a holder's expiry instant (a renew moves it: we then look again), or
        // at the end of the lock-delay the waiter sleeps through.
        const auto look_again = view ? table_.next_change(key, now) : delay ? delay->until : deadline;
        w->timer->expires_at(std::min(deadline, look_again));
        waiters_[std::string(key)].push_back(w);
      }
    }
    if (answer) {
      if (must_wait(lsn)) check_durable(co_await wait_durable(lsn));
      co_return view;
    }
    co_await w->timer->wait();
    {
      std::lock_guard lk(mu_);
      auto it = waiters_.find(std::string(key));
      if (it != waiters_.end()) {
        std::erase(it->second, w);
        if (it->second.empty()) waiters_.erase(it);
      }
    }
    // Cancelled by the caller (batond: the client closed its connection): nobody is left to answer.
    auto state = co_await asio::this_coro::cancellation_state;
    if (state.cancelled() != asio::cancellation_type::none) co_return std::nullopt;
  }
}

lock_service::sweep_result lock_service::sweep_step() {
  std::lock_guard lk(mu_);
  const auto now = now_();
  auto expired = table_.expire_some(now, sweep_step_leases);
  std::uint64_t last_lsn = 0;
  for (const auto& e : expired) {
    // Not waited for: if this record is lost in a crash the lease is restored and held longer, which is safe.
    if (!journal_.failed()) last_lsn = journal_.append(record_type::expire, e.token, 0, e.key);
    notify_locked(user_key(e.key));
    hand_off_locked(user_key(e.key), now);
  }
  metrics_.expired.fetch_add(expired.size(), std::memory_order_relaxed);
  metrics_.locks_held.fetch_sub(static_cast<std::int64_t>(expired.size()), std::memory_order_relaxed);
  // Keys whose lock-delay is over. Logged lazily, as expiries are: a lost record only begins the delay
  // again at a restart, which keeps the key unavailable longer, never shorter.
  auto ended = table_.end_delays(now, sweep_step_leases);
  for (const auto& e : ended) {
    if (!journal_.failed()) last_lsn = journal_.append(record_type::lock_delay, e.token, 0, e.key);
    notify_locked(user_key(e.key));  // long-polls that slept through the delay (wait())
    hand_off_locked(user_key(e.key), now);
  }
  count_delays_locked();
  return {expired.size(), expired.size() < sweep_step_leases && ended.size() < sweep_step_leases, last_lsn};
}

asio::awaitable<void> lock_service::wait_logged(std::uint64_t lsn) {
  // A failed journal completes the wait with an error: the sweep has nothing more to wait for.
  if (must_wait(lsn)) co_await wait_durable(lsn);
}

lock_service::waiter_admission::~waiter_admission() {
  std::lock_guard lk(self.mu_);
  --self.waiting_;
  auto it = self.waiting_per_key_.find(key);
  if (--it->second == 0) self.waiting_per_key_.erase(it);
}

void lock_service::wake_all() {
  std::lock_guard lk(mu_);
  stopping_ = true;
  for (auto& [key, list] : waiters_)
    for (auto& w : list)
      wake(w);
  waiters_.clear();
  for (auto& [key, queue] : queues_)
    for (auto& q : queue)
      asio::post(q->timer->get_executor(), [q] { q->timer->cancel(); });
}

// ---- the queue of waiting acquires (docs/protocol.md, "Queued acquire") ----

void lock_service::hand_off_locked(std::string_view key, time_point now) {
  // A failed log grants nothing more; the waiters are answered storage_unavailable when their wait ends.
  if (queues_.empty() || journal_.failed()) return;
  auto it = queues_.find(std::string(key));
  if (it == queues_.end()) return;
  auto& queue = it->second;
  // A key of permits may take several of its queue at once, one per free slot.
  while (!queue.empty() && !table_.refusal(key, queue.front()->permits, now)) {
    auto q = queue.front();
    queue.pop_front();
    q->queued = false;
    try {
      q->lsn = acquire_locked(key, q->owner, q->ttl, q->client, q->quota, q->value, q->lock_delay, q->permits,
                              now, q->result);
      q->granted = std::holds_alternative<acquire_granted>(q->result);
      q->granted_at = now;
    } catch (const locks_exhausted& e) {
      // This waiter may not hold another lock: it is answered so, and the next one is tried.
      q->refusal = std::make_exception_ptr(e);
    }
    asio::post(q->timer->get_executor(), [q] { q->timer->cancel(); });
  }
  if (queue.empty()) queues_.erase(it);
}

void lock_service::leave_queue_locked(const std::shared_ptr<queued_acquire>& q) {
  if (!q->queued) return;
  q->queued = false;
  auto it = queues_.find(q->key);
  if (it == queues_.end()) return;
  std::erase(it->second, q);
  if (it->second.empty()) queues_.erase(it);
}

asio::awaitable<std::optional<queued_answer>> lock_service::acquire_queued(
    std::string_view key, std::string_view owner, milliseconds ttl, milliseconds wait,
    std::string_view client, std::optional<std::size_t> client_quota, std::string_view value,
    milliseconds lock_delay, std::uint32_t permits) {
  auto ex = co_await asio::this_coro::executor;
  auto q = std::make_shared<queued_acquire>();
  q->key = std::string(key);
  q->owner = std::string(owner);
  q->client = std::string(client);
  q->value = std::string(value);
  q->ttl = ttl;
  q->lock_delay = lock_delay;
  q->permits = permits;
  q->quota = client_quota;
  std::uint64_t lsn = 0;
  time_point arrived;
  {
    std::lock_guard lk(mu_);
    refuse_if_failed();
    arrived = now_();
    q->deadline = arrived + wait;
    expire_due_locked(key, arrived);
    auto& queue = queues_[q->key];
    const auto refused = table_.refusal(key, permits, arrived);
    // Granted at once: the key is free (a slot of it is), out of lock-delay, and nobody waits for it (a free
    // key with waiters has just been handed to the first of them above), or the caller holds it already (a
    // same-owner acquire supersedes). A key in lock-delay is waited for like a held one. Answered at once
    // too: a key in use, or waited for, with another permit count.
    const bool free = !refused;
    const bool mismatch = (refused && std::holds_alternative<acquire_mismatch>(*refused)) ||
                          (!queue.empty() && queue.front()->permits != permits);
    if ((free && queue.empty()) || mismatch || table_.holds(key, owner, client, arrived)) {
      if (queue.empty()) queues_.erase(q->key);
      lsn = acquire_locked(key, owner, ttl, client, client_quota, value, lock_delay, permits, arrived,
                           q->result);
    } else {
      if (waiting_ >= max_waiters_ || waiting_per_key_[q->key] >= max_waiters_per_key_) {
        std::string why =
            waiting_ >= max_waiters_
                ? "the server has " + std::to_string(waiting_) + " waiting requests, its limit"
                : "this key has " + std::to_string(waiting_per_key_[q->key]) + " waiting requests, its limit";
        if (waiting_per_key_[q->key] == 0) waiting_per_key_.erase(q->key);
        if (queue.empty()) queues_.erase(q->key);
        throw waiters_exhausted(why);
      }
      // A retry of a request that still waits (its connection lost, say) takes that request's place: one
      // place per owner, and the older request is answered with the holder.
      for (auto& other : queue)
        if (other->owner == owner && other->client == client) {
          other->queued = false;
          asio::post(other->timer->get_executor(), [other] { other->timer->cancel(); });
          other = q;
          q->queued = true;
          break;
        }
      if (!q->queued) {
        queue.push_back(q);
        q->queued = true;
      }
      ++waiting_;
      ++waiting_per_key_[q->key];
      q->timer = timers_(ex);
      hand_off_locked(key, arrived);  // a free key and a queue never stay together
    }
  }
  if (!q->queued && !q->timer) {
    // Decided at once, like acquire().
    if (must_wait(lsn)) check_durable(co_await wait_durable(lsn));
    count_acquire(q->result);
    co_return queued_answer{std::move(q->result), milliseconds(0)};
  }
  const waiter_admission admitted{*this, q->key};
  metrics_.queued.fetch_add(1, std::memory_order_relaxed);
  struct gauge_guard {
    server_metrics& m;
    ~gauge_guard() { m.queued.fetch_sub(1, std::memory_order_relaxed); }
  } guard{metrics_};
  for (;;) {
    bool cancelled = false;
    {
      std::lock_guard lk(mu_);
      const auto now = now_();
      if (q->queued) {
        expire_due_locked(key, now);  // a holder past its TTL: hands the key over, maybe to us
        hand_off_locked(key, now);    // a lock-delay that is over: the same
      }
      if (!q->queued) break;  // granted, refused, or replaced by a retry
      if (now >= q->deadline || stopping_) {
        leave_queue_locked(q);
        break;
      }
      // Wake at the deadline, or at a holder's expiry instant (a renew moves it: we then look again), or
      // when a lock-delay of the key ends.
      q->timer->expires_at(std::min(q->deadline, table_.next_change(key, now)));
    }
    co_await q->timer->wait();
    auto state = co_await asio::this_coro::cancellation_state;
    cancelled = state.cancelled() != asio::cancellation_type::none;
    if (cancelled) {
      // The client is gone (batond: its connection closed). A place it held is given up; a grant made for
      // it that it will never hear of is released at once, so the next in line does not wait out a TTL.
      std::lock_guard lk(mu_);
      leave_queue_locked(q);
      if (q->granted) {
        const auto now = now_();
        auto r = table_.release(key, q->owner, std::get<acquire_granted>(q->result).token, now, q->client);
        if (r.removed_token != 0) removed_locked(key, r, now);
      }
      metrics_.queue_left.fetch_add(1, std::memory_order_relaxed);
      co_return std::nullopt;
    }
  }
  if (q->refusal) std::rethrow_exception(q->refusal);
  milliseconds queued_for{0};
  if (q->granted) {
    queued_for = std::chrono::duration_cast<milliseconds>(q->granted_at - arrived);
    metrics_.queue_wait_seconds.observe(std::chrono::duration<double>(q->granted_at - arrived).count());
    lsn = q->lsn;
  } else {
    // The wait passed (or the server stops, or a retry took this place): answered with the holder, as a
    // refusal is, once every record it could reflect is durable.
    std::lock_guard lk(mu_);
    const auto now = now_();
    expire_due_locked(key, now);
    if (auto refused = table_.refusal(key, permits, now)) {
      q->result = std::move(*refused);
      lsn = journal_.last_appended();
      metrics_.queue_wait_passed.fetch_add(1, std::memory_order_relaxed);
    } else if (!queues_.contains(q->key)) {
      // Free, and nobody else waits: the key this request waited for is its own after all.
      lsn = acquire_locked(key, owner, ttl, client, client_quota, value, lock_delay, permits, now, q->result);
      q->granted_at = now;
      queued_for = std::chrono::duration_cast<milliseconds>(now - arrived);
    } else {
      lsn = journal_.last_appended();  // not reached: a free key is handed to its queue at once
      q->result = acquire_refused{};
    }
  }
  if (must_wait(lsn)) check_durable(co_await wait_durable(lsn));
  count_acquire(q->result);
  co_return queued_answer{std::move(q->result), queued_for};
}

void lock_service::count_acquire(const acquire_result& r) {
  if (std::holds_alternative<acquire_granted>(r))
    metrics_.acquire_granted.fetch_add(1, std::memory_order_relaxed);
  else if (std::holds_alternative<acquire_mismatch>(r))
    metrics_.acquire_permits_mismatch.fetch_add(1, std::memory_order_relaxed);
  else if (std::get<acquire_refused>(r).lock_delay_remaining > milliseconds{0})
    metrics_.acquire_lock_delay.fetch_add(1, std::memory_order_relaxed);
  else
    metrics_.acquire_held.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace baton::server
