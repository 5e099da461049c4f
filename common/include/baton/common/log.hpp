// SPDX-License-Identifier: Apache-2.0
#pragma once
// One logging facility for every Baton process: one line per event on stderr, structured as fields. Two
// formats (--log-format):
//   logfmt (default): ts=2026-11-30T10:00:00.123Z level=info event=acquire key=jobs/a token=7 latency_us=310
//   json:             {"ts":"2026-11-30T10:00:00.123Z","level":"info","event":"acquire","key":"jobs/a",...}
// Under systemd, when stderr is the journal (JOURNAL_STREAM names it), each line starts with its syslog
// priority (`<6>` info, `<4>` warn, ...) so `journalctl -p warning` selects by level.
// Thread-safe; a line is written with a single write(2) so lines from several threads never interleave.

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>

namespace baton::log {

enum class level { debug = 0, info = 1, warn = 2, error = 3 };

/// Parses "debug", "info", "warn" or "error"; returns false for anything else.
bool parse_level(std::string_view text, level& out);

/// Sets the minimum level that is written (default: info).
void set_level(level l);
bool enabled(level l);

/// How a line is written. logfmt: `ts=... level=... event=...` then the fields, every token `name=value`
/// (values quoted and escaped as `field` says). json: one object per line, `ts`, `level`, `event`, then the
/// fields (and `suppressed`), every value a JSON string; see `field` for how values are escaped.
enum class format { logfmt, json };

/// Parses "logfmt" or "json"; returns false for anything else.
bool parse_format(std::string_view text, format& out);

/// Sets the format of the lines written from now on (default: logfmt). Thread-safe.
void set_format(format f);

/// Sends the lines to `fd` instead of stderr, and decides again whether they carry the journald priority
/// prefix (is_journal_stream on `fd`). For tests; call it before other threads log.
void set_output(int fd);

/// True when `journal_stream` (JOURNAL_STREAM as systemd sets it: "DEV:INO", the device and inode numbers
/// in decimal of the stream it connected to the journal) names the file open on `fd`. False when it is
/// null, malformed, or names another file: then stderr was redirected, and a `<N>` prefix would only clutter
/// whatever reads it.
bool is_journal_stream(const char* journal_stream, int fd);

/// One field of a log line. A value with a space, quote, '=', backslash or any byte outside printable ASCII
/// is quoted; inside the quotes `"` and `\` are escaped with a backslash, ASCII control bytes and bytes that
/// are not UTF-8 are written `\xNN`, and code points that break or reorder a line on a terminal (C1
/// controls, U+2028/U+2029, bidirectional controls such as U+202E) are written `\uNNNN`. Other UTF-8 is
/// kept as it is. So one event is one line, which reads as what it holds, whatever a client sent.
/// In JSON every value is a string: `"` and `\` are escaped with a backslash, control bytes and the code
/// points above as `\uNNNN` (`\n`, `\t`, ... for the usual ones), so a parser gets the value back exactly;
/// a byte that is not part of well-formed UTF-8 becomes U+FFFD, since a JSON text is UTF-8 and cannot carry
/// it (the logfmt format keeps it as `\xNN`).
struct field {
  std::string_view name;
  std::string value;

  field(std::string_view n, std::string_view v) : name(n), value(v) {}
  field(std::string_view n, const char* v) : name(n), value(v) {}
  field(std::string_view n, const std::string& v) : name(n), value(v) {}
  template <class Int>
  requires std::is_arithmetic_v<Int> field(std::string_view n, Int v) : name(n), value(std::to_string(v)) {}
};

/// Bounds the lines one event may write: at most `lines_per_second` lines of an event in each one-second
/// window; the rest are dropped and counted, and the first line of the event in a later window carries
/// `suppressed=K`. A client that can make a process log (a failed TLS handshake is a warn line) then cannot
/// make it write without bound. Pure: time is an argument. Thread-safe.
class throttle {
 public:
  using clock = std::chrono::steady_clock;
  explicit throttle(unsigned lines_per_second) : limit_(lines_per_second) {}

  /// nullopt: drop the line. Otherwise write it; the value is how many lines of `event` were dropped
  /// since the last one written (0: none).
  std::optional<std::uint64_t> admit(std::string_view event, clock::time_point now);

 private:
  struct window {
    clock::time_point start;
    unsigned written = 0;
    std::uint64_t suppressed = 0;
  };
  unsigned limit_;
  std::mutex mu_;
  std::unordered_map<std::string, window> events_;  // event names are constants in the code: bounded
};

/// Lines per event per second that write() lets through at info, warn and error (debug is not throttled:
/// whoever turns it on asked for everything).
inline constexpr unsigned lines_per_event_per_second = 20;

/// `text` as a log value: unchanged when it needs no quotes, else quoted and escaped as `field` says. For
/// any output a terminal shows that carries text a client chose (the CLI's messages).
std::string printable(std::string_view text);

/// True for the code points a log value escapes as `\uNNNN`: C1 controls, U+2028/U+2029 and the
/// bidirectional formatting characters.
bool is_layout_control(char32_t cp);

/// Writes a line of `event` and the fields, if `l` is enabled (throttled, see throttle).
void write(level l, std::string_view event, std::initializer_list<field> fields = {});
/// The same, never throttled: for lines whose volume the operator controls and which are data to them
/// (baton-agent's `job_output`, a job's own stdout and stderr), where a dropped line would be lost output.
void write_unthrottled(level l, std::string_view event, std::initializer_list<field> fields = {});

inline void debug(std::string_view e, std::initializer_list<field> f = {}) {
  write(level::debug, e, f);
}
inline void info(std::string_view e, std::initializer_list<field> f = {}) {
  write(level::info, e, f);
}
inline void warn(std::string_view e, std::initializer_list<field> f = {}) {
  write(level::warn, e, f);
}
inline void error(std::string_view e, std::initializer_list<field> f = {}) {
  write(level::error, e, f);
}

}  // namespace baton::log
