// SPDX-License-Identifier: Apache-2.0
#include "baton/common/duration.hpp"

#include <cstdint>
#include <limits>

namespace baton {

std::optional<std::chrono::milliseconds> parse_duration(std::string_view text) {
  constexpr std::int64_t max = std::numeric_limits<std::int64_t>::max();
  if (text.empty()) return std::nullopt;
  std::int64_t total = 0;
  std::size_t i = 0;
  while (i < text.size()) {
    const std::size_t digits_start = i;
    std::int64_t amount = 0;
    for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
      const int digit = text[i] - '0';
      if (amount > (max - digit) / 10) return std::nullopt;
      amount = amount * 10 + digit;
    }
    if (i == digits_start) return std::nullopt;
    const std::size_t unit_start = i;
    while (i < text.size() && (text[i] < '0' || text[i] > '9'))
      ++i;
    const std::string_view unit = text.substr(unit_start, i - unit_start);
    std::int64_t scale = 0;
    if (unit == "ms")
      scale = 1;
    else if (unit == "s")
      scale = 1'000;
    else if (unit == "m")
      scale = 60'000;
    else if (unit == "h")
      scale = 3'600'000;
    else
      return std::nullopt;
    if (amount > max / scale || amount * scale > max - total) return std::nullopt;
    total += amount * scale;
  }
  return std::chrono::milliseconds(total);
}

}  // namespace baton
