// SPDX-License-Identifier: Apache-2.0
#include "cron.hpp"

#include "baton/common/duration.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

namespace baton::agent {

namespace {

using date::local_seconds;
using std::chrono::seconds;
using std::chrono::sys_seconds;

// Each field is a set of small integers kept as a bit mask (bit v = value v matches); 64 bits hold them all.
using mask = std::uint64_t;

bool has(mask m, unsigned v) {
  return (m >> v) & 1u;
}

mask bits(int lo, int hi) {  // the bits lo..hi
  mask m = 0;
  for (int v = lo; v <= hi; ++v)
    m |= mask{1} << v;
  return m;
}

struct field_spec {
  const char* name;  // as it appears in error messages
  int min;
  int max;       // largest value accepted as written (7 for day-of-week, an alias of Sunday)
  int star_max;  // where `*` and `a/n` end (6 for day-of-week: the week ends on Saturday)
  std::span<const char* const> names{};  // names[i] stands for min + i
  const char* name_kind = "";            // " or month name", for error messages
};

constexpr std::array<const char*, 12> month_names = {"JAN", "FEB", "MAR", "APR", "MAY", "JUN",
                                                     "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"};
constexpr std::array<const char*, 7> day_names = {"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"};

const field_spec second_spec{"second", 0, 59, 59};
const field_spec minute_spec{"minute", 0, 59, 59};
const field_spec hour_spec{"hour", 0, 23, 23};
const field_spec dom_spec{"day-of-month", 1, 31, 31};
const field_spec month_spec{"month", 1, 12, 12, month_names, " or month name"};
const field_spec dow_spec{"day-of-week", 0, 7, 6, day_names, " or day name"};

[[noreturn]] void fail(const field_spec& f, const std::string& what) {
  throw cron_error(std::string(f.name) + " field: " + what);
}

bool iequal(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           auto up = [](char c) { return c >= 'a' && c <= 'z' ? char(c - 'a' + 'A') : c; };
           return up(x) == up(y);
         });
}

bool all_digits(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::string shown(std::string_view token) {
  return token.empty() ? "(empty)" : std::string(token);
}

int parse_value(const field_spec& f, std::string_view token) {
  for (std::size_t i = 0; i < f.names.size(); ++i)
    if (iequal(token, f.names[i])) return f.min + static_cast<int>(i);
  if (!all_digits(token)) fail(f, shown(token) + " is not a number" + f.name_kind);
  int v = 0;
  const auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), v);
  if (ec != std::errc() || v < f.min || v > f.max)
    fail(f, std::string(token) + " is out of range " + std::to_string(f.min) + "-" + std::to_string(f.max));
  return v;
}

// One list item: `*`, `a`, `a-b`, each optionally followed by `/n`.
mask parse_item(const field_spec& f, std::string_view item) {
  std::string_view range = item;
  int step = 1;
  bool stepped = false;
  if (const auto slash = item.find('/'); slash != std::string_view::npos) {
    range = item.substr(0, slash);
    const std::string_view step_text = item.substr(slash + 1);
    if (!all_digits(step_text))
      fail(f, "step " + shown(step_text) + " in " + std::string(item) + " is not a number");
    const auto [end, ec] = std::from_chars(step_text.data(), step_text.data() + step_text.size(), step);
    if (ec != std::errc())
      fail(f, "step " + std::string(step_text) + " in " + std::string(item) + " is too large");
    if (step < 1)
      fail(f, "step " + std::string(step_text) + " in " + std::string(item) + " must be 1 or more");
    stepped = true;
  }
  int lo = 0;
  int hi = 0;
  if (range == "*") {
    lo = f.min;
    hi = f.star_max;
  } else if (const auto dash = range.find('-'); dash != std::string_view::npos) {
    lo = parse_value(f, range.substr(0, dash));
    hi = parse_value(f, range.substr(dash + 1));
    if (lo > hi) fail(f, "range " + std::string(range) + " is reversed");
  } else {
    lo = parse_value(f, range);
    // `a/n` runs from a to the end of the field, as in Quartz and most modern crons.
    hi = stepped ? f.star_max : lo;
    if (stepped && lo > hi) fail(f, std::string(item) + " starts after " + std::to_string(hi));
  }
  mask m = 0;
  for (int v = lo;; v += step) {
    m |= mask{1} << v;
    if (hi - v < step) break;  // written so that a huge step cannot overflow v
  }
  return m;
}

mask parse_field(const field_spec& f, std::string_view text) {
  mask m = 0;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = text.find(',', start);
    const std::string_view item = text.substr(start, comma - start);
    if (item.empty()) fail(f, "empty list item in " + std::string(text));
    m |= parse_item(f, item);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return m;
}

std::vector<std::string_view> split_words(std::string_view text) {
  std::vector<std::string_view> words;
  std::size_t i = 0;
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  while (i < text.size()) {
    while (i < text.size() && space(text[i]))
      ++i;
    const std::size_t start = i;
    while (i < text.size() && !space(text[i]))
      ++i;
    if (i > start) words.push_back(text.substr(start, i - start));
  }
  return words;
}

