// SPDX-License-Identifier: Apache-2.0
#pragma once
// What the fenced-database examples store and answer (fenced-sqlite, fenced-postgres): an account row with
// the highest fencing token it accepted, and the database's decision about one fenced write.

#include <cstdint>
#include <string>

namespace baton::examples {

/// What the database decided about one fenced write.
struct write_outcome {
  bool accepted = false;
  /// The account's last_token after the attempt: the writer's token when accepted, the newer token that made
  /// it stale when refused.
  std::uint64_t highest_token = 0;
};

/// One row of `accounts`.
struct account {
  std::int64_t balance = 0;
  std::string updated_by;
  std::uint64_t last_token = 0;
};

}  // namespace baton::examples
