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
  for (auto k = keys_.begin(); k != keys_.end();) {
    auto& ks = k->second;
    bool here = false;
    for (auto it = ks.held.begin(); it != ks.held.end();) {
      if (it->second.expiry <= now_) {
        it = erase_expired(ks, it, it->second.expiry);
        here = true;
      } else {
        ++it;
      }
    }
    std::erase_if(ks.delays, [this](const auto& d) { return d.second.second <= now_; });
    auto next = std::next(k);
    if (here) {
      any = true;
      touched(k);
    } else if (ks.held.empty() && ks.delays.empty()) {
      keys_.erase(k);
    }
    k = next;
  }
  if (any) changed();
}

void memory_backend::touched(std::map<std::string, key_state>::iterator k) {
  k->second.changed_at = ++changes_;
  if (k->second.held.empty() && k->second.delays.empty()) keys_.erase(k);
}

holder_info memory_backend::info(const lock& l, std::uint32_t slot) const {
  holder_info h{l.owner, l.token, remaining(l.expiry), l.value};
  h.slot = slot;
  return h;
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
  auto all = holders(key);
  if (all.empty()) return std::nullopt;
  return std::move(all.front());
}

std::vector<holder_info> memory_backend::holders(const std::string& key) const {
  std::vector<holder_info> out;
  auto k = keys_.find(key);
  if (k == keys_.end()) return out;
  for (const auto& [slot, l] : k->second.held)
    if (l.expiry > now_) out.push_back(info(l, slot));
  return out;
}

milliseconds memory_backend::remaining(std::chrono::nanoseconds expiry) const {
  // Rounded up: a lease that is held has at least a millisecond left.
  return std::chrono::ceil<milliseconds>(expiry - now_);
}

void memory_backend::expire(const std::string& key) {
  auto k = keys_.find(key);
  if (k == keys_.end()) return;
  for (auto it = k->second.held.begin(); it != k->second.held.end();)
    it = erase_expired(k->second, it, now_);
  touched(k);
  changed();
}

void memory_backend::expire(const std::string& key, std::uint64_t token) {
  auto k = keys_.find(key);
  if (k == keys_.end()) return;
  auto& held = k->second.held;
  auto it = std::find_if(held.begin(), held.end(), [&](const auto& e) { return e.second.token == token; });
  if (it == held.end()) return;
  erase_expired(k->second, it, now_);
  touched(k);
  changed();
}

std::map<std::uint32_t, memory_backend::lock>::iterator memory_backend::erase_expired(
    key_state& k, std::map<std::uint32_t, lock>::iterator it, std::chrono::nanoseconds ended) {
  if (it->second.lock_delay > milliseconds{0} && ended + it->second.lock_delay > now_)
    k.delays[it->first] = {it->second.token, ended + it->second.lock_delay};
  return k.held.erase(it);
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
                                         const std::string& value, milliseconds lock_delay,
                                         std::uint32_t permits) {
  acquire_reply r;
  auto k = keys_.try_emplace(key).first;
  auto& ks = k->second;
  std::erase_if(ks.delays, [this](const auto& d) { return d.second.second <= now_; });
  // The count is the key's while anything holds it (docs/protocol.md, "Semaphores"); nothing changes.
  if (!ks.held.empty() && ks.permits != permits) {
    r.ec = error::permits_mismatch;
    r.permits = ks.permits;
    r.diagnostic = "the key is held with " + std::to_string(ks.permits) + " permits";
    return r;
  }
  if (ks.held.empty()) ks.permits = permits;
  // The same owner again keeps its slot, with a newer token.
  auto slot_it =
      std::find_if(ks.held.begin(), ks.held.end(), [&](const auto& e) { return e.second.owner == owner; });
  std::optional<std::uint32_t> slot;
  if (slot_it != ks.held.end()) {
    slot = slot_it->first;
  } else {
    for (std::uint32_t i = 0; i < permits && !slot; ++i)
      if (!ks.held.contains(i) && !ks.delays.contains(i)) slot = i;
  }
  if (!slot) {
    r.ec = error::held;
    r.permits = ks.permits;
    const lock* first = nullptr;  // the permit that expires first
    for (const auto& [i, l] : ks.held) {
      if (!first || l.expiry < first->expiry) first = &l;
      if (permits > 1) r.holders.push_back(info(l, i));
    }
    if (first) {
      r.diagnostic = "held by " + first->owner;
      r.holder = info(
          *first, static_cast<std::uint32_t>(std::find_if(ks.held.begin(), ks.held.end(), [&](const auto& e) {
                                               return &e.second == first;
                                             })->first));
    }
    // Every slot not held is in lock-delay: the shortest of those delays.
    const std::pair<std::uint64_t, std::chrono::nanoseconds>* soonest = nullptr;
    for (const auto& [i, d] : ks.delays)
      if (i < permits && !ks.held.contains(i) && (!soonest || d.second < soonest->second)) soonest = &d;
    if (soonest) {
      r.holder.lock_delay_remaining = remaining(soonest->second);
      if (!first) {
        r.diagnostic = "in lock-delay";
        r.holder.token = soonest->first;
        r.holder.ttl_remaining = r.holder.lock_delay_remaining;
      }
    }
    return r;
  }
  r.token = ++last_token_;
  r.slot = *slot;
  r.permits = ks.permits;
  auto old = ks.held.find(*slot);
  const bool again = old != ks.held.end();
  // A same-owner re-acquire never makes the key free sooner (docs/protocol.md, acquire).
  const auto expiry = again ? std::max(old->second.expiry, now_ + ttl) : now_ + ttl;
  // Nor shortens the promise to the next holder (batond's rule, docs/design.md, "Lock-delay").
  const auto delay = again ? std::max(old->second.lock_delay, lock_delay) : lock_delay;
  ks.held[*slot] = lock{owner, r.token, expiry, value, delay};
  touched(k);
  changed();
  return r;
}