local_seconds to_local(sys_seconds t, seconds offset) {
  return local_seconds{t.time_since_epoch() + offset};
}
sys_seconds to_sys(local_seconds t, seconds offset) {
  return sys_seconds{t.time_since_epoch() - offset};
}

// Candidates are confined to years 1..9999 so that calendar arithmetic never leaves date's range, whatever
// instant a caller passes.
const sys_seconds earliest_supported{date::sys_days{date::year{1} / 1 / 1}.time_since_epoch()};
const sys_seconds latest_supported{date::sys_days{date::year{10000} / 1 / 1}.time_since_epoch()};

// Any schedule that can fire at all fires within 8 years: with the day-of-week unrestricted, the rarest day
// is 29 February, which can be 8 years away (2096 → 2104, as 2100 is no leap year). A week of slack covers a
// time-zone offset and a daylight-saving gap.
constexpr date::days search_horizon{8 * 366};

}  // namespace

struct schedule::fields {
  mask second = 0, minute = 0, hour = 0, dom = 0, month = 0, dow = 0;
  bool dom_restricted = false;
  bool dow_restricted = false;
  // The hour field matches every hour: slots are then an interval, not a time of day, which decides how
  // daylight-saving transitions treat them (see next_fire).
  bool every_hour = false;
  bool never = false;            // no month holds a matching day (`0 0 30 2 *`)
  std::optional<seconds> every;  // `@every`: fixed period since the epoch; the masks are unused

  bool day_matches(const date::year_month_day& ymd, date::weekday wd) const {
    const bool by_dom = has(dom, unsigned(ymd.day()));
    const bool by_dow = has(dow, wd.c_encoding());
    if (dom_restricted && dow_restricted) return by_dom || by_dow;
    if (dom_restricted) return by_dom;
    if (dow_restricted) return by_dow;
    return true;
  }

  // The earliest matching time of day at or after `from` (seconds since local midnight).
  std::optional<seconds> time_of_day_from(seconds from) const {
    const int s0 = static_cast<int>(from.count());
    for (int h = s0 / 3600; h < 24; ++h) {
      if (!has(hour, h)) continue;
      const bool same_hour = h == s0 / 3600;
      for (int m = same_hour ? s0 / 60 % 60 : 0; m < 60; ++m) {
        if (!has(minute, m)) continue;
        const bool same_minute = same_hour && m == s0 / 60 % 60;
        for (int s = same_minute ? s0 % 60 : 0; s < 60; ++s)
          if (has(second, s)) return seconds{h * 3600 + m * 60 + s};
      }
    }
    return std::nullopt;
  }

  // The first local time in [lo, hi) that the fields match. Skips whole months and days that cannot match,
  // so a search over years costs a few hundred steps rather than one per second.
  std::optional<local_seconds> first_match(local_seconds lo, local_seconds hi) const {
    if (lo >= hi) return std::nullopt;
    auto day = date::floor<date::days>(lo);
    seconds from = lo - day;
    while (day < hi) {
      const date::year_month_day ymd{day};
      if (!has(month, unsigned(ymd.month()))) {
        day = date::local_days{(date::year_month{ymd.year(), ymd.month()} + date::months{1}) / date::day{1}};
        from = seconds{0};
        continue;
      }
      if (day_matches(ymd, date::weekday{day}))
        if (const auto t = time_of_day_from(from)) {
          const local_seconds candidate = day + *t;
          if (candidate < hi) return candidate;
          return std::nullopt;
        }
      day += date::days{1};
      from = seconds{0};
    }
    return std::nullopt;
  }
};

