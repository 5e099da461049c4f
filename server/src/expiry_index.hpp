// SPDX-License-Identifier: Apache-2.0
#pragma once
// The expiry index: the lock table's leases by the second in which they expire, so the expiry sweep visits
// only leases that are due instead of every hash bucket (at a million held leases the bucket walk took half
// of batond's CPU, docs/benchmarks.md "A million held leases").
//
// Slot s holds the entries whose expiry lies in ((s-1) s, s s] of the clock's epoch, each slot an intrusive
// doubly linked list through the entries themselves (no allocation per lease; two pointers in each). A slot
// is due once the clock has passed its end, so every entry it holds is expired; entries of the current
// second wait for the next one. The sweep therefore runs up to a second late, which only keeps memory a
// little longer: the table decides expiry on every access, not through the sweep.
//
// A template over the entry so the index can be tested on its own: `Entry` has `.second.expires` (a
// time_point) and `.second.expiry_prev`, `.second.expiry_next` (Entry*). An entry's expiry may change only
// through move(), and it must leave the index (erase) before it is destroyed. Pure: no clock, no locking.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>

namespace baton::server {

template <class Entry>
class expiry_index {
 public:
  using time_point = std::chrono::steady_clock::time_point;

  /// The slot of an expiry instant: the end of its second, rounded up (no overflow at time_point::max()).
  static std::int64_t slot_of(time_point t) {
    return std::chrono::ceil<std::chrono::seconds>(t.time_since_epoch()).count();
  }

  /// Adds `e` (not in the index) under its current expiry.
  void insert(Entry& e) {
    Entry*& head = heads_[slot_of(e.second.expires)];
    e.second.expiry_prev = nullptr;
    e.second.expiry_next = head;
    if (head) head->second.expiry_prev = &e;
    head = &e;
    ++size_;
  }

  /// Removes `e`, filed under the expiry `filed_at` (its current one, unless it changed since).
  void erase(Entry& e, time_point filed_at) {
    auto& r = e.second;
    if (r.expiry_next) r.expiry_next->second.expiry_prev = r.expiry_prev;
    if (r.expiry_prev) {
      r.expiry_prev->second.expiry_next = r.expiry_next;
    } else {
      auto it = heads_.find(slot_of(filed_at));
      if (r.expiry_next)
        it->second = r.expiry_next;
      else
        heads_.erase(it);
    }
    r.expiry_prev = r.expiry_next = nullptr;
    --size_;
  }
  void erase(Entry& e) { erase(e, e.second.expires); }

  /// Refiles `e` after its expiry changed from `was` to its current one (nothing to do in the same slot).
  void move(Entry& e, time_point was) {
    if (slot_of(was) == slot_of(e.second.expires)) return;
    erase(e, was);
    insert(e);
  }

  /// An entry of the oldest slot that ended at or before `now` (all its entries have expired), or null.
  Entry* first_due(time_point now) const {
    if (heads_.empty()) return nullptr;
    auto it = heads_.begin();
    return it->first <= std::chrono::floor<std::chrono::seconds>(now.time_since_epoch()).count() ? it->second
                                                                                                 : nullptr;
  }

  /// The first entry of the slot `now` falls in (some of its entries may be expired at `now`), or null.
  Entry* current_slot(time_point now) const {
    auto it = heads_.find(slot_of(now));
    return it == heads_.end() ? nullptr : it->second;
  }

  std::size_t size() const { return size_; }
  std::size_t slots() const { return heads_.size(); }

 private:
  std::map<std::int64_t, Entry*> heads_;
  std::size_t size_ = 0;
};

}  // namespace baton::server
