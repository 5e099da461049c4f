// SPDX-License-Identifier: Apache-2.0
#include "item_store.hpp"

namespace fenced_store {

put_result item_store::put(std::string_view resource, const std::string& key, std::string value,
                           baton::fence f) {
  const std::uint64_t token = f.token;
  // A fence that never rejects: the token is above every token there can be, and it records no count.
  const baton::fence checked = unsafe_skip_token_check_ ? baton::fence{UINT64_MAX, f.slot, 0} : f;
  auto r = fence_.apply(resource, checked, [&] {
    std::uint64_t version = 0;
    {
      // Several resources may guard the same key, so the items need their own lock besides the fence's.
      std::lock_guard lock(items_mutex_);
      item& it = items_[key];
      it.value = std::move(value);
      it.token = token;
      version = ++it.version;
    }
    record(key, resource, f, true, token);
    return version;
  });
  if (r.applied()) return put_result{true, token, *r.value, false};
  record(key, resource, f, false, r.highest_token);
  // The slot's own fence had nothing newer: a newer count shut the slot (for the message only).
  const std::uint64_t slot_highest = fence_.highest(
      f.slot == 0 ? std::string(resource) : baton::fence_guard::slot_resource(resource, f.slot));
  return put_result{false, r.highest_token, 0, token >= slot_highest};
}

std::optional<item> item_store::get(const std::string& key) const {
  std::lock_guard lock(items_mutex_);
  auto it = items_.find(key);
  if (it == items_.end()) return std::nullopt;
  return it->second;
}

std::vector<history_entry> item_store::history(std::uint64_t& dropped) const {
  std::lock_guard lock(history_mutex_);
  dropped = history_dropped_;
  return {history_.begin(), history_.end()};
}

void item_store::record(std::string_view key, std::string_view resource, baton::fence f, bool accepted,
                        std::uint64_t highest) {
  std::lock_guard lock(history_mutex_);
  // Taken under the history lock, so timestamps never go backwards along the history.
  auto now = std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::steady_clock::now().time_since_epoch());
  history_.push_back(history_entry{now.count(), std::string(key), std::string(resource), f.token, accepted,
                                   highest, f.slot, f.permits});
  while (history_.size() > history_limit_) {
    history_.pop_front();
    ++history_dropped_;
  }
}

}  // namespace fenced_store