schedule schedule::parse(std::string_view expression) {
  schedule out;
  out.text_ = std::string(expression);
  auto f = std::make_shared<fields>();
  const auto words = split_words(expression);

  std::array<std::string_view, 6> cron{};  // second minute hour dom month dow
  if (!words.empty() && words[0].starts_with('@')) {
    const std::string_view name = words[0];
    if (iequal(name, "@every")) {
      if (words.size() != 2)
        throw cron_error(words.size() == 1 ? "@every needs a duration, e.g. @every 90s"
                                           : "@every takes one duration without spaces, e.g. @every 1h30m");
      const auto d = parse_duration(words[1]);
      if (!d) throw cron_error("@every: " + std::string(words[1]) + " is not a duration (e.g. 90s, 1h30m)");
      if (*d < std::chrono::seconds{1} || d->count() % 1000 != 0)
        throw cron_error("@every needs a whole number of seconds ≥ 1s, got " + std::string(words[1]));
      f->every = std::chrono::duration_cast<seconds>(*d);
      out.fields_ = std::move(f);
      return out;
    }
    static constexpr std::array<std::pair<const char*, const char*>, 7> descriptors = {{
        {"@yearly", "0 0 1 1 *"},
        {"@annually", "0 0 1 1 *"},
        {"@monthly", "0 0 1 * *"},
        {"@weekly", "0 0 * * 0"},
        {"@daily", "0 0 * * *"},
        {"@midnight", "0 0 * * *"},
        {"@hourly", "0 * * * *"},
    }};
    const auto it = std::find_if(descriptors.begin(), descriptors.end(),
                                 [&](const auto& d) { return iequal(name, d.first); });
    if (it == descriptors.end()) throw cron_error("unknown descriptor " + std::string(name));
    if (words.size() != 1) throw cron_error(std::string(name) + " takes no arguments");
    schedule expanded = parse(it->second);
    expanded.text_ = out.text_;
    return expanded;
  }
  if (words.size() == 5) {
    cron[0] = "0";
    std::copy(words.begin(), words.end(), cron.begin() + 1);
  } else if (words.size() == 6) {
    std::copy(words.begin(), words.end(), cron.begin());
  } else {
    throw cron_error("expected 5 or 6 fields, got " + std::to_string(words.size()));
  }

  f->second = parse_field(second_spec, cron[0]);
  f->minute = parse_field(minute_spec, cron[1]);
  f->hour = parse_field(hour_spec, cron[2]);
  f->dom = parse_field(dom_spec, cron[3]);
  f->month = parse_field(month_spec, cron[4]);
  f->dow = parse_field(dow_spec, cron[5]);
  if (has(f->dow, 7)) f->dow = (f->dow & ~(mask{1} << 7)) | 1u;  // 7 is another name for Sunday

  // "Restricted" is decided by the set, not the spelling: `1-31` excludes nothing, so it must not turn the
  // day-of-week into an alternative. `*/2` does restrict (Vixie cron treats it as `*`, a known surprise).
  f->dom_restricted = f->dom != bits(1, 31);
  f->dow_restricted = f->dow != bits(0, 6);
  f->every_hour = f->hour == bits(0, 23);
  if (f->dom_restricted && !f->dow_restricted) {
    // Only day-of-month picks days; see whether any chosen month has any chosen day (29 February counts: it
    // comes round in leap years).
    constexpr std::array<int, 13> month_days = {0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    bool possible = false;
    for (int m = 1; m <= 12; ++m)
      if (has(f->month, m) && (f->dom & bits(1, month_days[m])) != 0) possible = true;
    f->never = !possible;
  }
  out.fields_ = std::move(f);
  return out;
}

bool schedule::is_interval() const {
  return fields_ && (fields_->every || fields_->every_hour);
}

std::optional<sys_seconds> schedule::next_fire(sys_seconds after, const date::time_zone* tz) const {
  if (!fields_ || fields_->never) return std::nullopt;
  const fields& f = *fields_;

  if (f.every) {
    // Floor division, so instants before the epoch land on the same grid.
    const std::int64_t period = f.every->count();
    const std::int64_t t = after.time_since_epoch().count();
    std::int64_t slot = t / period;
    if (t % period != 0 && t < 0) --slot;
    if (slot >= std::numeric_limits<std::int64_t>::max() / period) return std::nullopt;
    return sys_seconds{seconds{(slot + 1) * period}};
  }

  if (after >= latest_supported) return std::nullopt;
  sys_seconds from = std::max(after + seconds{1}, earliest_supported);
  const sys_seconds horizon = std::min(after + search_horizon, latest_supported);

  if (!tz) {
    const auto m = f.first_match(to_local(from, seconds{0}), to_local(horizon, seconds{0}));
    if (!m) return std::nullopt;
    return to_sys(*m, seconds{0});
  }

  // Walk the zone's offset periods in UTC order. Within one period local time is UTC plus a fixed offset, so
  // the field search in local time yields instants in UTC order. A walk in local time alone would not: in a
  // repeated hour, 02:00 of the second pass comes after 02:30 of the first.
  while (from < horizon) {
    const date::sys_info period = tz->get_info(from);
    local_seconds lo = to_local(from, period.offset);
    if (period.begin > earliest_supported) {
      const date::sys_info before = tz->get_info(period.begin - seconds{1});
      const local_seconds old_wall = to_local(period.begin, before.offset);  // the clock just before the jump
      const local_seconds new_wall = to_local(period.begin, period.offset);  // and just after it
      if (new_wall > old_wall && !f.every_hour && period.begin >= from) {
        // Forward jump: local times in [old_wall, new_wall) do not exist. A time-of-day schedule that names
        // one of them still fires, once, at the first instant after the gap (the job still runs that day).
        if (f.first_match(old_wall, new_wall)) return period.begin;
      } else if (new_wall < old_wall && !f.every_hour) {
        // Backward jump: local times in [new_wall, old_wall) happen a second time. A time-of-day schedule
        // fired at their first occurrence, in the previous period; it must not run twice.
        lo = std::max(lo, old_wall);
      }
    }
    const sys_seconds end = std::min(period.end, horizon);
    if (const auto m = f.first_match(lo, to_local(end, period.offset))) return to_sys(*m, period.offset);
    from = period.end;
  }
  return std::nullopt;
}

}  // namespace baton::agent
