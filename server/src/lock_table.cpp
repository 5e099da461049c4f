// SPDX-License-Identifier: Apache-2.0
#include "lock_table.hpp"
#include "planted_defects.hpp"

#include <algorithm>

namespace baton::server {

std::string_view to_string(lost_reason r) {
  switch (r) {
    case lost_reason::not_held:
      return "not_held";
    case lost_reason::owner_mismatch:
      return "owner_mismatch";
    case lost_reason::token_mismatch:
      return "token_mismatch";
    case lost_reason::broken:
      return "broken";
  }
  return "not_held";
}

time_point deadline_after(time_point now, milliseconds ttl) {
  if (ttl <= milliseconds{0}) return now;
  const auto room = time_point::max() - now;
  if (std::chrono::duration_cast<milliseconds>(room) <= ttl) return time_point::max();
  return now + ttl;
}

namespace detail {
lease_view view_of(const lease_record& r, time_point now) {
  auto remaining = std::chrono::ceil<milliseconds>(r.expires - now);
  return lease_view{r.owner,
                    std::string(r.client()),
                    r.token,
                    r.expires,
                    std::max(remaining, milliseconds{0}),
                    std::string(r.value()),
                    r.lock_delay()};
}

// What a refusal for a lock-delay shows: the lease it follows, and the delay's remaining time where a
// holder's would be, so that a client which only knows `held` waits as long as it must.
lease_view delay_view(std::uint64_t token, time_point until, time_point now) {
  lease_view v;
  v.token = token;
  v.expires = until;
  v.remaining = std::max(std::chrono::ceil<milliseconds>(until - now), milliseconds{1});
  return v;
}

acquire_refused refusal_for_delay(std::uint64_t token, time_point until, time_point now) {
  auto v = delay_view(token, until, now);
  const auto remaining = v.remaining;
  return acquire_refused{std::move(v), remaining};
}

// When the lock-delay after a lease that ended at `ended` is over.
time_point delay_end(const lease_record& r, time_point ended) {
  return deadline_after(ended, r.lock_delay());
}
}  // namespace detail
using detail::delay_end;
using detail::delay_view;
using detail::refusal_for_delay;
using detail::view_of;

acquire_result lock_table::acquire(std::string_view key, std::string_view owner, milliseconds ttl,
                                   time_point now, std::string_view client, std::string_view value,
                                   milliseconds lock_delay) {
  std::vector<expired_lock> retired;
  std::vector<ended_delay> ended;
  if (!permits_.empty() && permits_.find(key)) {
    // The key had more than one permit: a plain lock is a key of 1 permit (docs/protocol.md, "semaphores").
    if (auto refused = count_refusal(key, 1, now)) return std::move(*refused);
    retired = retire_count(key, 1, now, ended);
  }
  if (!delays_.empty()) {
    if (auto d = delays_.find(key); d != delays_.end()) {
      // The former holder's owner is refused too: the same owner string is not proof that the process
      // whose writes the delay waits for has stopped (docs/design.md, "Lock-delay").
      if (now < d->second.until) return refusal_for_delay(d->second.token, d->second.until, now);
      erase_delay(d);  // over: the grant's own record supersedes it in the log
    }
  }
  auto it = leases_.find(key);
  std::uint64_t replaced = 0;
  if (it != leases_.end()) {
    lease_record& r = it->second;
    if (!expired(r, now) && !held_by(r, owner, client)) return acquire_refused{view_of(r, now)};
    // Expired but not swept yet: its lock-delay runs from its expiry all the same.
    if (expired(r, now) && r.lock_delay() > milliseconds{0} && now < delay_end(r, r.expires))
      return refusal_for_delay(r.token, delay_end(r, r.expires), now);
    // Expired, or the same owner acquiring again (a retry after a lost reply): supersede with a new token.
    // The same owner's unexpired lease is never shortened by it (docs/design.md, "No request shortens a
    // lease"): the request may be a late copy of an acquire sent before a renew that raised the TTL, and
    // the holder of the superseded token counts on that TTL until its next renew tells it otherwise.
    const bool live = !expired(r, now) && !BATON_PLANTED(shorten_lease);
    replaced = r.token;
    if (r.client() != client) {
      count(r.client(), -1);
      count(client, +1);
    }
    r.owner.assign(owner);
    r.set_client(client);
    r.token = ++last_token_;
    set_expires(*it, live ? std::max(r.expires, deadline_after(now, ttl)) : deadline_after(now, ttl));
    r.set_value(value);
    r.set_lock_delay(live ? std::max(r.lock_delay(), lock_delay) : lock_delay);
    r.restore_ttl = live ? std::max(r.restore_ttl, ttl) : ttl;
    r.log_seq = 0;
    note_leased(*it, replaced);
    return acquire_granted{r.token, replaced, r.restore_ttl,      r.lock_delay(),
                           1,       0,        std::move(retired), std::move(ended)};
  }
  std::uint64_t token = ++last_token_;
  count(client, +1);
  auto added = leases_.try_emplace(std::string(key)).first;
  lease_record& r = added->second;
  r.owner.assign(owner);
  r.set_client(client);
  r.set_value(value);
  r.set_lock_delay(lock_delay);
  r.token = token;
  r.expires = deadline_after(now, ttl);
  r.restore_ttl = ttl;
  expiry_.insert(*added);
  note_leased(*added, 0);
  return acquire_granted{token, 0, ttl, r.lock_delay(), 1, 0, std::move(retired), std::move(ended)};
}

lease_entry* lock_table::held_lease(std::string_view key, std::string_view owner, std::uint64_t token,
                                    time_point now, std::string_view client, lost_reason& why) {
  if (!permits_.empty())
    if (const auto* pe = permits_of(key, now)) return held_permit(key, *pe, owner, token, now, client, why);
  auto it = leases_.find(key);
  // In the protocol's order (docs/protocol.md, "renew"): an expired lease is an absent one, whoever sends.
  if (it == leases_.end() || expired(it->second, now))
    why = lost_reason::not_held;
  else if (!held_by(it->second, owner, client))
    why = lost_reason::owner_mismatch;
  else if (it->second.token != token)
    why = lost_reason::token_mismatch;
  else
    return &*it;
  why = refine(key, token, why);
  // A permit broken when it was its key's last one: the index has no entry for the key any more, so its
  // renew lands here, and the break is remembered under the permit's name.
  if (why != lost_reason::broken && !broken_.empty()) why = refine(broken_permit_key(key, token), token, why);
  return nullptr;
}

lost_reason lock_table::refine(std::string_view key, std::uint64_t token, lost_reason why) const {
  if (broken_.empty()) return why;
  auto it = broken_.find(key);
  return it != broken_.end() && it->second == token ? lost_reason::broken : why;
}

renew_result lock_table::renew(std::string_view key, std::string_view owner, std::uint64_t token,
                               milliseconds ttl, time_point now, std::string_view client) {
  lost_reason why{};
  lease_entry* held = held_lease(key, owner, token, now, client, why);
  if (!held) return renew_refused{why};
  lease_record& r = held->second;
  // Never earlier than it was (docs/design.md, "No request shortens a lease"): a delayed copy of an
  // earlier renew with a shorter TTL may arrive after the renew that raised it was answered.
  set_expires(*held, BATON_PLANTED(shorten_lease) ? deadline_after(now, ttl)
                                                  : std::max(r.expires, deadline_after(now, ttl)));
  bool grew = ttl > r.restore_ttl;
  if (grew) r.restore_ttl = ttl;
  const auto p = parse_permit_key(held->first);
  return renew_ok{grew, r.log_seq, p ? p->permits : 1, p ? p->slot : 0};
}

proclaim_result lock_table::proclaim(std::string_view key, std::string_view owner, std::uint64_t token,
                                     std::string_view value, time_point now, std::string_view client) {
  lost_reason why{};
  lease_entry* held = held_lease(key, owner, token, now, client, why);
  if (!held) return renew_refused{why};
  held->second.set_value(value);
  const auto p = parse_permit_key(held->first);
  return proclaim_ok{held->second.restore_ttl, p ? p->permits : 1, p ? p->slot : 0};
}

record_write_result lock_table::write_record(std::string_view key, std::string_view owner,
                                             std::uint64_t token, std::string_view value, time_point now,
                                             std::string_view client) {
  lost_reason why{};
  if (!held_lease(key, owner, token, now, client, why)) return renew_refused{why};
  auto it = records_.find(key);
  if (it != records_.end() && it->second.token > token) return record_stale{it->second.token};
  if (it == records_.end()) {
    if (records_.size() >= max_records_) return record_limit_reached{max_records_};
    it = records_.try_emplace(std::string(key)).first;
  }
  lock_record& r = it->second;
  r.value.assign(value);
  r.owner.assign(owner);
  r.client.assign(client);
  r.token = token;
  ++r.version;
  return record_written{token, r.version};
}

const lock_record* lock_table::find_record(std::string_view key) const {
  auto it = records_.find(key);
  return it == records_.end() ? nullptr : &it->second;
}

release_result lock_table::release(std::string_view key, std::string_view owner, std::uint64_t token,
                                   time_point now, std::string_view client) {
  auto it = leases_.find(key);
  if (!permits_.empty() && (it == leases_.end() || expired(it->second, now)))
    if (const auto* pe = permits_of(key, now)) {
      // A permit, named by its token: released by its holder, already free when no lease of the key has
      // the token or its lease expired (then removed here, as a plain lock's), not_owner otherwise.
      auto slot = pe->by_token.find(token);
      if (slot == pe->by_token.end()) return {release_outcome::already_free, 0};
      const std::uint32_t permits = pe->permits, s = slot->second;
      it = leases_.find(pe->slots.at(s)->first);
      lease_record& r = it->second;
      if (expired(r, now)) {
        erase_ended(it, r.expires, now);
        return {release_outcome::already_free, token, permits, s};
      }
      if (!held_by(r, owner, client)) return {release_outcome::not_owner, 0};
      erase(it);
      return {release_outcome::released, token, permits, s};
    }
  if (it == leases_.end()) return {release_outcome::already_free, 0};
  lease_record& r = it->second;
  if (expired(r, now)) {
    // Expired counts as free whoever held it, exactly as after the sweep; drop the record now. It ended by
    // expiry, not by this release: its lock-delay, if any, runs on.
    std::uint64_t removed = r.token;
    erase_ended(it, r.expires, now);
    return {release_outcome::already_free, removed};
  }
  if (!held_by(r, owner, client) || r.token != token) return {release_outcome::not_owner, 0};
  std::uint64_t removed = r.token;
  erase(it);
  return {release_outcome::released, removed};
}

list_page lock_table::list(std::string_view prefix, std::string_view after, std::size_t limit,
                           time_point now) const {
  limit = std::max<std::size_t>(limit, 1);
  // A found key: its unexpired lease, or the lease (swept: the delay) its lock-delay follows.
  // A permit is found under its key (not its table key), with its slot: a key's permits sort together in
  // slot order, and a page never splits them (the cursor `after` is a key).
  struct found_key {
    std::string_view key;
    const lease_record* lease = nullptr;
    std::uint64_t token = 0;
    time_point delayed_until{};
    std::uint32_t permits = 0;
    std::uint32_t slot = 0;
  };
  std::vector<found_key> found;
  const auto wanted = [&](std::string_view key) { return key.starts_with(prefix) && key > after; };
  for (const auto& [key, r] : leases_) {
    if (!wanted(user_key(key))) continue;
    if (auto p = parse_permit_key(key)) {
      // A slot in lock-delay is not listed: the listing shows a key of permits by its holders.
      if (!expired(r, now)) found.push_back({p->key, &r, 0, {}, p->permits, p->slot});
    } else if (!expired(r, now)) {
      found.push_back({key, &r});
    } else if (r.lock_delay() > milliseconds{0} && now < delay_end(r, r.expires)) {
      found.push_back({key, nullptr, r.token, delay_end(r, r.expires)});
    }
  }
  for (const auto& [key, d] : delays_)
    if (key.find('\0') == std::string::npos && wanted(key) && now < d.until)
      found.push_back({key, nullptr, d.token, d.until});
  const auto by_key = [](const found_key& a, const found_key& b) {
    return a.key != b.key ? a.key < b.key : a.slot < b.slot;
  };
  list_page page;
  auto shown = std::min(found.size(), limit);
  std::partial_sort(found.begin(), found.begin() + static_cast<std::ptrdiff_t>(shown), found.end(), by_key);
  if (shown > 0 && shown < found.size() && found[shown - 1].permits > 0) {
    // The rest of the last key's permits join the page.
    const std::string_view last = found[shown - 1].key;
    auto rest = std::partition(found.begin() + static_cast<std::ptrdiff_t>(shown), found.end(),
                               [&](const found_key& f) { return f.key == last; });
    std::sort(found.begin() + static_cast<std::ptrdiff_t>(shown), rest, by_key);
    shown = static_cast<std::size_t>(rest - found.begin());
  }
  page.more = found.size() > shown;
  page.leases.reserve(shown);
  for (std::size_t i = 0; i < shown; ++i) {
    const auto& f = found[i];
    if (f.lease) {
      auto v = view_of(*f.lease, now);
      v.permits = f.permits;
      v.slot = f.slot;
      page.leases.push_back({std::string(f.key), std::move(v)});
    } else {
      auto v = delay_view(f.token, f.delayed_until, now);
      const auto remaining = v.remaining;
      page.leases.push_back({std::string(f.key), std::move(v), 0, remaining});
    }
  }
  return page;
}

break_result lock_table::break_lease(std::string_view key, std::optional<std::uint64_t> token,
                                     time_point now) {
  auto it = leases_.find(key);
  lease_broken out;
  if (!permits_.empty() && (it == leases_.end() || expired(it->second, now)))
    if (const auto* pe = permits_of(key, now)) {
      // One permit, named by its token: the others are untouched (docs/protocol.md, "semaphores").
      auto v = permits_view(*pe, now);
      if (v.token == 0) return break_not_held{};
      if (!token) return break_needs_token{pe->permits};
      auto slot = pe->by_token.find(*token);
      const lease_entry* e = slot == pe->by_token.end() ? nullptr : pe->slots.at(slot->second);
      if (!e || expired(e->second, now)) return break_token_mismatch{std::move(v)};
      out.lease = view_of(e->second, now);
      out.lease.permits = pe->permits;
      out.lease.slot = slot->second;
      remember_broken(broken_permit_key(key, *token), *token);
      erase_ended(leases_.find(e->first), now, now);
      return out;
    }
  if (it == leases_.end() || expired(it->second, now)) return break_not_held{};
  if (token && it->second.token != *token) return break_token_mismatch{view_of(it->second, now)};
  out.lease = view_of(it->second, now);
  remember_broken(it->first, it->second.token);
  // A break ends the lease as an expiry would: its holder may still be writing, so its lock-delay runs
  // from now (docs/design.md, "Lock-delay").
  erase_ended(it, now, now);  // out of the expiry index too, and its client's count
  return out;
}

void lock_table::remember_broken(std::string_view key, std::uint64_t token) {
  auto [b, added] = broken_.insert_or_assign(std::string(key), token);
  if (added) {
    broken_order_.push_back(b->first);
    if (broken_order_.size() > broken_memory) {
      broken_.erase(broken_order_.front());
      broken_order_.pop_front();
    }
  }
}

void lock_table::mark_logged(std::string_view key, std::uint64_t token, std::uint64_t seq) {
  auto it = leases_.find(key);
  if (it != leases_.end() && it->second.token == token) it->second.log_seq = seq;
}

std::optional<lease_view> lock_table::get(std::string_view key, time_point now) const {
  auto it = leases_.find(key);
  if (it == leases_.end() || expired(it->second, now)) {
    if (const auto* pe = permits_.empty() ? nullptr : permits_of(key, now)) {
      auto v = permits_view(*pe, now);
      if (v.token != 0) return v;
    }
    return std::nullopt;
  }
  return view_of(it->second, now);
}

std::optional<key_delay> lock_table::delayed(std::string_view key, time_point now) const {
  if (!delays_.empty())
    if (auto d = delays_.find(key); d != delays_.end() && now < d->second.until) return d->second;
  auto it = leases_.find(key);
  if (it == leases_.end() || !expired(it->second, now) || it->second.lock_delay() <= milliseconds{0})
    return std::nullopt;
  const auto& r = it->second;
  const auto until = delay_end(r, r.expires);
  return now < until ? std::optional(key_delay{r.token, r.lock_delay(), until}) : std::nullopt;
}

std::optional<acquire_refused> lock_table::delay_refusal(std::string_view key, time_point now) const {
  auto d = delayed(key, now);
  if (!d) return std::nullopt;
  return refusal_for_delay(d->token, d->until, now);
}

std::vector<ended_delay> lock_table::end_delays(time_point now, std::size_t max_keys) {
  std::vector<ended_delay> out;
  while (out.size() < max_keys && !delay_ends_.empty() && delay_ends_.begin()->first <= now) {
    auto e = delay_ends_.begin();
    // A stale entry: the key was granted since, or began a later delay.
    if (auto d = delays_.find(e->second); d != delays_.end() && d->second.until == e->first) {
      out.push_back({e->second, d->second.token});
      erase_delay(d);
    }
    delay_ends_.erase(e);
  }
  return out;
}

std::vector<expired_lock> lock_table::expire(time_point now) {
  auto out = expire_some(now, SIZE_MAX);
  // The second `now` falls in: only some of its leases are due.
  for (lease_entry* e = expiry_.current_slot(now); e;) {
    lease_entry* next = e->second.expiry_next;
    if (expired(e->second, now)) {
      out.push_back({e->first, e->second.token});
      erase_ended(leases_.find(e->first), e->second.expires, now);
    }
    e = next;
  }
  return out;
}

std::vector<expired_lock> lock_table::expire_some(time_point now, std::size_t max_leases) {
  std::vector<expired_lock> out;
  while (out.size() < max_leases) {
    lease_entry* e = expiry_.first_due(now);
    if (!e) break;
    out.push_back({e->first, e->second.token});
    erase_ended(leases_.find(e->first), e->second.expires, now);
  }
  return out;
}

std::optional<expired_lock> lock_table::expire_key(std::string_view key, time_point now) {
  auto it = leases_.find(key);
  if (it == leases_.end() || !expired(it->second, now)) return std::nullopt;
  expired_lock e{it->first, it->second.token};
  erase_ended(it, it->second.expires, now);
  return e;
}

void lock_table::restore(std::string key, std::string owner, std::uint64_t token, milliseconds ttl,
                         time_point now, std::string client, std::string value) {
  observe_token(token);
  if (!settle_count(key, token)) return;
  if (!delays_.empty())
    if (auto d = delays_.find(key); d != delays_.end() && d->second.token < token) erase_delay(d);
  auto [it, added] = leases_.try_emplace(std::move(key));
  auto& r = it->second;
  // A later record for the same key always carries a larger token; never let an older one win.
  if (r.token > token) return;
  // A new lease's lock-delay comes in a record of its own after this one; a proclaim's (the same token)
  // keeps the lease's.
  if (r.token != token) r.set_lock_delay(milliseconds{0});
  if (!added) count(r.client(), -1);
  count(client, +1);
  const std::uint64_t old_token = added ? 0 : r.token;
  r.owner = std::move(owner);
  r.set_client(client);
  r.token = token;
  note_leased(*it, old_token);
  r.set_value(value);
  r.restore_ttl = ttl;
  r.log_seq = 0;
  if (added) {
    r.expires = deadline_after(now, ttl);
    expiry_.insert(*it);
  } else {
    set_expires(*it, deadline_after(now, ttl));
  }
}

void lock_table::restore_record(std::string key, lock_record r) {
  observe_token(r.token);
  auto [it, added] = records_.try_emplace(std::move(key));
  if (!added && it->second.version >= r.version) return;
  it->second = std::move(r);
}

void lock_table::forget(std::string_view key, std::uint64_t token, bool expired, time_point now) {
  observe_token(token);
  auto it = leases_.find(key);
  if (it == leases_.end() || it->second.token != token) return;
  if (expired)
    erase_ended(it, now, now - milliseconds{1});  // the delay in full from now, even a 1 ms one
  else
    erase(it);
}

void lock_table::restore_lock_delay(std::string_view key, std::uint64_t token, milliseconds delay,
                                    time_point now) {
  observe_token(token);
  if (delay <= milliseconds{0}) {
    if (auto d = delays_.find(key); d != delays_.end() && d->second.token == token) erase_delay(d);
    return;
  }
  if (!settle_count(key, token)) return;
  auto it = leases_.find(key);
  if (it != leases_.end() && it->second.token == token) {
    it->second.set_lock_delay(delay);
    return;
  }
  // The lease `token` ended (a break, or a snapshot's key in lock-delay): a later lease or delay wins.
  if (it != leases_.end()) {
    if (it->second.token > token) return;
    erase(it);
  }
  if (auto d = delays_.find(key); d != delays_.end() && d->second.token > token) return;
  begin_delay(key, token, delay, deadline_after(now, delay));
}

std::size_t lock_table::size_of(std::string_view client) const {
  auto it = per_client_.find(client);
  return it == per_client_.end() ? 0 : it->second;
}

void lock_table::set_expires(lease_entry& e, time_point expires) {
  const time_point was = e.second.expires;
  e.second.expires = expires;
  expiry_.move(e, was);
}

void lock_table::erase_ended(map_type::iterator it, time_point from, time_point now) {
  const milliseconds delay = it->second.lock_delay();
  if (delay > milliseconds{0}) {
    const time_point until = deadline_after(from, delay);
    if (now < until) begin_delay(it->first, it->second.token, delay, until);
  }
  erase(it);
}

void lock_table::begin_delay(std::string_view key, std::uint64_t token, milliseconds delay,
                             time_point until) {
  auto [d, added] = delays_.try_emplace(std::string(key));
  d->second = key_delay{token, delay, until};
  delay_ends_.emplace(until, d->first);
  if (added) note_delay(key, +1);
}

void lock_table::erase_delay(delay_map::iterator d) {
  note_delay(d->first, -1);
  delays_.erase(d);
}

void lock_table::erase(map_type::iterator it) {
  note_unleased(*it);
  expiry_.erase(*it);
  count(it->second.client(), -1);
  leases_.erase(it);
}

void lock_table::count(std::string_view client, int delta) {
  if (delta > 0) {
    auto it = per_client_.find(client);
    if (it == per_client_.end())
      per_client_.emplace(std::string(client), 1);
    else
      ++it->second;
    return;
  }
  auto it = per_client_.find(client);
  if (it != per_client_.end() && --it->second == 0) per_client_.erase(it);
}

void lock_table::raise_restore_ttl(std::string_view key, std::uint64_t token, milliseconds ttl,
                                   time_point now) {
  auto it = leases_.find(key);
  if (it == leases_.end() || it->second.token != token || ttl <= it->second.restore_ttl) return;
  it->second.restore_ttl = ttl;
  set_expires(*it, std::max(it->second.expires, deadline_after(now, ttl)));
}

void lock_table::observe_token(std::uint64_t token) {
  last_token_ = std::max(last_token_, token);
}

std::vector<snapshot_entry> lock_table::snapshot() const {
  std::vector<snapshot_entry> out;
  out.reserve(leases_.size());
  for (const auto& [key, r] : leases_)
    out.push_back({key, r.owner, r.token, r.restore_ttl, std::string(r.client()), std::string(r.value())});
  return out;
}

std::vector<record_entry> lock_table::records_snapshot() const {
  std::vector<record_entry> out;
  out.reserve(records_.size());
  for (const auto& [key, r] : records_)
    out.push_back({key, r});
  return out;
}

}  // namespace baton::server
