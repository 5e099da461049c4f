// SPDX-License-Identifier: Apache-2.0
#include "baton/common/log.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <utility>

namespace baton::log {
namespace {

std::atomic<int> g_level{static_cast<int>(level::info)};
std::atomic<int> g_format{static_cast<int>(format::logfmt)};
std::atomic<int> g_fd{STDERR_FILENO};
// Whether lines start with the journald priority prefix: -1 not decided yet (decided at the first line, from
// JOURNAL_STREAM and the output's fstat), 0 no, 1 yes.
std::atomic<int> g_journal{-1};

// Indexed by level (debug, info, warn, error): its name, and its syslog priority as the journal reads it at
// the start of a line (sd-daemon(3): 7 debug, 6 info, 4 warning, 3 error).
constexpr const char* level_names[] = {"debug", "info", "warn", "error"};
constexpr const char* syslog_prefixes[] = {"<7>", "<6>", "<4>", "<3>"};

const char* level_name(level l) {
  return level_names[static_cast<int>(l)];
}

const char* syslog_prefix(level l) {
  return syslog_prefixes[static_cast<int>(l)];
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

// Appends `v` quoted, the body escaped the same way for both formats but for two kinds of byte: `control`
// writes an ASCII control byte or DEL, `not_utf8` a byte that is not part of well-formed UTF-8.
template <class Control, class NotUtf8>
void append_quoted(std::string& out, std::string_view v, Control control, NotUtf8 not_utf8) {
  out += '"';
  char buf[16];
  for (std::size_t i = 0; i < v.size();) {
    unsigned char c = static_cast<unsigned char>(v[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
      ++i;
    } else if (c < 0x20 || c == 0x7f) {
      control(out, c);
      ++i;
    } else if (c < 0x80) {
      out += static_cast<char>(c);
      ++i;
    } else {
      char32_t cp = 0;
      std::size_t n = utf8_sequence(v.substr(i), cp);
      if (n == 0) {
        not_utf8(out, c);
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

void append_hex_byte(std::string& out, unsigned char c) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "\\x%02x", c);
  out += buf;
}

void append_value(std::string& out, std::string_view v) {
  if (!needs_quotes(v)) {
    out += v;
    return;
  }
  // A byte that is not UTF-8 is written as itself, so the line stays valid UTF-8 and says what was sent.
  append_quoted(out, v, append_hex_byte, append_hex_byte);
}

// `v` as a JSON string for a log line. What JSON cannot hold (bytes that are not UTF-8) becomes U+FFFD; what
// would break or reorder the line where it is shown is escaped, which a JSON parser undoes, so those values
// round-trip. Not baton::append_json_string (baton/common/json_string.hpp), which writes what Boost.JSON's
// serializer writes, byte for byte, for a peer: a log line must stay valid UTF-8 and one line on a terminal
// whatever a value holds.
void append_json_log_string(std::string& out, std::string_view v) {
  const auto control = [](std::string& o, unsigned char c) {
    if (c == '\n') {
      o += "\\n";
    } else if (c == '\r') {
      o += "\\r";
    } else if (c == '\t') {
      o += "\\t";
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      o += buf;
    }
  };
  append_quoted(out, v, control, [](std::string& o, unsigned char) { o += "\\ufffd"; });
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

bool parse_format(std::string_view text, format& out) {
  if (text == "logfmt") {
    out = format::logfmt;
    return true;
  }
  if (text == "json") {
    out = format::json;
    return true;
  }
  return false;
}

void set_format(format f) {
  g_format.store(static_cast<int>(f), std::memory_order_relaxed);
}

void set_output(int fd) {
  g_fd.store(fd);
  g_journal.store(-1);
}

bool is_journal_stream(const char* journal_stream, int fd) {
  if (journal_stream == nullptr) return false;
  std::string_view text(journal_stream);
  auto colon = text.find(':');
  if (colon == std::string_view::npos) return false;
  auto number = [](std::string_view part, std::uint64_t& out) {
    auto [ptr, ec] = std::from_chars(part.data(), part.data() + part.size(), out);
    return !part.empty() && ec == std::errc() && ptr == part.data() + part.size();
  };
  std::uint64_t dev = 0, ino = 0;
  if (!number(text.substr(0, colon), dev) || !number(text.substr(colon + 1), ino)) return false;
  struct stat st {};
  if (::fstat(fd, &st) != 0) return false;
  return static_cast<std::uint64_t>(st.st_dev) == dev && static_cast<std::uint64_t>(st.st_ino) == ino;
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
  const int fd = g_fd.load();
  int journal = g_journal.load();
  if (journal < 0) {
    journal = is_journal_stream(std::getenv("JOURNAL_STREAM"), fd) ? 1 : 0;
    g_journal.store(journal);
  }
  std::string line;
  line.reserve(128);
  if (journal == 1) line += syslog_prefix(l);
  if (static_cast<format>(g_format.load(std::memory_order_relaxed)) == format::json) {
    line += "{\"ts\":\"";
    append_timestamp(line);
    line += "\",\"level\":\"";
    line += level_name(l);
    line += "\",\"event\":";
    append_json_log_string(line, event);
    for (const auto& f : fields) {
      line += ',';
      append_json_log_string(line, f.name);
      line += ':';
      append_json_log_string(line, f.value);
    }
    if (suppressed != 0) {
      line += ",\"suppressed\":\"";
      line += std::to_string(suppressed);
      line += '"';
    }
    line += '}';
  } else {
    line += "ts=";
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
  }
  line += '\n';
  // One write per line: concurrent lines never interleave. A failed log write has nowhere to be reported.
  [[maybe_unused]] auto n = ::write(fd, line.data(), line.size());
}
}  // namespace

// Code points that end or rearrange a line on a terminal or in a log viewer: C1 controls (U+0085 is a
// line break to some readers), the Unicode line and paragraph separators, and the bidirectional formatting
// characters that can make a line read differently from what it holds (U+202E reverses what follows).
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
