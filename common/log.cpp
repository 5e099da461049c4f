#include "baton/common/log.hpp"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <utility>

namespace baton::log {
namespace {

std::atomic<int> g_level{static_cast<int>(level::info)};

const char* level_name(level l) {
  switch (l) {
    case level::debug:
      return "debug";
    case level::info:
      return "info";
    case level::warn:
      return "warn";
    case level::error:
      return "error";
  }
  return "info";
}

bool needs_quotes(std::string_view v) {
  if (v.empty()) return true;
  for (unsigned char c : v)
    if (c <= ' ' || c == '"' || c == '=' || c == '\\' || c >= 0x7f) return true;
  return false;
}

// Length of the well-formed UTF-8 sequence at the start of `v` and its code point; 0 when it is not one
// (a stray continuation byte, an overlong form, a surrogate, beyond U+10FFFF, or cut short).
std::size_t utf8_sequence(std::string_view v, char32_t& cp) {
  auto b = [&](std::size_t i) { return static_cast<unsigned char>(v[i]); };
  unsigned char lead = b(0);
  std::size_t n = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 0;
  if (n == 0 || lead > 0xf4 || v.size() < n) return 0;
  cp = lead & (0x7f >> n);
  for (std::size_t i = 1; i < n; ++i) {
    if ((b(i) & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (b(i) & 0x3f);
  }
  const char32_t smallest[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < smallest[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return n;
}

// Code points that end or rearrange a line on a terminal or in a log viewer: C1 controls (U+0085 is a
// line break to some readers), the Unicode line and paragraph separators, and the bidirectional formatting
// characters that can make a line read differently from what it holds (U+202E reverses what follows).
void append_value(std::string& out, std::string_view v) {
  if (!needs_quotes(v)) {
    out += v;
    return;
  }
  out += '"';
  char buf[16];
  for (std::size_t i = 0; i < v.size();) {
    unsigned char c = static_cast<unsigned char>(v[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
      ++i;
    } else if (c < 0x20 || c == 0x7f) {
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
      ++i;
    } else if (c < 0x80) {
      out += static_cast<char>(c);
      ++i;
    } else {
      char32_t cp = 0;
      std::size_t n = utf8_sequence(v.substr(i), cp);
      if (n == 0) {
        // Not UTF-8: the byte itself, so the line stays valid UTF-8 and says what was sent.
        std::snprintf(buf, sizeof buf, "\\x%02x", c);
        out += buf;
        ++i;
      } else if (is_layout_control(cp)) {
        std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(cp));
        out += buf;
        i += n;
      } else {
        out.append(v.substr(i, n));
        i += n;
      }
    }
  }
  out += '"';
}

void append_timestamp(std::string& out) {
  // Wall-clock time is only for display here; nothing decides on it.
  auto now = std::chrono::system_clock::now();
  auto secs = std::chrono::system_clock::to_time_t(now);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms));
  out += buf;
}

}  // namespace

bool parse_level(std::string_view text, level& out) {
  for (level l : {level::debug, level::info, level::warn, level::error}) {
    if (text == level_name(l)) {
      out = l;
      return true;
    }
  }
  return false;
}

void set_level(level l) {
  g_level.store(static_cast<int>(l), std::memory_order_relaxed);
}

bool enabled(level l) {
  return static_cast<int>(l) >= g_level.load(std::memory_order_relaxed);
}

std::optional<std::uint64_t> throttle::admit(std::string_view event, clock::time_point now) {
  std::lock_guard lk(mu_);
  auto it = events_.find(std::string(event));
  if (it == events_.end()) it = events_.emplace(std::string(event), window{now}).first;
  window& w = it->second;
  if (now - w.start >= std::chrono::seconds(1)) {
    w.start = now;
    w.written = 0;
  }
  if (w.written >= limit_) {
    ++w.suppressed;
    return std::nullopt;
  }
  ++w.written;
  return std::exchange(w.suppressed, 0);
}

namespace {
void write_line(level l, std::string_view event, std::initializer_list<field> fields, bool throttled) {
  if (!enabled(l)) return;
  std::uint64_t suppressed = 0;
  if (throttled && l != level::debug) {
    static throttle lines(lines_per_event_per_second);
    auto admitted = lines.admit(event, throttle::clock::now());
    if (!admitted) return;
    suppressed = *admitted;
  }
  std::string line;
  line.reserve(128);
  append_timestamp(line);
  line += " level=";
  line += level_name(l);
  line += " event=";
  append_value(line, event);
  for (const auto& f : fields) {
    line += ' ';
    line += f.name;
    line += '=';
    append_value(line, f.value);
  }
  if (suppressed != 0) {
    line += " suppressed=";
    line += std::to_string(suppressed);
  }
  line += '\n';
  // One write per line: concurrent lines never interleave. A failed log write has nowhere to be reported.
  [[maybe_unused]] auto n = ::write(STDERR_FILENO, line.data(), line.size());
}
}  // namespace

bool is_layout_control(char32_t cp) {
  return (cp >= 0x80 && cp <= 0x9f) || cp == 0x061c || cp == 0x200e || cp == 0x200f ||
         (cp >= 0x2028 && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

std::string printable(std::string_view text) {
  std::string out;
  append_value(out, text);
  return out;
}

void write(level l, std::string_view event, std::initializer_list<field> fields) {
  write_line(l, event, fields, /*throttled=*/true);
}

void write_unthrottled(level l, std::string_view event, std::initializer_list<field> fields) {
  write_line(l, event, fields, /*throttled=*/false);
}

}  // namespace baton::log
