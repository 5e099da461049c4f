// SPDX-License-Identifier: Apache-2.0
// The lock table's counting semaphores (docs/protocol.md, "semaphores"; docs/design.md, "Semaphores"): a
// key of N > 1 permits is N slots, each an ordinary lease of the table under its own table key
// (permit_index.hpp). Everything here picks the slot a request means, then lets the lease code of
// lock_table.cpp do the rest, so a permit expires, renews, ends in lock-delay and is restored as a lock is.
#include "lock_table.hpp"
#include "planted_defects.hpp"

#include <algorithm>
#include <cassert>

namespace baton::server {

using detail::delay_end;
using detail::refusal_for_delay;
using detail::view_of;

void lock_table::note_leased(lease_entry& e, std::uint64_t old_token) {
  // The index refuses a second count for a key; the table never offers one (count_refusal and retire_count
  // at a grant, settle_count at recovery).
  if (auto p = parse_permit_key(e.first)) {
    [[maybe_unused]] const bool filed = permits_.leased(*p, e, e.second.token, old_token);
    assert(filed);
  }
}

void lock_table::note_unleased(const lease_entry& e) {
  if (auto p = parse_permit_key(e.first)) permits_.unleased(*p, e.second.token);
}

void lock_table::note_delay(std::string_view table_key, int delta) {
  if (auto p = parse_permit_key(table_key)) {
    [[maybe_unused]] const bool counted = permits_.delay_changed(*p, delta);
    assert(counted);
  }
}

const permit_index::entry* lock_table::permits_of(std::string_view key, time_point now) const {
  if (auto it = leases_.find(key); it != leases_.end() && !expired(it->second, now)) return nullptr;
  return permits_.find(key);
}

lease_view lock_table::permits_view(const permit_index::entry& pe, time_point now,
                                    std::pair<std::uint32_t, const lease_entry*>* earliest) const {
  lease_view out;
  for (const auto& [slot, e] : pe.slots) {
    const lease_record& r = e->second;
    if (expired(r, now)) continue;
    if (earliest && (!earliest->second || r.expires < earliest->second->second.expires))
      *earliest = {slot, e};
    // Only the first ones are copied: the count alone goes on (a pass over the held slots, no copy).
    if (++out.holders_total > max_holders_shown) continue;
    if (out.holders.empty()) {
      out = view_of(r, now);
      out.slot = slot;
      out.holders_total = 1;
    }
    auto v = view_of(r, now);
    out.holders.push_back(
        {slot, std::move(v.owner), std::move(v.client), v.token, v.expires, v.remaining, std::move(v.value)});
  }
  out.permits = pe.permits;
  return out;
}

std::optional<key_delay> lock_table::slot_delay(std::string_view key, const permit_index::entry& pe,
                                                std::uint32_t slot, const lease_entry* e,
                                                time_point now) const {
  if (e) {
    // An expired lease not swept yet: its lock-delay runs from its expiry (a swept one's is in delays_).
    const lease_record& r = e->second;
    if (r.lock_delay() <= milliseconds{0}) return std::nullopt;
    const auto until = delay_end(r, r.expires);
    return now < until ? std::optional(key_delay{r.token, r.lock_delay(), until}) : std::nullopt;
  }
  if (!pe.delayed.contains(slot)) return std::nullopt;
  auto d = delays_.find(permit_key(key, pe.permits, slot));
  return d != delays_.end() && now < d->second.until ? std::optional(d->second) : std::nullopt;
}

std::optional<std::uint32_t> lock_table::free_slot(std::string_view key, const permit_index::entry* pe,
                                                   std::uint32_t permits, time_point now,
                                                   std::optional<key_delay>& shortest) const {
  if (!pe) return 0;
  auto next = pe->slots.begin();
  const std::uint32_t slots = BATON_PLANTED(permit_past_count) ? permits + 1 : permits;
  for (std::uint32_t s = 0; s < slots; ++s) {
    const lease_entry* e = nullptr;
    if (next != pe->slots.end() && next->first == s) e = (next++)->second;
    if (e && !expired(e->second, now)) continue;
    // A slot whose permit ended by expiry or a break is in that permit's lock-delay: per slot, since
    // a resource fences a permit per (key, slot) (docs/design.md, "Semaphores").
    if (auto d = slot_delay(key, *pe, s, e, now)) {
      if (!shortest || d->until < shortest->until) shortest = d;
      continue;
    }
    return s;
  }
  return std::nullopt;
}

std::optional<acquire_result> lock_table::count_refusal(std::string_view key, std::uint32_t permits,
                                                        time_point now) const {
  if (permits > 1) {
    // A key held as a plain lock is a key of 1 permit, and its lock-delay is every slot's.
    if (auto it = leases_.find(key); it != leases_.end() && !expired(it->second, now))
      return acquire_mismatch{1};
    if (auto d = delayed(key, now)) return refusal_for_delay(d->token, d->until, now);
  }
  const auto* pe = permits_.find(key);
  if (!pe || pe->permits == permits) return std::nullopt;
  // Another count. While one of its permits is held, the count is fixed: its holders are fenced per
  // slot of that count. Once none is, every slot's lock-delay must be over first: a slot of the new
  // count is fenced on the same (key, slot) as the old count's.
  std::optional<key_delay> longest;
  const auto later = [&](std::optional<key_delay> d) {
    if (d && (!longest || d->until > longest->until)) longest = d;
  };
  for (const auto& [slot, e] : pe->slots) {
    if (!expired(e->second, now)) return acquire_mismatch{pe->permits};
    later(slot_delay(key, *pe, slot, e, now));
  }
  for (const std::uint32_t s : pe->delayed)
    if (!pe->slots.contains(s)) later(slot_delay(key, *pe, s, nullptr, now));
  if (longest) {
    auto refused = refusal_for_delay(longest->token, longest->until, now);
    refused.holder.permits = pe->permits;  // the count whose slot is in lock-delay
    return refused;
  }
  return std::nullopt;
}

std::vector<expired_lock> lock_table::retire_count(std::string_view key, std::uint32_t permits,
                                                   time_point now, std::vector<ended_delay>& ended) {
  // Every lease and delay of another count goes, and each delay's end is reported to be logged: a lock-delay
  // that ends unlogged is begun again by a replay (from the expiry it follows, in full), and a replay would
  // then find the former count's delay beside the new count's leases (docs/design.md, "Semaphores").
  std::vector<expired_lock> out;
  std::vector<std::string> leases;
  const auto end_delay = [&](delay_map::iterator d) {
    ended.push_back({d->first, d->second.token});
    erase_delay(d);
  };
  if (permits > 1) {
    // A plain lock is a key of 1 permit: its expired lease and its delay, over (count_refusal), are the
    // former count's.
    if (auto it = leases_.find(key); it != leases_.end()) leases.push_back(it->first);
    if (!delays_.empty())
      if (auto d = delays_.find(key); d != delays_.end()) end_delay(d);
  }
  if (const auto* pe = permits_.find(key); pe && pe->permits != permits) {
    const std::uint32_t former = pe->permits;
    for (const auto& [slot, e] : pe->slots)
      leases.push_back(e->first);
    const std::vector<std::uint32_t> delayed(pe->delayed.begin(), pe->delayed.end());
    for (const std::uint32_t s : delayed)
      if (auto d = delays_.find(permit_key(key, former, s)); d != delays_.end()) end_delay(d);
  }
  for (const auto& k : leases) {
    auto it = leases_.find(k);
    const bool delayed = it->second.lock_delay() > milliseconds{0};
    out.push_back({k, it->second.token});
    erase_ended(it, it->second.expires, now);  // expired and out of lock-delay (count_refusal): no delay
    // Its expire record, replayed, begins its delay again: the delay's end is logged after it.
    if (delayed) ended.push_back({k, out.back().token});
  }
  return out;
}

bool lock_table::settle_count(std::string_view table_key, std::uint64_t token) {
  const auto p = parse_permit_key(table_key);
  if (!p && permits_.empty()) return true;  // a plain lock, and no key of permits: the common case
  const std::string_view key = p ? p->key : table_key;
  const std::uint32_t permits = p ? p->permits : 1;
  // The table keys of `key` under another count than `permits`.
  std::vector<std::string> leases, delays;
  if (permits > 1) {
    if (auto it = leases_.find(key); it != leases_.end()) leases.push_back(it->first);
    if (auto d = delays_.find(key); d != delays_.end()) delays.push_back(d->first);
  }
  if (const auto* pe = permits_.find(key); pe && pe->permits != permits) {
    for (const auto& [slot, e] : pe->slots)
      leases.push_back(e->first);
    for (const std::uint32_t s : pe->delayed)
      delays.push_back(permit_key(key, pe->permits, s));
  }
  if (leases.empty() && delays.empty()) return true;
  // Tokens follow the log's order: the larger token is the later state of the key, the other its leftover.
  for (const auto& k : leases)
    if (leases_.find(k)->second.token > token) return false;
  for (const auto& k : delays)
    if (delays_.find(k)->second.token > token) return false;
  for (const auto& k : leases)
    erase(leases_.find(k));
  for (const auto& k : delays)
    erase_delay(delays_.find(k));
  return true;
}

acquire_refused lock_table::full_refusal(const permit_index::entry& pe,
                                         const std::optional<key_delay>& shortest, time_point now) const {
  // The top-level holder is the permit that expires first, so a client that only knows `held` waits no
  // longer than it must.
  std::pair<std::uint32_t, const lease_entry*> first{0, nullptr};
  auto v = permits_view(pe, now, &first);
  if (v.token == 0) {
    // Every slot is in lock-delay.
    auto refused = refusal_for_delay(shortest->token, shortest->until, now);
    refused.holder.permits = pe.permits;
    return refused;
  }
  lease_view top = view_of(first.second->second, now);
  top.slot = first.first;
  top.permits = pe.permits;
  top.holders = std::move(v.holders);
  top.holders_total = v.holders_total;
  milliseconds delay_left{0};
  if (shortest)
    delay_left = std::max(std::chrono::ceil<milliseconds>(shortest->until - now), milliseconds{1});
  return acquire_refused{std::move(top), delay_left};
}

acquire_result lock_table::acquire_permit(std::uint32_t permits, std::string_view key, std::string_view owner,
                                          milliseconds ttl, time_point now, std::string_view client,
                                          std::string_view value, milliseconds lock_delay) {
  if (permits <= 1) return acquire(key, owner, ttl, now, client, value, lock_delay);
  if (auto refused = count_refusal(key, permits, now)) return std::move(*refused);
  std::vector<ended_delay> ended;
  auto retired = retire_count(key, permits, now, ended);
  const auto* pe = permits_.find(key);
  std::optional<std::uint32_t> slot;
  // The same holder again keeps its slot, with a new token (acquire supersedes it as a lock's).
  if (pe)
    for (const auto& [s, e] : pe->slots)
      if (!expired(e->second, now) && held_by(e->second, owner, client)) {
        slot = s;
        break;
      }
  std::optional<key_delay> shortest;
  if (!slot) slot = free_slot(key, pe, permits, now, shortest);
  if (!slot) return full_refusal(*pe, shortest, now);
  auto result = acquire(permit_key(key, permits, *slot), owner, ttl, now, client, value, lock_delay);
  if (auto* g = std::get_if<acquire_granted>(&result)) {
    g->permits = permits;
    g->slot = *slot;
    g->retired = std::move(retired);
    g->ended_delays = std::move(ended);
  }
  return result;
}

std::optional<acquire_result> lock_table::refusal(std::string_view key, std::uint32_t permits,
                                                  time_point now) const {
  if (auto refused = count_refusal(key, permits, now)) return refused;
  if (permits <= 1) {
    if (auto h = get(key, now)) return acquire_refused{std::move(*h)};
    if (auto d = delay_refusal(key, now)) return std::move(*d);
    return std::nullopt;
  }
  const auto* pe = permits_.find(key);
  if (!pe || pe->permits != permits) return std::nullopt;  // the former count is retired at the grant
  std::optional<key_delay> shortest;
  if (free_slot(key, pe, permits, now, shortest)) return std::nullopt;
  return full_refusal(*pe, shortest, now);
}

bool lock_table::permit_held(std::string_view key, std::uint64_t token, time_point now) const {
  const auto* pe = permits_.find(key);
  if (!pe) return false;
  auto s = pe->by_token.find(token);
  return s != pe->by_token.end() && !expired(pe->slots.at(s->second)->second, now);
}

bool lock_table::holds(std::string_view key, std::string_view owner, std::string_view client,
                       time_point now) const {
  if (auto it = leases_.find(key); it != leases_.end() && !expired(it->second, now))
    return held_by(it->second, owner, client);
  if (const auto* pe = permits_.find(key))
    for (const auto& [slot, e] : pe->slots)
      if (!expired(e->second, now) && held_by(e->second, owner, client)) return true;
  return false;
}

time_point lock_table::next_change(std::string_view key, time_point now) const {
  time_point next = time_point::max();
  if (auto it = leases_.find(key); it != leases_.end() && !expired(it->second, now))
    next = it->second.expires;
  else if (auto d = delayed(key, now))
    next = d->until;
  if (const auto* pe = permits_.find(key)) {
    for (const auto& [slot, e] : pe->slots)
      if (!expired(e->second, now))
        next = std::min(next, e->second.expires);
      else if (auto d = slot_delay(key, *pe, slot, e, now))
        next = std::min(next, d->until);
    for (const std::uint32_t s : pe->delayed)
      if (!pe->slots.contains(s))
        if (auto d = slot_delay(key, *pe, s, nullptr, now)) next = std::min(next, d->until);
  }
  return next;
}

std::optional<key_delay> lock_table::permit_delayed(std::string_view key, std::uint64_t token,
                                                    time_point now) const {
  const auto* pe = permits_.find(key);
  if (!pe) return std::nullopt;
  // Not swept: the expired lease still has the token.
  if (auto s = pe->by_token.find(token); s != pe->by_token.end()) {
    const lease_entry* e = pe->slots.at(s->second);
    return expired(e->second, now) ? slot_delay(key, *pe, s->second, e, now) : std::nullopt;
  }
  for (const std::uint32_t s : pe->delayed)
    if (auto d = slot_delay(key, *pe, s, nullptr, now); d && d->token == token) return d;
  return std::nullopt;
}

std::vector<expired_lock> lock_table::expire_permits(std::string_view key, time_point now) {
  std::vector<expired_lock> out;
  const auto* pe = permits_.find(key);
  if (!pe) return out;
  std::vector<std::string> due;
  for (const auto& [slot, e] : pe->slots)
    if (expired(e->second, now)) due.push_back(e->first);
  for (auto& k : due) {
    auto it = leases_.find(k);
    out.push_back({std::move(k), it->second.token});
    erase_ended(it, it->second.expires, now);
  }
  return out;
}

lease_entry* lock_table::held_permit(std::string_view key, const permit_index::entry& pe,
                                     std::string_view owner, std::uint64_t token, time_point now,
                                     std::string_view client, lost_reason& why) {
  // The order of docs/protocol.md, "semaphores": the token's live permit decides; without one, whether the
  // owner holds another permit of the key.
  why = lost_reason::not_held;
  if (auto s = pe.by_token.find(token); s != pe.by_token.end()) {
    lease_entry* e = pe.slots.at(s->second);
    if (!expired(e->second, now)) {
      if (held_by(e->second, owner, client)) return e;
      why = lost_reason::owner_mismatch;
    }
  }
  if (why == lost_reason::not_held)
    for (const auto& [slot, e] : pe.slots)
      if (!expired(e->second, now) && held_by(e->second, owner, client)) {
        why = lost_reason::token_mismatch;
        break;
      }
  why = refine(broken_permit_key(key, token), token, why);
  return nullptr;
}

}  // namespace baton::server
