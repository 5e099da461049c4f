// SPDX-License-Identifier: Apache-2.0
// baton::testing::memory_backend: the protocol's rules in memory, on a clock the test moves.

#include "baton/testing.hpp"

#include "baton/error.hpp"
#include "timer.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>

namespace baton::testing {
namespace asio = boost::asio;

namespace {
constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);
}

// A request held by pause(): resume() runs its effect and wakes it; an abandoned one is dropped, or run by
// resume() with nobody to answer.
struct memory_backend::waiter {
  detail::timer* timer = nullptr;
  std::function<void()> effect;
  bool done = false;
  bool dropped = false;
};

memory_backend::memory_backend(asio::any_io_executor ex) : ex_(std::move(ex)) {}

memory_backend::memory_backend(asio::any_io_executor ex, options o) : ex_(std::move(ex)) {
  if (o.drives_clients) clients_clock_ = std::make_shared<detail::manual_clock>(lease_clock::now());
}
memory_backend::~memory_backend() = default;

void memory_backend::changed() {
  for (auto* w : change_waiters_)
    if (w->timer) w->timer->cancel();
  ++changes_;
}

void memory_backend::expire_due() {
  bool any = false;
  for (auto it = locks_.begin(); it != locks_.end();) {
    if (it->second.expiry <= now_) {
      it = erase_expired(it, it->second.expiry);
      any = true;
    } else {
      ++it;
    }
  }
  if (any) changed();
}

lease_clock::time_point memory_backend::client_time() const {
  return clients_clock_ ? clients_clock_->now() : lease_clock::now();
}

void memory_backend::advance(std::chrono::nanoseconds d) {
  now_ += d;
  expire_due();
  changed();  // long-polls look at their own deadlines again
  // Then the clients' timers, and this server's request timeouts: a lease the step took past its TTL has
  // expired here before its client's renewal (due within the step) is sent.
  if (clients_clock_) clients_clock_->advance(d);
}

std::optional<holder_info> memory_backend::holder(const std::string& key) const {
  auto it = locks_.find(key);
  if (it == locks_.end() || it->second.expiry <= now_) return std::nullopt;
  return holder_info{it->second.owner, it->second.token, remaining(it->second.expiry), it->second.value};
}

milliseconds memory_backend::remaining(std::chrono::nanoseconds expiry) const {
  // Rounded up: a lease that is held has at least a millisecond left.
  return std::chrono::ceil<milliseconds>(expiry - now_);
}

void memory_backend::expire(const std::string& key) {
  auto it = locks_.find(key);
  if (it == locks_.end()) return;
  erase_expired(it, now_);
  changed();
}

std::map<std::string, memory_backend::lock>::iterator memory_backend::erase_expired(
    std::map<std::string, lock>::iterator it, std::chrono::nanoseconds ended) {
  if (it->second.lock_delay > milliseconds{0} && ended + it->second.lock_delay > now_)
    delays_[it->first] = {it->second.token, ended + it->second.lock_delay};
  return locks_.erase(it);
}

void memory_backend::pause() {
  paused_ = true;
}

void memory_backend::resume() {
  paused_ = false;
  auto pending = std::move(paused_waiters_);
  paused_waiters_.clear();
  for (auto& w : pending) {
    if (w->dropped) continue;
    w->effect();
    w->done = true;
    if (w->timer) w->timer->cancel();
  }
}

void memory_backend::fail_next(int n, boost::system::error_code ec) {
  failures_left_ = n;
  failure_ = ec;
}

bool memory_backend::injected_failure(boost::system::error_code& ec) {
  if (failures_left_ <= 0) return false;
  --failures_left_;
  ec = failure_;
  return true;
}

