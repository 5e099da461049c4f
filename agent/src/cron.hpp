// SPDX-License-Identifier: Apache-2.0
#pragma once
// Cron schedules: parsing and the next-fire calculation. Pure functions of their inputs (no clock, no I/O),
// so every rule is tested against a table. The syntax and the daylight-saving rule are in docs/cron.md.

#include <date/tz.h>

#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace baton::agent {

/// A schedule expression that does not parse; what() names the field and the reason
/// (`minute field: 61 is out of range 0-59`).
struct cron_error : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

/// A parsed schedule. Immutable once parsed, so one schedule may be used from several threads at once; copies
/// share the parsed form. A default-constructed schedule has empty text and never fires.
class schedule {
 public:
  schedule() = default;

  /// Parses
  ///  - 5 fields `minute hour day-of-month month day-of-week` (fires at second 0),
  ///  - 6 fields `second minute hour day-of-month month day-of-week`,
  ///  - `@yearly` (`@annually`), `@monthly`, `@weekly`, `@daily` (`@midnight`), `@hourly`,
  ///  - `@every <duration>` (whole seconds, e.g. `@every 90s`, `@every 1h30m`).
  /// Fields take `*`, numbers, ranges `a-b`, lists `a,b`, steps `*/n`, `a-b/n` and `a/n` (= `a-max/n`), month
  /// names `JAN`-`DEC` and day names `SUN`-`SAT` (case-insensitive); day-of-week 0 and 7 are Sunday. When
  /// both day-of-month and day-of-week are restricted, a day matches if either does (classic cron); a field
  /// that matches every value (`*`, `*/1`, `1-31`) does not restrict. Throws cron_error.
  static schedule parse(std::string_view expression);

  /// The first fire instant strictly after `after`, with the fields evaluated in `tz` (nullptr = UTC).
  /// `@every d` fires at the instants that are whole multiples of d since the Unix epoch, whatever the time
  /// zone, so every replica computes the same slots. Empty when the expression can never fire (`0 0 30 2 *`);
  /// the search looks 8 years ahead (the longest gap between two 29 Februaries) and stops at the end of 9999.
  /// Daylight-saving rule (docs/cron.md): a local time skipped by a forward jump fires once, at the first
  /// instant after the gap; a local time repeated by a backward jump fires once, at its first occurrence —
  /// except that a schedule whose hour field is `*` fires in both passes of a repeated hour, as its slots are
  /// an interval rather than a time of day (and for the same reason has no slot in a skipped hour).
  /// Does not throw.
  std::optional<std::chrono::sys_seconds> next_fire(std::chrono::sys_seconds after,
                                                    const date::time_zone* tz = nullptr) const;

  /// True when the slots are an interval rather than times of day: `@every`, or an hour field that matches
  /// every hour (`*/15 * * * *`, `@hourly`). Such a schedule follows the wall clock through a repeated hour
  /// or a backward clock step (its slots come again); a time-of-day schedule does not run a slot twice.
  bool is_interval() const;

  /// The expression as written.
  const std::string& text() const { return text_; }

 private:
  struct fields;
  std::string text_;
  std::shared_ptr<const fields> fields_;  // the parsed form; shared so schedules copy cheaply
};

}  // namespace baton::agent
