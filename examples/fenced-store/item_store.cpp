// SPDX-License-Identifier: Apache-2.0
#include "item_store.hpp"

namespace fenced_store {

put_result item_store::put(std::string_view resource, const std::string& key, std::string value,
                           std::uint64_t token) {
  // A fence that never rejects: the token is above every token there can be.
  const std::uint64_t fence_token = unsafe_skip_token_check_ ? UINT64_MAX : token;
  auto r = fence_.apply(resource, fence_token, [&] {
    std::uint64_t version = 0;
    {
      // Several resources may guard the same key, so the items need their own lock besides the fence's.
      std::lock_guard lock(items_mutex_);
      item& it = items_[key];
      it.value = std::move(value);
      it.token = token;
      version = ++it.version;
    }
    record(key, resource, token, true, token);
    return version;
  });
  if (r.rejected()) record(key, resource, token, false, r.highest_token);
  return put_result{r.applied(), r.applied() ? token : r.highest_token, r.value.value_or(0)};
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

void item_store::record(std::string_view key, std::string_view resource, std::uint64_t token, bool accepted,
                        std::uint64_t highest) {
  std::lock_guard lock(history_mutex_);
  // Taken under the history lock, so timestamps never go backwards along the history.
  auto now = std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::steady_clock::now().time_since_epoch());
  history_.push_back(
      history_entry{now.count(), std::string(key), std::string(resource), token, accepted, highest});
  while (history_.size() > history_limit_) {
    history_.pop_front();
    ++history_dropped_;
  }
}

}  // namespace fenced_store