template <class Reply>
asio::awaitable<Reply> memory_backend::serve(milliseconds timeout, std::function<Reply()> effect) {
  Reply r;
  if (injected_failure(r.ec)) co_return r;
  if (!paused_) {
    expire_due();
    co_return effect();
  }
  auto w = std::make_shared<waiter>();
  auto reply = std::make_shared<Reply>();
  w->effect = [this, effect, reply] {
    expire_due();
    *reply = effect();
  };
  paused_waiters_.push_back(w);
  detail::timer t(detail::time_base{ex_, clients_clock_}, timeout);
  w->timer = &t;
  auto [ec] = co_await t.async_wait(use_tuple);
  w->timer = nullptr;
  if (w->done) co_return *reply;
  // Given up before the server answered: a slow server still carries the request out at resume().
  if (abandoned_ == abandoned::drop) w->dropped = true;
  r.ec = ec == asio::error::operation_aborted ? make_error_code(asio::error::operation_aborted)
                                              : make_error_code(error::request_timeout);
  r.diagnostic = ec == asio::error::operation_aborted ? "cancelled" : "no answer from the (paused) server";
  co_return r;
}

acquire_reply memory_backend::do_acquire(const std::string& key, const std::string& owner, milliseconds ttl,
                                         const std::string& value, milliseconds lock_delay) {
  acquire_reply r;
  if (auto d = delays_.find(key); d != delays_.end()) {
    if (now_ < d->second.second) {
      r.ec = error::held;
      r.diagnostic = "in lock-delay";
      r.holder.token = d->second.first;
      r.holder.lock_delay_remaining = remaining(d->second.second);
      r.holder.ttl_remaining = r.holder.lock_delay_remaining;
      return r;
    }
    delays_.erase(d);
  }
  auto it = locks_.find(key);
  if (it != locks_.end() && it->second.owner != owner) {
    r.ec = error::held;
    r.diagnostic = "held by " + it->second.owner;
    r.holder =
        holder_info{it->second.owner, it->second.token, remaining(it->second.expiry), it->second.value};
    return r;
  }
  r.token = ++last_token_;
  // A same-owner re-acquire never makes the key free sooner (docs/protocol.md, acquire).
  const auto expiry = it != locks_.end() ? std::max(it->second.expiry, now_ + ttl) : now_ + ttl;
  // Nor shortens the promise to the next holder (batond's rule, docs/design.md, "Lock-delay").
  const auto delay = it != locks_.end() ? std::max(it->second.lock_delay, lock_delay) : lock_delay;
  locks_[key] = lock{owner, r.token, expiry, value, delay};
  changed();
  return r;
}

bool memory_backend::refused(renew_reply& r, std::map<std::string, lock>::const_iterator it,
                             const std::string& owner, std::uint64_t token) const {
  if (it == locks_.end())
    r.lost_reason = "not_held";
  else if (it->second.owner != owner)
    r.lost_reason = "owner_mismatch";
  else if (it->second.token != token)
    r.lost_reason = "token_mismatch";
  else
    return false;
  r.ec = error::lease_lost;
  r.diagnostic = r.lost_reason;
  return true;
}

renew_reply memory_backend::do_renew(const std::string& key, const std::string& owner, std::uint64_t token,
                                     milliseconds ttl) {
  renew_reply r;
  auto it = locks_.find(key);
  if (refused(r, it, owner, token)) return r;
  it->second.expiry = std::max(it->second.expiry, now_ + ttl);  // a renew never shortens a lease
  return r;
}

// Refused for renew's reasons in renew's order; the token and the expiry stay (docs/protocol.md, "proclaim").
proclaim_reply memory_backend::do_proclaim(const std::string& key, const std::string& owner,
                                           std::uint64_t token, const std::string& value) {
  proclaim_reply r;
  auto it = locks_.find(key);
  if (refused(r, it, owner, token)) return r;
  it->second.value = value;
  changed();  // long-polls look again: one that names a value answers
  return r;
}

// Renew's condition, then the token order (docs/protocol.md, "record"); the lease is not touched.
record_write_reply memory_backend::do_write_record(const std::string& key, const std::string& owner,
                                                   std::uint64_t token, const std::string& value) {
  record_write_reply r;
  renew_reply held;
  if (refused(held, locks_.find(key), owner, token)) {
    r.ec = held.ec;
    r.diagnostic = std::move(held.diagnostic);
    r.lost_reason = std::move(held.lost_reason);
    return r;
  }
  lock_record& rec = records_[key];
  if (rec.token > token) {
    r.ec = error::stale_token;
    r.diagnostic = "the record was written with token " + std::to_string(rec.token);
    return r;
  }
  rec.value = value;
  rec.owner = owner;
  rec.token = token;
  r.version = ++rec.version;
  return r;
}