memory_backend::lock* memory_backend::held_by(renew_reply& r, const std::string& key,
                                              const std::string& owner, std::uint64_t token) {
  auto k = keys_.find(key);
  lock* found = nullptr;
  if (k == keys_.end() || k->second.held.empty()) {
    r.lost_reason = "not_held";
  } else if (k->second.permits == 1) {
    // A lock: its one holder, as ever.
    auto& l = k->second.held.begin()->second;
    if (l.owner != owner)
      r.lost_reason = "owner_mismatch";
    else if (l.token != token)
      r.lost_reason = "token_mismatch";
    else
      found = &l;
  } else {
    // A semaphore: the permit with the token, if any; else the owner's own permit with another token.
    for (auto& [slot, l] : k->second.held) {
      if (l.token != token) continue;
      if (l.owner == owner)
        found = &l;
      else
        r.lost_reason = "owner_mismatch";
      break;
    }
    if (!found && r.lost_reason.empty()) {
      const bool owner_holds = std::any_of(k->second.held.begin(), k->second.held.end(),
                                           [&](const auto& e) { return e.second.owner == owner; });
      r.lost_reason = owner_holds ? "token_mismatch" : "not_held";
    }
  }
  if (found) return found;
  r.ec = error::lease_lost;
  r.diagnostic = r.lost_reason;
  return nullptr;
}

renew_reply memory_backend::do_renew(const std::string& key, const std::string& owner, std::uint64_t token,
                                     milliseconds ttl) {
  renew_reply r;
  if (auto* l = held_by(r, key, owner, token)) l->expiry = std::max(l->expiry, now_ + ttl);  // never shorter
  return r;
}

// Refused for renew's reasons in renew's order; the token and the expiry stay (docs/protocol.md, "proclaim").
proclaim_reply memory_backend::do_proclaim(const std::string& key, const std::string& owner,
                                           std::uint64_t token, const std::string& value) {
  proclaim_reply r;
  auto* l = held_by(r, key, owner, token);
  if (!l) return r;
  l->value = value;
  changed();  // long-polls look again: one that names a value answers
  return r;
}

