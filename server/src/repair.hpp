// SPDX-License-Identifier: Apache-2.0
#pragma once
// `batond repair`: the offline repair of a data directory whose log is damaged.

#include "storage.hpp"

#include <cstdint>
#include <filesystem>
#include <vector>

namespace baton::server {

/// What `repair_data_dir` did.
struct repair_report {
  struct damage {
    std::filesystem::path file;
    std::uint64_t offset = 0;         // first damaged byte
    std::uint64_t lost_bytes = 0;     // bytes in which no valid record was found
    std::uint64_t records_after = 0;  // valid records found after the damage and replayed
  };
  std::vector<damage> damaged;  // empty: nothing to repair
  std::uint64_t last_token_seen = 0;
  std::uint64_t token_floor = 0;  // the next grant is larger than this
  std::uint64_t restored_leases = 0;
  std::uint64_t generation = 0;  // of the snapshot written
};

/// Offline repair of a data directory whose log is damaged (batond must not be running: the directory is
/// locked). Replays every valid record, including those after a damaged stretch, raises the token counter
/// above any token the lost bytes could have held (docs/design.md, "Repair"), writes that as a new snapshot
/// and keeps each damaged log as `<name>.damaged`. Throws std::runtime_error when it cannot.
repair_report repair_data_dir(const std::filesystem::path& dir);
/// The same on a data directory that `fs` has not taken yet.
repair_report repair_data_dir(storage& fs);

}  // namespace baton::server