release_reply memory_backend::do_release(const std::string& key, const std::string& owner,
                                         std::uint64_t token) {
  release_reply r;
  auto it = locks_.find(key);
  if (it == locks_.end()) {
    r.outcome = release_outcome::already_free;
  } else if (it->second.owner != owner || it->second.token != token) {
    r.outcome = release_outcome::not_owner;
  } else {
    locks_.erase(it);
    r.outcome = release_outcome::released;
    changed();
  }
  return r;
}

asio::awaitable<acquire_reply> memory_backend::acquire(std::string key, std::string owner, milliseconds ttl,
                                                       std::string value, milliseconds timeout) {
  ++calls_.acquire;
  // Named, not a temporary in the co_await expression: GCC 12 destroys such temporaries twice.
  std::function<acquire_reply()> effect = [this, key, owner, ttl, value] {
    return do_acquire(key, owner, ttl, value);
  };
  co_return co_await serve<acquire_reply>(timeout, std::move(effect));
}

asio::awaitable<acquire_reply> memory_backend::acquire_with_delay(std::string key, std::string owner,
                                                                  milliseconds ttl, std::string value,
                                                                  milliseconds lock_delay,
                                                                  std::optional<milliseconds> wait,
                                                                  milliseconds timeout) {
  if (wait) co_return co_await backend::acquire_queued(key, owner, ttl, value, *wait, timeout);
  ++calls_.acquire;
  std::function<acquire_reply()> effect = [this, key, owner, ttl, value, lock_delay] {
    return do_acquire(key, owner, ttl, value, lock_delay);
  };
  co_return co_await serve<acquire_reply>(timeout, std::move(effect));
}

asio::awaitable<renew_reply> memory_backend::renew(std::string key, std::string owner, std::uint64_t token,
                                                   milliseconds ttl, milliseconds timeout) {
  ++calls_.renew;
  std::function<renew_reply()> effect = [this, key, owner, token, ttl] {
    return do_renew(key, owner, token, ttl);
  };
  co_return co_await serve<renew_reply>(timeout, std::move(effect));
}

asio::awaitable<release_reply> memory_backend::release(std::string key, std::string owner,
                                                       std::uint64_t token, milliseconds timeout) {
  ++calls_.release;
  std::function<release_reply()> effect = [this, key, owner, token] { return do_release(key, owner, token); };
  co_return co_await serve<release_reply>(timeout, std::move(effect));
}

asio::awaitable<proclaim_reply> memory_backend::proclaim(std::string key, std::string owner,
                                                         std::uint64_t token, std::string value,
                                                         milliseconds timeout) {
  ++calls_.proclaim;
  std::function<proclaim_reply()> effect = [this, key, owner, token, value] {
    return do_proclaim(key, owner, token, value);
  };
  co_return co_await serve<proclaim_reply>(timeout, std::move(effect));
}

asio::awaitable<record_write_reply> memory_backend::write_record(std::string key, std::string owner,
                                                                 std::uint64_t token, std::string value,
                                                                 milliseconds timeout) {
  ++calls_.write_record;
  std::function<record_write_reply()> effect = [this, key, owner, token, value] {
    return do_write_record(key, owner, token, value);
  };
  co_return co_await serve<record_write_reply>(timeout, std::move(effect));
}

asio::awaitable<record_read_reply> memory_backend::read_record(std::string key, milliseconds timeout) {
  ++calls_.read_record;
  std::function<record_read_reply()> read = [this, key] {
    record_read_reply r;
    r.record = record(key);
    return r;
  };
  co_return co_await serve<record_read_reply>(timeout, std::move(read));
}

