// SPDX-License-Identifier: Apache-2.0
#pragma once
// fenced-store's state: key→value items in memory, written only through a fence guard, plus a history of
// every write attempt. No sockets: the HTTP layer (http_api.cpp) decodes requests and calls into this.

#include "baton/fence.hpp"

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace fenced_store {

struct item {
  std::string value;
  std::uint64_t token = 0;    // token of the write that stored this value
  std::uint64_t version = 0;  // number of accepted writes to this key
};

struct put_result {
  bool accepted = false;
  /// The resource's highest accepted token after the attempt (the write's own token when accepted).
  std::uint64_t highest_token = 0;
  /// The item's version after the write; 0 when rejected.
  std::uint64_t version = 0;
  /// Rejected because the write's slot is at or past the count a newer token came with (docs/fencing.md, "A
  /// count that shrinks"), not because its slot saw a newer token.
  bool past_count = false;
};

/// One write attempt, in the order the store decided them.
struct history_entry {
  /// steady_clock (CLOCK_MONOTONIC) time of the decision in µs, comparable with other processes' monotonic
  /// clocks on the same host, so a checker can line it up with client-side timelines.
  std::int64_t ts_us = 0;
  std::string key;
  std::string resource;
  std::uint64_t token = 0;
  bool accepted = false;
  std::uint64_t highest_token = 0;
  std::uint32_t slot = 0;     // a permit's slot (Fencing-Slot), 0 otherwise
  std::uint32_t permits = 0;  // the count it came with (Fencing-Permits), 0 when not given
};

class item_store {
 public:
  /// Keeps at most `history_limit` history entries, dropping the oldest beyond that (0: keep none).
  /// `unsafe_skip_token_check` makes put() accept every write whatever its token: a deliberately broken
  /// resource, used only to show that the chaos checker catches the stale writes it lets through.
  explicit item_store(std::size_t history_limit, bool unsafe_skip_token_check = false)
      : history_limit_(history_limit), unsafe_skip_token_check_(unsafe_skip_token_check) {}

  /// Stores `value` under `key` if `f.token` is not lower than the highest token accepted for `resource`
  /// (for a semaphore's permit, `f.slot` above 0: for that slot of it; and not in a slot at or past a count
  /// a newer token came with: baton::fence_guard::apply(resource, fence, fn)). `f.slot` must be below
  /// `f.permits` when that is not 0 (the HTTP layer checks). The check, the write and the history entry of
  /// an accepted write happen under the fence's lock, so the history lists each resource's accepted writes
  /// in the order they took effect. Thread-safe.
  put_result put(std::string_view resource, const std::string& key, std::string value, baton::fence f);

  /// The item under `key`, if any. Thread-safe.
  std::optional<item> get(const std::string& key) const;

  /// The highest accepted token of every resource written so far. Thread-safe.
  std::map<std::string, std::uint64_t> fences() const { return fence_.snapshot(); }

  /// A copy of the history, oldest first, and how many older entries were dropped. Thread-safe.
  std::vector<history_entry> history(std::uint64_t& dropped) const;

 private:
  void record(std::string_view key, std::string_view resource, baton::fence f, bool accepted,
              std::uint64_t highest);

  baton::fence_guard fence_;
  mutable std::mutex items_mutex_;
  std::unordered_map<std::string, item> items_;
  mutable std::mutex history_mutex_;
  std::deque<history_entry> history_;
  std::size_t history_limit_;
  std::uint64_t history_dropped_ = 0;
  bool unsafe_skip_token_check_;
};

}  // namespace fenced_store
