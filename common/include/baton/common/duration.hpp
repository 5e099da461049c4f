// SPDX-License-Identifier: Apache-2.0
#pragma once
// Durations as people write them on a command line: `500ms`, `10s`, `2m`, `1h`, or a sum of such parts
// (`1m30s`). Pure, so every accepted and refused form is unit-tested without a process.

#include <chrono>
#include <optional>
#include <string_view>

namespace baton {

/// The duration `text` names, or nothing when it is not one. `text` is one or more parts, each a decimal
/// integer directly followed by a unit: `ms`, `s`, `m` or `h`. No sign, fraction, spaces or bare numbers: a
/// number without a unit is refused rather than guessed. Zero (`0s`) is a duration; callers that need a
/// positive one check that themselves. A total beyond what milliseconds in 64 bits hold is refused.
std::optional<std::chrono::milliseconds> parse_duration(std::string_view text);

}  // namespace baton
