// SPDX-License-Identifier: Apache-2.0
#include "lock_service.hpp"

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
  if (!e) return;
  refuse_if_failed();
  journal_.append(record_type::expire, e->token, 0, e->key);
  metrics_.expired.fetch_add(1, std::memory_order_relaxed);
  metrics_.locks_held.fetch_sub(1, std::memory_order_relaxed);
  notify_locked(key);
}

asio::awaitable<acquire_result> lock_service::acquire(std::string_view key, std::string_view owner,
                                                      milliseconds ttl, std::string_view client,
                                                      std::optional<std::size_t> client_quota,
                                                      std::string_view value) {
  acquire_result result;
  std::uint64_t lsn;
  {
    std::lock_guard lk(mu_);
    refuse_if_failed();
    const auto now = now_();
    // Only a grant of a free key adds a lock; a held key is refused (409) or re-granted to its holder.
    if (!table_.get(key, now)) {
      if (table_.size() >= max_locks_ && !table_.contains(key)) {
        metrics_.acquire_too_many_locks.fetch_add(1, std::memory_order_relaxed);
        throw locks_exhausted(true,
                              "the server holds " + std::to_string(table_.size()) + " locks, its limit");
      }
      if (client_quota && table_.size_of(client) >= *client_quota) {
        metrics_.acquire_over_quota.fetch_add(1, std::memory_order_relaxed);
        throw locks_exhausted(false, "client \"" + std::string(client) + "\" holds " +
                                         std::to_string(table_.size_of(client)) + " locks, its quota");
      }
    }
    result = table_.acquire(key, owner, ttl, now, client, value);
    if (auto* g = std::get_if<acquire_granted>(&result)) {
      lsn = journal_.append(record_type::acquire, g->token,
                            static_cast<std::uint64_t>(g->restore_ttl.count()), key, owner, client, value);
      table_.mark_logged(key, g->token, lsn);
      metrics_.last_token.store(g->token, std::memory_order_relaxed);
      if (g->replaced_token == 0) metrics_.locks_held.fetch_add(1, std::memory_order_relaxed);
      notify_locked(key);
    } else {
      lsn = journal_.last_appended();
    }
  }
  if (must_wait(lsn)) check_durable(co_await wait_durable(lsn));
  if (std::holds_alternative<acquire_granted>(result))
    metrics_.acquire_granted.fetch_add(1, std::memory_order_relaxed);
  else
    metrics_.acquire_held.fetch_add(1, std::memory_order_relaxed);
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
      lsn = journal_.append(record_type::extend, token, static_cast<std::uint64_t>(ttl.count()), key);
      table_.mark_logged(key, token, lsn);
    }
    return defects_.renew_before_durable ? 0 : lsn;
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
      lsn = journal_.append(record_type::acquire, token, static_cast<std::uint64_t>(ok->restore_ttl.count()),
                            key, owner, client, value);
      table_.mark_logged(key, token, lsn);
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

asio::awaitable<release_result> lock_service::release(std::string_view key, std::string_view owner,
                                                      std::uint64_t token, std::string_view client) {
  release_result result;
  std::uint64_t lsn;
  {
    std::lock_guard lk(mu_);
    refuse_if_failed();
    const auto now = now_();
    std::optional<lease_view> any_holder;
    if (defects_.release_by_key && (any_holder = table_.get(key, now)))
      result = table_.release(key, any_holder->owner, any_holder->token, now, any_holder->client);
    else
      result = table_.release(key, owner, token, now, client);
    if (result.removed_token != 0) {
      auto type = result.outcome == release_outcome::released ? record_type::release : record_type::expire;
      lsn = journal_.append(type, result.removed_token, 0, key);
      metrics_.locks_held.fetch_sub(1, std::memory_order_relaxed);
      notify_locked(key);
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
  struct admission {
    lock_service& self;
    std::string key;
    ~admission() {
      std::lock_guard lk(self.mu_);
      --self.waiting_;
      auto it = self.waiting_per_key_.find(key);
      if (--it->second == 0) self.waiting_per_key_.erase(it);
    }
  } admitted{*this, std::string(key)};
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
      // With `value`, a proclaim is a change too (an election's observer learns the new leader address).
      const bool value_changed =
          value && (view ? std::string_view(view->value) : std::string_view()) != *value;
      answer = current != token || value_changed || now >= deadline || stopping_;
      if (answer) {
        lsn = journal_.last_appended();
      } else {
        // Wake at the deadline, or at the holder's expiry instant (a renew moves it: we then look again).
        w->timer->expires_at(view ? std::min(deadline, view->expires) : deadline);
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
  constexpr std::size_t buckets_per_step = 4096;
  std::lock_guard lk(mu_);
  auto expired = table_.expire_some(now_(), sweep_cursor_, buckets_per_step);
  for (const auto& e : expired) {
    // Not waited for: if this record is lost in a crash the lease is restored and held longer, which is safe.
    if (!journal_.failed()) journal_.append(record_type::expire, e.token, 0, e.key);
    notify_locked(e.key);
  }
  metrics_.expired.fetch_add(expired.size(), std::memory_order_relaxed);
  metrics_.locks_held.fetch_sub(static_cast<std::int64_t>(expired.size()), std::memory_order_relaxed);
  return {expired.size(), sweep_cursor_ == 0};
}

void lock_service::wake_all() {
  std::lock_guard lk(mu_);
  stopping_ = true;
  for (auto& [key, list] : waiters_)
    for (auto& w : list)
      wake(w);
  waiters_.clear();
}

}  // namespace baton::server