asio::awaitable<list_reply> memory_backend::list(std::string prefix, std::string after, std::size_t limit,
                                                 milliseconds timeout) {
  ++calls_.list;
  std::function<list_reply()> read = [this, prefix, after, limit] {
    list_reply r;
    if (limit == 0) {
      r.ec = error::bad_request;
      r.diagnostic = "limit must be at least 1";
      return r;
    }
    // The map is in key order, as a listing is.
    for (auto it = locks_.upper_bound(after); it != locks_.end(); ++it) {
      if (!it->first.starts_with(prefix)) {
        if (it->first > prefix) break;
        continue;
      }
      if (r.page.locks.size() == limit) {
        r.page.next = r.page.locks.back().key;
        break;
      }
      const auto& l = it->second;
      r.page.locks.push_back(
          {it->first, "lock", holder_info{l.owner, l.token, remaining(l.expiry), l.value}, {}, 0});
    }
    return r;
  };
  co_return co_await serve<list_reply>(timeout, std::move(read));
}

asio::awaitable<break_reply> memory_backend::break_lease(std::string key, std::optional<std::uint64_t> token,
                                                         milliseconds timeout) {
  ++calls_.break_lease;
  std::function<break_reply()> effect = [this, key, token] {
    break_reply r;
    auto it = locks_.find(key);
    if (it == locks_.end()) {
      r.ec = error::not_held;
      r.diagnostic = "the lock is not held";
      return r;
    }
    const auto& l = it->second;
    r.holder = holder_info{l.owner, l.token, remaining(l.expiry), l.value};
    if (token && *token != l.token) {
      r.ec = error::token_mismatch;
      r.diagnostic = "the lock is held with another token";
      return r;
    }
    locks_.erase(it);
    changed();
    return r;
  };
  co_return co_await serve<break_reply>(timeout, std::move(effect));
}

std::optional<lock_record> memory_backend::record(const std::string& key) const {
  auto it = records_.find(key);
  if (it == records_.end()) return std::nullopt;
  return it->second;
}

asio::awaitable<get_reply> memory_backend::get(std::string key, std::optional<wait_for_change> wait,
                                               milliseconds timeout) {
  ++calls_.get;
  std::function<get_reply()> read = [this, key] {
    get_reply r;
    r.holder = holder(key);
    return r;
  };
  if (!wait || paused_ || failures_left_ > 0) co_return co_await serve<get_reply>(timeout, std::move(read));
  // A long-poll: answer once the holder's token differs from the caller's, or the wait passes on this
  // server's clock; the request's own timeout runs on the clients' clock (real time, unless drives_clients).
  expire_due();
  const milliseconds wait_bound =
      std::min(wait->wait, milliseconds{60'000});  // the protocol's cap on wait_ms
  const auto until = now_ + wait_bound;
  detail::timer t(detail::time_base{ex_, clients_clock_}, timeout);
  waiter w;
  w.timer = &t;
  // Registered for the frame's lifetime: the frame may end in an exception (a wait in a cancelled coroutine).
  struct registration {
    std::list<waiter*>& list;
    std::list<waiter*>::iterator it;
    ~registration() { list.erase(it); }
  } reg{change_waiters_, change_waiters_.insert(change_waiters_.end(), &w)};
  get_reply r;
  for (;;) {
    auto h = holder(key);
    const bool value_changed =
        wait->value && (h ? std::string_view(h->value) : std::string_view()) != *wait->value;
    if ((h ? h->token : 0) != wait->token || value_changed || now_ >= until) {
      r.holder = std::move(h);
      break;
    }
    if ((co_await asio::this_coro::cancellation_state).cancelled() != asio::cancellation_type::none) {
      r.ec = make_error_code(asio::error::operation_aborted);
      break;
    }
    const auto seen = changes_;
    auto [ec] = co_await t.async_wait(use_tuple);
    if (changes_ != seen) continue;
    r.ec = ec == asio::error::operation_aborted ? make_error_code(asio::error::operation_aborted)
                                                : make_error_code(error::request_timeout);
    break;
  }
  co_return r;
}

}  // namespace baton::testing
