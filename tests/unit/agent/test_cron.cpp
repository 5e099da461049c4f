// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE cron
#include <boost/test/unit_test.hpp>

#include "cron.hpp"

#include <chrono>
#include <cstdint>
#include <limits>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

using baton::agent::cron_error;
using baton::agent::schedule;
using std::chrono::sys_seconds;

namespace {

// "2026-03-29 03:00:00 +0200" (an instant written in local time with its offset) or "2026-03-29 01:00:00"
// (UTC). Expectations read as wall-clock times, while the offset keeps them unambiguous.
sys_seconds at(std::string text) {
  if (text.size() == 19) text += " +0000";
  std::istringstream in(text);
  sys_seconds t;
  in >> date::parse("%F %T %z", t);
  if (in.fail()) throw std::invalid_argument("bad instant in test table: " + text);
  return t;
}

std::string show(std::optional<sys_seconds> t) {
  return t ? date::format("%F %T UTC", *t) : "never";
}

const date::time_zone* zone(const char* name) {
  return name ? date::locate_zone(name) : nullptr;
}

struct fire_case {
  const char* expression;
  const char* after;
  const char* expected;      // nullptr: never fires
  const char* tz = nullptr;  // nullptr: UTC
};

void check(const std::vector<fire_case>& table) {
  for (const auto& c : table) {
    BOOST_TEST_CONTEXT(c.expression << " after " << c.after << " in " << (c.tz ? c.tz : "UTC")) {
      const auto fire = schedule::parse(c.expression).next_fire(at(c.after), zone(c.tz));
      const auto expected = c.expected ? std::optional(at(c.expected)) : std::nullopt;
      BOOST_TEST(show(fire) == show(expected));
    }
  }
}

// Every fire instant in [from, to), by repeated next_fire.
std::vector<sys_seconds> walk(const schedule& s, sys_seconds from, sys_seconds to,
                              const date::time_zone* tz) {
  std::vector<sys_seconds> out;
  for (auto t = s.next_fire(from - std::chrono::seconds(1), tz); t && *t < to; t = s.next_fire(*t, tz))
    out.push_back(*t);
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(fields_ranges_steps_and_lists) {
  check({
      {"* * * * *", "2026-01-01 00:00:00", "2026-01-01 00:01:00"},
      {"* * * * *", "2026-01-01 00:00:30", "2026-01-01 00:01:00"},
      {"0 12 * * *", "2026-01-01 11:59:59", "2026-01-01 12:00:00"},
      {"0 12 * * *", "2026-01-01 12:00:00", "2026-01-02 12:00:00"},  // strictly after
      {"15,45 * * * *", "2026-01-01 10:20:00", "2026-01-01 10:45:00"},
      {"10-20/5 * * * *", "2026-01-01 10:16:00", "2026-01-01 10:20:00"},
      {"10-20/5 * * * *", "2026-01-01 10:20:00", "2026-01-01 11:10:00"},
      {"*/20 * * * *", "2026-01-01 10:41:00", "2026-01-01 11:00:00"},
      {"5/20 * * * *", "2026-01-01 10:46:00", "2026-01-01 11:05:00"},  // a/n is a-59/n: 5, 25, 45
      {"0 9-17/4 * * *", "2026-01-01 13:00:00", "2026-01-01 17:00:00"},
      {"0 9-17/4 * * *", "2026-01-01 17:00:00", "2026-01-02 09:00:00"},
      {"0,30 1-2,22 * * *", "2026-01-01 02:30:00", "2026-01-01 22:00:00"},
      {"7 */100 * * *", "2026-01-01 00:07:00", "2026-01-02 00:07:00"},  // a step past the end: just the start
      {"0 0 * JAN,jul *", "2026-02-01 00:00:00", "2026-07-01 00:00:00"},
      {"0 0 1 Mar-May *", "2026-05-01 00:00:00", "2027-03-01 00:00:00"},
  });
}

BOOST_AUTO_TEST_CASE(seconds_field_when_there_are_six) {
  check({
      {"*/15 * * * * *", "2026-01-01 10:00:14", "2026-01-01 10:00:15"},
      {"*/15 * * * * *", "2026-01-01 10:00:45", "2026-01-01 10:01:00"},
      {"30 0 12 * * *", "2026-01-01 12:00:00", "2026-01-01 12:00:30"},
      {"* * * * * *", "2026-12-31 23:59:59", "2027-01-01 00:00:00"},
      {"59 59 23 31 12 *", "2026-06-01 00:00:00", "2026-12-31 23:59:59"},
  });
}

// 2026-01-01 is a Thursday: Fri 2, Sat 3, Sun 4, Mon 5, ..., Fri 9, Tue 13.
BOOST_AUTO_TEST_CASE(day_of_week_names_and_sunday_as_0_or_7) {
  check({
      {"0 0 * * MON-FRI", "2026-01-02 12:00:00", "2026-01-05 00:00:00"},
      {"0 0 * * mon-fri", "2026-01-05 00:00:00", "2026-01-06 00:00:00"},
      {"0 0 * * 0", "2026-01-01 00:00:00", "2026-01-04 00:00:00"},
      {"0 0 * * 7", "2026-01-01 00:00:00", "2026-01-04 00:00:00"},
      {"0 0 * * Sun", "2026-01-01 00:00:00", "2026-01-04 00:00:00"},
      {"0 0 * * 5-7", "2026-01-03 12:00:00", "2026-01-04 00:00:00"},  // Fri-Sun, through the alias 7
      {"0 0 * * 6,7", "2026-01-04 12:00:00", "2026-01-10 00:00:00"},
      {"0 0 * * */2", "2026-01-01 00:00:00", "2026-01-03 00:00:00"},  // Sun, Tue, Thu, Sat
  });
}

BOOST_AUTO_TEST_CASE(day_of_month_or_day_of_week_when_both_are_restricted) {
  check({
      // Both restricted: Fridays or the 13th.
      {"0 0 13 * FRI", "2026-01-01 00:00:00", "2026-01-02 00:00:00"},
      {"0 0 13 * FRI", "2026-01-02 00:00:00", "2026-01-09 00:00:00"},
      {"0 0 13 * FRI", "2026-01-09 00:00:00", "2026-01-13 00:00:00"},
      // One field `*`: only the other restricts.
      {"0 0 13 * *", "2026-01-01 00:00:00", "2026-01-13 00:00:00"},
      {"0 0 * * FRI", "2026-01-02 00:00:00", "2026-01-09 00:00:00"},
      // A field that excludes nothing does not restrict either, however it is spelt.
      {"0 0 1-31 * FRI", "2026-01-02 00:00:00", "2026-01-09 00:00:00"},
      {"0 0 */1 * FRI", "2026-01-02 00:00:00", "2026-01-09 00:00:00"},
      {"0 0 13 * 0-6", "2026-01-01 00:00:00", "2026-01-13 00:00:00"},
      // `*/2` does restrict (odd days), so it is an alternative to Friday.
      {"0 0 */2 * FRI", "2026-01-01 00:00:00", "2026-01-02 00:00:00"},
      {"0 0 */2 * FRI", "2026-01-02 00:00:00", "2026-01-03 00:00:00"},
      // 30 February never comes, but Mondays in February do.
      {"0 0 30 2 MON", "2026-01-01 00:00:00", "2026-02-02 00:00:00"},
  });
}

BOOST_AUTO_TEST_CASE(descriptors) {
  check({
      {"@yearly", "2026-03-01 00:00:00", "2027-01-01 00:00:00"},
      {"@annually", "2026-01-01 00:00:00", "2027-01-01 00:00:00"},
      {"@monthly", "2026-01-31 12:00:00", "2026-02-01 00:00:00"},
      {"@weekly", "2026-01-01 00:00:00", "2026-01-04 00:00:00"},
      {"@daily", "2026-01-01 00:00:00", "2026-01-02 00:00:00"},
      {"@midnight", "2026-01-01 23:59:59", "2026-01-02 00:00:00"},
      {"@hourly", "2026-01-01 10:00:00", "2026-01-01 11:00:00"},
      {"@DAILY", "2026-01-01 00:00:00", "2026-01-02 00:00:00"},
      {"  @hourly\t", "2026-01-01 10:59:59", "2026-01-01 11:00:00"},
      {"@daily", "2026-01-01 00:00:00", "2026-01-02 00:00:00 +0100", "Europe/Berlin"},
  });
}

BOOST_AUTO_TEST_CASE(every_is_aligned_to_the_epoch_whatever_the_zone) {
  check({
      {"@every 90s", "1970-01-01 00:00:00", "1970-01-01 00:01:30"},
      {"@every 90s", "2026-01-01 00:00:00", "2026-01-01 00:01:30"},
      {"@every 13s", "2026-01-01 00:00:00", "2026-01-01 00:00:03"},  // 1767225600 = 13 * 135940430 + 10
      {"@every 13s", "2026-01-01 00:00:02", "2026-01-01 00:00:03"},
      {"@every 13s", "2026-01-01 00:00:03", "2026-01-01 00:00:16"},
      {"@every 1h30m", "2026-01-01 00:00:00", "2026-01-01 01:30:00"},
      {"@every 25h", "2026-01-01 00:00:00", "2026-01-01 04:00:00"},  // 20454 days = 19635 * 25h + 21h
      {"@every 25h", "2026-01-01 00:00:00", "2026-01-01 04:00:00", "Europe/Berlin"},
      {"@every 25h", "2026-01-01 00:00:00", "2026-01-01 04:00:00", "America/New_York"},
      {"@every 1h", "1969-12-31 23:30:00", "1970-01-01 00:00:00"},  // floor division before the epoch
      {"@every 1h", "1969-12-31 22:00:00", "1969-12-31 23:00:00"},
      {"@every 1000ms", "2026-01-01 00:00:00", "2026-01-01 00:00:01"},
      // A daylight-saving jump changes nothing: the period is in UTC.
      {"@every 1h", "2026-10-25 00:30:00", "2026-10-25 01:00:00", "Europe/Berlin"},
  });
}

BOOST_AUTO_TEST_CASE(rollover_at_end_of_month_and_year) {
  check({
      {"59 23 31 12 *", "2026-12-31 23:59:00", "2027-12-31 23:59:00"},
      {"0 0 1 * *", "2026-12-31 23:59:59", "2027-01-01 00:00:00"},
      {"0 0 31 * *", "2026-01-31 00:00:00", "2026-03-31 00:00:00"},  // February has no 31st
      {"0 0 31 * *", "2026-03-31 00:00:00", "2026-05-31 00:00:00"},  // nor April
      {"0 0 30 * *", "2026-01-30 00:00:00", "2026-03-30 00:00:00"},
      {"0 0 * * *", "2026-02-28 00:00:00", "2026-03-01 00:00:00"},
      {"0 0 * * *", "2028-02-28 00:00:00", "2028-02-29 00:00:00"},
      {"0 0 * * *", "2026-12-31 00:00:00", "2027-01-01 00:00:00"},
      {"0 * * * *", "2026-12-31 23:00:00", "2027-01-01 00:00:00"},
      {"0 0 1 1 *", "2026-12-31 00:00:00", "2027-01-01 00:00:00 +1400", "Pacific/Kiritimati"},  // UTC: Dec 31
  });
}

BOOST_AUTO_TEST_CASE(february_29_only_in_leap_years) {
  check({
      {"0 0 29 2 *", "2026-01-01 00:00:00", "2028-02-29 00:00:00"},
      {"0 0 29 2 *", "2028-02-29 00:00:00", "2032-02-29 00:00:00"},
      {"0 0 29 2 *", "2096-02-29 00:00:00", "2104-02-29 00:00:00"},  // 2100 is not a leap year: 8 years
      {"0 0 29 2 *", "2000-01-01 00:00:00", "2000-02-29 00:00:00"},  // 2000 is
      {"0 0 29 2 *", "2027-06-01 00:00:00", "2028-02-29 00:00:00 +0100", "Europe/Berlin"},
      {"0 0 28-29 2 *", "2026-02-28 00:00:00", "2027-02-28 00:00:00"},
  });
}

BOOST_AUTO_TEST_CASE(impossible_dates_never_fire) {
  check({
      {"0 0 30 2 *", "2026-01-01 00:00:00", nullptr},
      {"0 0 31 2 *", "2026-01-01 00:00:00", nullptr},
      {"0 0 31 4,6,9,11 *", "2026-01-01 00:00:00", nullptr},
      {"0 0 30-31 feb *", "2026-01-01 00:00:00", nullptr, "Europe/Berlin"},
      {"0 0 31 4,6,9,11 *", "2026-01-01 00:00:00", nullptr, "America/New_York"},
  });
}

BOOST_AUTO_TEST_CASE(search_stops_at_the_end_of_year_9999) {
  check({
      {"0 0 1 1 *", "9999-06-01 00:00:00", nullptr},
      {"0 0 31 12 *", "9999-06-01 00:00:00", "9999-12-31 00:00:00"},
      {"* * * * *", "0000-06-01 00:00:00", "0001-01-01 00:00:00"},  // and starts at the year 1
  });
  const auto last = sys_seconds(std::chrono::seconds(std::numeric_limits<std::int64_t>::max()));
  BOOST_TEST(show(schedule::parse("* * * * *").next_fire(last)) == "never");
  BOOST_TEST(show(schedule::parse("@every 1s").next_fire(last)) == "never");
  BOOST_TEST(show(schedule{}.next_fire(at("2026-01-01 00:00:00"))) == "never");
}

BOOST_AUTO_TEST_CASE(zones_without_daylight_saving_shift_by_their_offset) {
  check({
      {"0 9 * * *", "2026-01-01 00:00:00", "2026-01-02 09:00:00 +0900", "Asia/Tokyo"},
      {"0 0 * * *", "2026-01-01 00:00:00", "2026-01-02 00:00:00 +0530", "Asia/Kolkata"},
      {"0 0 * * *", "2026-01-01 00:00:00", "2026-01-02 00:00:00", "UTC"},
      {"0 0 * * *", "2026-01-01 00:00:00", "2026-01-01 00:00:00 -0800", "America/Los_Angeles"},
  });
}

// Europe/Berlin 2026: 29 March 02:00 CET -> 03:00 CEST (01:00 UTC); 25 October 03:00 CEST -> 02:00 CET
// (01:00 UTC).
BOOST_AUTO_TEST_CASE(dst_europe_berlin) {
  const char* z = "Europe/Berlin";
  check({
      // Spring: 02:30 does not exist; it fires once, when the gap ends, and normally the next day.
      {"30 2 * * *", "2026-03-28 12:00:00", "2026-03-29 03:00:00 +0200", z},
      {"30 2 * * *", "2026-03-29 03:00:00 +0200", "2026-03-30 02:30:00 +0200", z},
      {"30 2 * * *", "2026-03-29 01:59:59 +0100", "2026-03-29 03:00:00 +0200", z},  // just before the jump
      {"0,30 2 * * *", "2026-03-28 12:00:00", "2026-03-29 03:00:00 +0200", z},      // two skipped: one fire
      {"0,30 2 * * *", "2026-03-29 03:00:00 +0200", "2026-03-30 02:00:00 +0200", z},
      {"0 2,3 * * *", "2026-03-28 12:00:00", "2026-03-29 03:00:00 +0200", z},  // skipped 02:00 and 03:00: one
      {"0 2,3 * * *", "2026-03-29 03:00:00 +0200", "2026-03-30 02:00:00 +0200", z},
      {"0 0 2 * * *", "2026-03-28 12:00:00", "2026-03-29 03:00:00 +0200", z},  // six fields, same rule
      {"59 1 * * *", "2026-03-28 12:00:00", "2026-03-29 01:59:00 +0100", z},   // just before the gap
      {"0 3 * * *", "2026-03-28 12:00:00", "2026-03-29 03:00:00 +0200", z},
      // Hour `*`: no slots in the skipped hour, and no extra one when it ends.
      {"15 * * * *", "2026-03-29 01:20:00 +0100", "2026-03-29 03:15:00 +0200", z},
      {"*/30 * * * *", "2026-03-29 01:45:00 +0100", "2026-03-29 03:00:00 +0200", z},
      {"*/30 * * * *", "2026-03-29 03:00:00 +0200", "2026-03-29 03:30:00 +0200", z},
      // Autumn: 02:30 happens twice; it fires at the first one only.
      {"30 2 * * *", "2026-10-24 12:00:00", "2026-10-25 02:30:00 +0200", z},
      {"30 2 * * *", "2026-10-25 02:30:00 +0200", "2026-10-26 02:30:00 +0100", z},
      {"30 2 * * *", "2026-10-25 02:10:00 +0100", "2026-10-26 02:30:00 +0100", z},  // asked in the 2nd pass
      {"0 2 * * *", "2026-10-25 01:59:59 +0200", "2026-10-25 02:00:00 +0200", z},
      {"0 2 * * *", "2026-10-25 02:00:00 +0200", "2026-10-26 02:00:00 +0100", z},
      {"0 3 * * *", "2026-10-25 02:00:00 +0200", "2026-10-25 03:00:00 +0100", z},  // 03:00 comes once
      {"*/20 2 * * *", "2026-10-25 02:40:00 +0200", "2026-10-26 02:00:00 +0100", z},
      // Hour `*`: both passes of the repeated hour.
      {"*/30 * * * *", "2026-10-25 01:45:00 +0200", "2026-10-25 02:00:00 +0200", z},
      {"*/30 * * * *", "2026-10-25 02:00:00 +0200", "2026-10-25 02:30:00 +0200", z},
      {"*/30 * * * *", "2026-10-25 02:30:00 +0200", "2026-10-25 02:00:00 +0100", z},
      {"*/30 * * * *", "2026-10-25 02:00:00 +0100", "2026-10-25 02:30:00 +0100", z},
      {"*/30 * * * *", "2026-10-25 02:30:00 +0100", "2026-10-25 03:00:00 +0100", z},
      {"@hourly", "2026-10-25 02:00:00 +0200", "2026-10-25 02:00:00 +0100", z},
  });
}

// America/New_York 2026: 8 March 02:00 EST -> 03:00 EDT (07:00 UTC); 1 November 02:00 EDT -> 01:00 EST
// (06:00 UTC).
BOOST_AUTO_TEST_CASE(dst_america_new_york) {
  const char* z = "America/New_York";
  check({
      {"30 2 * * *", "2026-03-08 00:00:00 -0500", "2026-03-08 03:00:00 -0400", z},
      {"30 2 * * *", "2026-03-08 03:00:00 -0400", "2026-03-09 02:30:00 -0400", z},
      {"30 2 * * 0", "2026-03-07 00:00:00 -0500", "2026-03-08 03:00:00 -0400", z},
      {"0 * * * *", "2026-03-08 01:00:00 -0500", "2026-03-08 03:00:00 -0400", z},
      {"30 1 * * *", "2026-11-01 00:00:00 -0400", "2026-11-01 01:30:00 -0400", z},
      {"30 1 * * *", "2026-11-01 01:30:00 -0400", "2026-11-02 01:30:00 -0500", z},
      {"0 * * * *", "2026-11-01 00:30:00 -0400", "2026-11-01 01:00:00 -0400", z},
      {"0 * * * *", "2026-11-01 01:00:00 -0400", "2026-11-01 01:00:00 -0500", z},
      {"0 * * * *", "2026-11-01 01:00:00 -0500", "2026-11-01 02:00:00 -0500", z},
      {"0 2 * * *", "2026-11-01 00:00:00 -0400", "2026-11-01 02:00:00 -0500", z},  // 02:00 is not repeated
  });
}

// Australia/Sydney 2026 (southern hemisphere, daylight saving over the new year): 5 April 03:00 AEDT ->
// 02:00 AEST (4 April 16:00 UTC); 4 October 02:00 AEST -> 03:00 AEDT (3 October 16:00 UTC).
BOOST_AUTO_TEST_CASE(dst_australia_sydney) {
  const char* z = "Australia/Sydney";
  check({
      {"30 2 * * *", "2026-04-04 12:00:00", "2026-04-05 02:30:00 +1100", z},
      {"30 2 * * *", "2026-04-05 02:30:00 +1100", "2026-04-06 02:30:00 +1000", z},
      {"*/30 * * * *", "2026-04-05 02:30:00 +1100", "2026-04-05 02:00:00 +1000", z},
      {"30 2 * * *", "2026-10-03 10:00:00", "2026-10-04 03:00:00 +1100", z},
      {"30 2 * * *", "2026-10-04 03:00:00 +1100", "2026-10-05 02:30:00 +1100", z},
  });
}

// Australia/Lord_Howe moves by 30 minutes, so a skipped or repeated span is not a whole hour: 4 October 2026
// 02:00 +1030 -> 02:30 +11.
BOOST_AUTO_TEST_CASE(dst_half_hour_shift_lord_howe) {
  const char* z = "Australia/Lord_Howe";
  check({
      {"15 2 * * *", "2026-10-03 12:00:00", "2026-10-04 02:30:00 +1100", z},
      {"45 2 * * *", "2026-10-03 12:00:00", "2026-10-04 02:45:00 +1100", z},
      {"15 * * * *", "2026-10-04 01:30:00 +1030", "2026-10-04 03:15:00 +1100", z},
      {"45 * * * *", "2026-10-04 01:50:00 +1030", "2026-10-04 02:45:00 +1100", z},
      // 5 April 02:00 +11 -> 01:30 +1030: 01:30-01:59 repeats.
      {"45 1 * * *", "2026-04-05 01:45:00 +1100", "2026-04-06 01:45:00 +1030", z},
      {"45 * * * *", "2026-04-05 01:45:00 +1100", "2026-04-05 01:45:00 +1030", z},
  });
}

// Sao Paulo used to jump at midnight (4 November 2018 00:00 -> 01:00), so that day had no midnight.
BOOST_AUTO_TEST_CASE(dst_at_midnight_sao_paulo_2018) {
  const char* z = "America/Sao_Paulo";
  check({
      {"@daily", "2018-11-03 12:00:00 -0300", "2018-11-04 01:00:00 -0200", z},
      {"@daily", "2018-11-04 01:00:00 -0200", "2018-11-05 00:00:00 -0200", z},
      {"0 0 4 11 *", "2018-11-01 00:00:00", "2018-11-04 01:00:00 -0200", z},
  });
}

BOOST_AUTO_TEST_CASE(a_day_of_quarter_hours_across_the_new_york_fall_back) {
  const auto* ny = date::locate_zone("America/New_York");
  const auto day_start = at("2026-11-01 00:00:00 -0400");
  const auto day_end = at("2026-11-02 00:00:00 -0500");  // 25 hours later
  const auto slots = walk(schedule::parse("*/15 * * * *"), day_start, day_end, ny);
  // The hour field is `*`: four slots in each of 25 hours, 01:00-01:45 twice (EDT, then EST).
  BOOST_TEST(slots.size() == 100u);
  BOOST_TEST(show(slots.front()) == show(day_start));
  BOOST_TEST(show(slots.back()) == show(at("2026-11-01 23:45:00 -0500")));
  for (std::size_t i = 1; i < slots.size(); ++i)
    BOOST_TEST((slots[i] - slots[i - 1] == std::chrono::minutes(15)));
  int at_one_am = 0;
  for (auto t : slots) {
    const auto local = date::make_zoned(ny, t).get_local_time();
    if (date::floor<std::chrono::hours>(local - date::floor<date::days>(local)) == std::chrono::hours(1))
      ++at_one_am;
  }
  BOOST_TEST(at_one_am == 8);

  // With the hour named, the repeated hour is a time of day: its four slots fire once, in EDT.
  const auto one_am = walk(schedule::parse("*/15 1 * * *"), day_start, day_end, ny);
  BOOST_REQUIRE(one_am.size() == 4u);
  BOOST_TEST(show(one_am.front()) == show(at("2026-11-01 01:00:00 -0400")));
  BOOST_TEST(show(one_am.back()) == show(at("2026-11-01 01:45:00 -0400")));

  // The spring day is 23 hours: 92 slots, none between 02:00 and 03:00.
  const auto spring = walk(schedule::parse("*/15 * * * *"), at("2026-03-08 00:00:00 -0500"),
                           at("2026-03-09 00:00:00 -0400"), ny);
  BOOST_TEST(spring.size() == 92u);
}

// An independent statement of the rule, checked minute by minute around every transition of a year in
// several zones: local times come from time_zone::get_info(local_time) (unique / nonexistent / ambiguous) and
// the fields are matched by the UTC calculation, which the tables above pin down.
BOOST_AUTO_TEST_CASE(agrees_with_a_minute_by_minute_reference_around_transitions) {
  using std::chrono::minutes;
  using std::chrono::seconds;
  struct expr {
    const char* text;
    bool hour_is_star;
  };
  const std::vector<expr> exprs = {{"30 2 * * *", false},     {"0,30 2 * * *", false}, {"0 2,3 * * *", false},
                                   {"*/10 1-3 * * *", false}, {"59 1 * * *", false},   {"0 0 * * *", false},
                                   {"45 0-23 * * *", true},   {"*/15 * * * *", true},  {"15 * * * *", true},
                                   {"* * * * *", true}};
  const std::vector<std::pair<const char*, int>> zones = {{"Europe/Berlin", 2026},
                                                          {"America/New_York", 2026},
                                                          {"Australia/Sydney", 2026},
                                                          {"Australia/Lord_Howe", 2026},
                                                          {"America/Sao_Paulo", 2018}};
  const auto matches = [](const schedule& s, date::local_seconds l) {
    const sys_seconds as_utc{l.time_since_epoch()};
    return s.next_fire(as_utc - seconds(1)) == as_utc;
  };
  int transitions = 0;
  for (const auto& [name, year] : zones) {
    const auto* tz = date::locate_zone(name);
    const sys_seconds year_end{date::sys_days{date::year{year + 1} / 1 / 1}};
    for (auto info = tz->get_info(sys_seconds{date::sys_days{date::year{year} / 1 / 1}}); info.end < year_end;
         info = tz->get_info(info.end)) {
      ++transitions;
      const sys_seconds from = info.end - std::chrono::hours(30);
      const sys_seconds to = info.end + std::chrono::hours(30);
      for (const auto& e : exprs) {
        const auto s = schedule::parse(e.text);
        std::set<sys_seconds> expected;
        for (sys_seconds t = from; t < to; t += minutes(1)) {
          const auto local = date::make_zoned(tz, t).get_local_time();
          const auto li = tz->get_info(local);
          const bool first_pass = li.result != date::local_info::ambiguous ||
                                  t == sys_seconds{local.time_since_epoch() - li.first.offset};
          if (matches(s, local) && (e.hour_is_star || first_pass)) expected.insert(t);
          // The instant a forward jump ends fires for a time-of-day schedule that named a skipped time.
          const auto before = tz->get_info(t - seconds(1));
          const auto now = tz->get_info(t);
          if (!e.hour_is_star && now.offset > before.offset) {
            for (auto l = date::local_seconds{t.time_since_epoch() + before.offset};
                 l < date::local_seconds{t.time_since_epoch() + now.offset}; l += minutes(1)) {
              BOOST_REQUIRE(tz->get_info(l).result == date::local_info::nonexistent);
              if (matches(s, l)) expected.insert(t);
            }
          }
        }
        const auto got = walk(s, from, to, tz);
        BOOST_TEST_CONTEXT(e.text << " in " << name << " around " << show(info.end)) {
          BOOST_TEST((std::set<sys_seconds>(got.begin(), got.end()) == expected));
          BOOST_TEST(got.size() == expected.size());  // and no instant twice
        }
      }
    }
  }
  BOOST_TEST(transitions == 10);
}

BOOST_AUTO_TEST_CASE(utc_and_a_null_zone_agree) {
  const auto* utc = date::locate_zone("UTC");
  for (const char* e : {"30 2 * * *", "*/7 * * * *", "0 0 29 2 *", "0 0 13 * FRI"}) {
    const auto s = schedule::parse(e);
    const auto after = at("2026-05-17 08:09:10");
    BOOST_TEST(show(s.next_fire(after, utc)) == show(s.next_fire(after)));
  }
}

BOOST_AUTO_TEST_CASE(text_is_kept_as_written) {
  BOOST_TEST(schedule::parse("  @daily ").text() == "  @daily ");
  BOOST_TEST(schedule::parse("*/5  *  * * MON").text() == "*/5  *  * * MON");
  BOOST_TEST(schedule::parse("@every 90s").text() == "@every 90s");
  const auto a = schedule::parse("0 12 * * *");
  const schedule b = a;  // copies share the parsed form and behave alike
  BOOST_TEST(show(a.next_fire(at("2026-01-01 00:00:00"))) == show(b.next_fire(at("2026-01-01 00:00:00"))));
}

BOOST_AUTO_TEST_CASE(interval_schedules_are_those_without_a_time_of_day) {
  for (const char* interval : {"* * * * *", "*/15 * * * *", "0-59/30 0-23 * * MON", "@hourly", "@every 25h"})
    BOOST_TEST(schedule::parse(interval).is_interval(), interval);
  for (const char* time_of_day : {"30 2 * * *", "0 9-17 * * *", "0 */2 * * *", "@daily", "@weekly"})
    BOOST_TEST(!schedule::parse(time_of_day).is_interval(), time_of_day);
  BOOST_TEST(!schedule{}.is_interval());
}

BOOST_AUTO_TEST_CASE(invalid_expressions_name_the_field_and_the_token) {
  const std::vector<std::pair<const char*, const char*>> table = {
      {"", "expected 5 or 6 fields, got 0"},
      {"   ", "expected 5 or 6 fields, got 0"},
      {"* * * *", "expected 5 or 6 fields, got 4"},
      {"* * * * * * *", "expected 5 or 6 fields, got 7"},
      {"61 * * * *", "minute field: 61 is out of range 0-59"},
      {"60 * * * * *", "second field: 60 is out of range 0-59"},
      {"* 24 * * *", "hour field: 24 is out of range 0-23"},
      {"* * 0 * *", "day-of-month field: 0 is out of range 1-31"},
      {"* * 32 * *", "day-of-month field: 32 is out of range 1-31"},
      {"* * * 13 *", "month field: 13 is out of range 1-12"},
      {"* * * 0 *", "month field: 0 is out of range 1-12"},
      {"* * * * 8", "day-of-week field: 8 is out of range 0-7"},
      {"99999999999 * * * *", "minute field: 99999999999 is out of range 0-59"},
      {"* * * FOO *", "month field: FOO is not a number or month name"},
      {"* * * JANUARY *", "month field: JANUARY is not a number or month name"},
      {"* * * * FUNDAY", "day-of-week field: FUNDAY is not a number or day name"},
      {"* MON * * *", "hour field: MON is not a number"},
      {"* * * * JAN", "day-of-week field: JAN is not a number or day name"},
      {"1.5 * * * *", "minute field: 1.5 is not a number"},
      {"+5 * * * *", "minute field: +5 is not a number"},
      {"-5 * * * *", "minute field: (empty) is not a number"},
      {"5- * * * *", "minute field: (empty) is not a number"},
      {"1-2-3 * * * *", "minute field: 2-3 is not a number"},
      {"30-10 * * * *", "minute field: range 30-10 is reversed"},
      {"* * * DEC-JAN *", "month field: range DEC-JAN is reversed"},
      {"1,,2 * * * *", "minute field: empty list item in 1,,2"},
      {"1, * * * *", "minute field: empty list item in 1,"},
      {"*/0 * * * *", "minute field: step 0 in */0 must be 1 or more"},
      {"*/x * * * *", "minute field: step x in */x is not a number"},
      {"*/ * * * *", "minute field: step (empty) in */ is not a number"},
      {"*/-2 * * * *", "minute field: step -2 in */-2 is not a number"},
      {"*/99999999999 * * * *", "minute field: step 99999999999 in */99999999999 is too large"},
      {"* * * * 7/2", "day-of-week field: 7/2 starts after 6"},
      {"@fortnightly", "unknown descriptor @fortnightly"},
      {"@", "unknown descriptor @"},
      {"@daily 5", "@daily takes no arguments"},
      {"@every", "@every needs a duration"},
      {"@every 500ms", "@every needs a whole number of seconds ≥ 1s, got 500ms"},
      {"@every 1500ms", "@every needs a whole number of seconds ≥ 1s, got 1500ms"},
      {"@every 0s", "@every needs a whole number of seconds ≥ 1s, got 0s"},
      {"@every soon", "@every: soon is not a duration"},
      {"@every 90", "@every: 90 is not a duration"},
      {"@every 1h 30m", "@every takes one duration without spaces"},
  };
  for (const auto& [expression, message] : table) {
    BOOST_TEST_CONTEXT("expression '" << expression << "'") {
      try {
        schedule::parse(expression);
        BOOST_ERROR("parsed, expected: " << message);
      } catch (const cron_error& e) {
        BOOST_TEST(std::string(e.what()).find(message) != std::string::npos, e.what()
                                                                                 << " lacks: " << message);
      }
    }
  }
}