// Renew's condition, then the token order (docs/protocol.md, "record"); the lease is not touched. Any live
// permit holder of a semaphore key may write it.
record_write_reply memory_backend::do_write_record(const std::string& key, const std::string& owner,
                                                   std::uint64_t token, const std::string& value) {
  record_write_reply r;
  renew_reply held;
  if (!held_by(held, key, owner, token)) {
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
  r.outcome = release_outcome::already_free;
  auto k = keys_.find(key);
  if (k == keys_.end() || k->second.held.empty()) return r;
  auto& held = k->second.held;
  // A lock: any other holder refuses. A semaphore: the permit with the token; none is already_free.
  auto it = k->second.permits == 1 ? held.begin()
                                   : std::find_if(held.begin(), held.end(),
                                                  [&](const auto& e) { return e.second.token == token; });
  if (it == held.end()) return r;
  if (it->second.owner != owner || it->second.token != token) {
    r.outcome = release_outcome::not_owner;
    return r;
  }
  held.erase(it);
  r.outcome = release_outcome::released;
  touched(k);
  changed();
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

asio::awaitable<acquire_reply> memory_backend::acquire_with(acquire_request q) {
  if (q.permits <= 1) co_return co_await backend::acquire_with(std::move(q));
  if (q.wait) co_return co_await backend::acquire_queued(q.key, q.owner, q.ttl, q.value, *q.wait, q.timeout);
  ++calls_.acquire;
  std::function<acquire_reply()> effect = [this, q] {
    return do_acquire(q.key, q.owner, q.ttl, q.value, q.lock_delay, q.permits);
  };
  co_return co_await serve<acquire_reply>(q.timeout, std::move(effect));
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
    // The map is in key order, as a listing is; a page never splits a key's permits.
    for (auto k = keys_.upper_bound(after); k != keys_.end(); ++k) {
      if (!k->first.starts_with(prefix)) {
        if (k->first > prefix) break;
        continue;
      }
      const auto& ks = k->second;
      std::vector<listed_lock> entries;
      for (const auto& [slot, l] : ks.held) {
        if (l.expiry <= now_) continue;
        listed_lock one{k->first, ks.permits > 1 ? "permit" : "lock", info(l, slot), {}, 0};
        one.permits = ks.permits;
        entries.push_back(std::move(one));
      }
      if (entries.empty()) continue;
      if (!r.page.locks.empty() && r.page.locks.size() + entries.size() > limit) {
        r.page.next = r.page.locks.back().key;
        break;
      }
      for (auto& e : entries)
        r.page.locks.push_back(std::move(e));
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
    auto k = keys_.find(key);
    if (k == keys_.end() || k->second.held.empty()) {
      r.ec = error::not_held;
      r.diagnostic = "the lock is not held";
      return r;
    }
    auto& held = k->second.held;
    if (k->second.permits > 1 && !token) {
      r.ec = error::bad_request;
      r.diagnostic = "the key has " + std::to_string(k->second.permits) + " permits: name the permit's token";
      return r;
    }
    auto it = k->second.permits == 1 ? held.begin()
                                     : std::find_if(held.begin(), held.end(),
                                                    [&](const auto& e) { return e.second.token == *token; });
    if (it == held.end()) it = held.begin();  // none has the token: the lowest slot names the key's holders
    r.holder = info(it->second, it->first);
    if (token && *token != it->second.token) {
      r.ec = error::token_mismatch;
      r.diagnostic = "the lock is held with another token";
      return r;
    }
    held.erase(it);
    touched(k);
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
  auto read_now = [this](const std::string& k) {
    get_reply r;
    auto all = holders(k);
    if (auto ks = keys_.find(k); ks != keys_.end() && ks->second.permits > 1 && !all.empty()) {
      r.permits = ks->second.permits;
      r.holders = all;
    }
    if (!all.empty()) r.holder = std::move(all.front());
    return r;
  };
  std::function<get_reply()> read = [read_now, key] { return read_now(key); };
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
  // A key of several permits answers at any change of its permits too: the caller polls with one token,
  // while any of the others may end first.
  auto changed_at = [this, &key] {
    auto k = keys_.find(key);
    return k == keys_.end() ? std::uint64_t{0} : k->second.changed_at;
  };
  const auto first_seen = changed_at();
  for (;;) {
    auto now = read_now(key);
    const auto& h = now.holder;
    const bool value_changed =
        wait->value && (h ? std::string_view(h->value) : std::string_view()) != *wait->value;
    // Changed: the token waited on is no live lease's (0: a lease is held), or the value, or a semaphore's
    // permits.
    const bool token_gone =
        wait->token == 0 ? h.has_value()
                         : std::none_of(now.holders.begin(), now.holders.end(),
                                        [&](const holder_info& x) { return x.token == wait->token; }) &&
                               (!h || h->token != wait->token);
    const bool permits_changed = now.permits > 1 && changed_at() != first_seen;
    if (token_gone || value_changed || permits_changed || now_ >= until) {
      r = std::move(now);
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
