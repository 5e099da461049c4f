// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: the agent's cron parser and next-fire calculator. The input is a schedule expression;
// a parsed schedule's next fire must be strictly after the instant asked, in UTC and in a zone with daylight
// saving, and parse errors must be cron_error.

#include "cron.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

using baton::agent::schedule;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  schedule s;
  try {
    s = schedule::parse(text);
  } catch (const baton::agent::cron_error&) {
    return 0;
  }
  static const date::time_zone* zones[] = {nullptr, date::locate_zone("Europe/Berlin")};
  // 2024-03-31 00:30 UTC: an hour before Berlin skips 02:00-03:00.
  const std::chrono::sys_seconds starts[] = {std::chrono::sys_seconds{std::chrono::seconds(1711845000)},
                                             std::chrono::sys_seconds{std::chrono::seconds(0)}};
  for (auto* tz : zones)
    for (auto after : starts) {
      auto next = s.next_fire(after, tz);
      if (next && *next <= after) {
        std::fprintf(stderr, "next_fire(%lld) = %lld is not after it\n",
                     static_cast<long long>(after.time_since_epoch().count()),
                     static_cast<long long>(next->time_since_epoch().count()));
        std::abort();
      }
    }
  return 0;
}
