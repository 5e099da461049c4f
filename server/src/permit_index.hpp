// SPDX-License-Identifier: Apache-2.0
#pragma once
// Counting semaphores in the lock table (docs/design.md, "Semaphores"): where a permit's lease lives, and
// the index from a key to its permits.
//
// A key of N > 1 permits has slots 0..N-1. The lease of slot s is an ordinary lease of the table under the
// table key `key NUL N NUL s` (N and s in decimal), which no request can spell: a request's key never holds
// a control character (protocol.cpp). Expiry and its index, renew, restore, snapshots, the log and
// lock-delay therefore treat a permit exactly as a lock, and a restart rebuilds the count N from the keys.
// A plain lock (N = 1) keeps its lease under the key itself, byte for byte as before semaphores.
//
// The index maps a key of N > 1 permits to its slots' leases in the table and their tokens, so that renew,
// release and the other requests that name a permit by (key, token) find it in O(1). Pure: no clock, no
// locking; lock_table keeps it in step with its leases.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

namespace baton::server {

struct lease_record;
using lease_entry = std::pair<const std::string, lease_record>;

/// The table key of slot `slot` of `key` with `permits` permits; `key` itself when `permits` is 1 (a plain
/// lock).
std::string permit_key(std::string_view key, std::uint32_t permits, std::uint32_t slot);

/// The key under which lock_table remembers that the permit `token` of `key` was broken.
std::string broken_permit_key(std::string_view key, std::uint64_t token);

/// A table key of a permit, taken apart.
struct permit_key_parts {
  std::string_view key;
  std::uint32_t permits = 0;
  std::uint32_t slot = 0;
};
/// The parts of `table_key` when it is a permit's (permit_key with permits > 1); nullopt for a plain lock's.
std::optional<permit_key_parts> parse_permit_key(std::string_view table_key);

/// The key a request names for the table key `table_key` (the key itself for a plain lock).
inline std::string_view user_key(std::string_view table_key) {
  return table_key.substr(0, table_key.find('\0'));
}

class permit_index {
 public:
  using time_point = std::chrono::steady_clock::time_point;

  /// A key of more than one permit, while any of its slots has a lease in the table (expired ones until
  /// they are removed) or is in lock-delay.
  struct entry {
    std::uint32_t permits = 0;
    /// Slots with a lease in the table, in slot order.
    std::map<std::uint32_t, lease_entry*> slots;
    /// The token of each of those leases, to its slot.
    std::unordered_map<std::uint64_t, std::uint32_t> by_token;
    /// The key's slots in the table's lock-delays, so that a lookup of them visits only those (a key may
    /// have 65,535 slots: docs/design.md, "Semaphores").
    std::set<std::uint32_t> delayed;
  };

  bool empty() const { return entries_.empty(); }
  const entry* find(std::string_view key) const {
    auto it = entries_.find(key);
    return it == entries_.end() ? nullptr : &it->second;
  }

  /// The lease `e` of a permit entered the table, or took token `token` in place of `old_token` (0: new).
  /// Refused (false, nothing filed) when the key is in use with another count: an index never holds two
  /// counts for one key, so a permit is never counted against a count it was not granted under.
  [[nodiscard]] bool leased(const permit_key_parts& p, lease_entry& e, std::uint64_t token,
                            std::uint64_t old_token);
  /// The lease `token` of a permit is leaving the table.
  void unleased(const permit_key_parts& p, std::uint64_t token);
  /// A slot of `p.key` entered (+1) or left (-1) the table's lock-delays. Refused (false) for a slot of
  /// another count than the key's, as leased() is.
  [[nodiscard]] bool delay_changed(const permit_key_parts& p, int delta);

 private:
  struct string_hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  using entry_map = std::unordered_map<std::string, entry, string_hash, std::equal_to<>>;
  /// A new entry for `p.key`, of count `p.permits`.
  entry_map::iterator add(const permit_key_parts& p);
  void drop_if_unused(entry_map::iterator it);

  entry_map entries_;
};

}  // namespace baton::server
