#include "baton/common/log.hpp"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>

namespace baton::log {
namespace {

std::atomic<int> g_level{static_cast<int>(level::info)};

const char* level_name(level l) {
  switch (l) {
    case level::debug: return "debug";
    case level::info: return "info";
    case level::warn: return "warn";
    case level::error: return "error";
  }
  return "info";
}

bool needs_quotes(std::string_view v) {
  if (v.empty()) return true;
  for (unsigned char c : v)
    if (c <= ' ' || c == '"' || c == '=' || c == '\\' || c >= 0x7f) return true;
  return false;
}

void append_value(std::string& out, std::string_view v) {
  if (!needs_quotes(v)) {
    out += v;
    return;
  }
  out += '"';
  for (unsigned char c : v) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
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

void set_level(level l) { g_level.store(static_cast<int>(l), std::memory_order_relaxed); }

bool enabled(level l) { return static_cast<int>(l) >= g_level.load(std::memory_order_relaxed); }

void write(level l, std::string_view event, std::initializer_list<field> fields) {
  if (!enabled(l)) return;
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
  line += '\n';
  // One write per line: concurrent lines never interleave. A failed log write has nowhere to be reported.
  [[maybe_unused]] auto n = ::write(STDERR_FILENO, line.data(), line.size());
}

}  // namespace baton::log
