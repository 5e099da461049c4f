// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE log
#include <boost/test/unit_test.hpp>

#include "baton/common/log.hpp"
#include "temp_dir.hpp"

#include <boost/json.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <random>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace logging = baton::log;
using baton::test::temp_dir;

namespace {

// The log's output sent to a file for the life of the object, with JOURNAL_STREAM as given (nullptr: unset),
// then back to stderr.
class captured_log {
 public:
  explicit captured_log(logging::format f, const char* journal_stream = nullptr)
      : path_(dir_.path() / "log") {
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
    if (fd_ < 0) throw std::runtime_error("cannot open " + path_.string());
    if (journal_stream)
      ::setenv("JOURNAL_STREAM", journal_stream, 1);
    else
      ::unsetenv("JOURNAL_STREAM");
    logging::set_format(f);
    logging::set_output(fd_);
  }
  ~captured_log() {
    logging::set_output(STDERR_FILENO);
    logging::set_format(logging::format::logfmt);
    ::unsetenv("JOURNAL_STREAM");
    ::close(fd_);
  }
  int fd() const { return fd_; }

  std::vector<std::string> lines() const {
    std::ifstream in(path_, std::ios::binary);
    std::stringstream all;
    all << in.rdbuf();
    std::string text = all.str();
    if (!text.empty() && text.back() != '\n') throw std::runtime_error("the log does not end with a newline");
    std::vector<std::string> out;
    for (std::size_t at = 0; at < text.size();) {
      auto nl = text.find('\n', at);
      out.push_back(text.substr(at, nl - at));
      at = nl + 1;
    }
    return out;
  }

 private:
  temp_dir dir_;
  std::filesystem::path path_;
  int fd_ = -1;
};

std::string dev_ino(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw std::runtime_error("fstat failed");
  return std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  throw std::runtime_error(std::string("not a hex digit: ") + c);
}

// A logfmt reader, written from the format's description rather than from the writer: tokens separated by
// one space, each `name=value`; a value is bare (no space, quote or '=') or quoted, with `\"`, `\\`, `\xNN`
// (a byte) and `\uNNNN` (a code point) inside the quotes. Throws on anything else.
std::vector<std::pair<std::string, std::string>> parse_logfmt(std::string_view line) {
  std::vector<std::pair<std::string, std::string>> out;
  std::size_t i = 0;
  while (i < line.size()) {
    if (!out.empty()) {
      if (line[i] != ' ') throw std::runtime_error("tokens are not separated by one space");
      ++i;
    }
    auto eq = line.find('=', i);
    if (eq == std::string_view::npos || eq == i) throw std::runtime_error("a token is not name=value");
    std::string name(line.substr(i, eq - i));
    if (name.find_first_of(" \"\\") != std::string::npos) throw std::runtime_error("a bad name: " + name);
    i = eq + 1;
    std::string value;
    if (i < line.size() && line[i] == '"') {
      ++i;
      for (;;) {
        if (i >= line.size()) throw std::runtime_error("an unterminated quote");
        char c = line[i++];
        if (c == '"') break;
        if (c != '\\') {
          value += c;
          continue;
        }
        if (i >= line.size()) throw std::runtime_error("a lone backslash");
        char e = line[i++];
        if (e == '"' || e == '\\') {
          value += e;
        } else if (e == 'x' && i + 2 <= line.size()) {
          value += static_cast<char>(hex_digit(line[i]) * 16 + hex_digit(line[i + 1]));
          i += 2;
        } else if (e == 'u' && i + 4 <= line.size()) {
          char32_t cp = 0;
          for (int k = 0; k < 4; ++k)
            cp = cp * 16 + static_cast<char32_t>(hex_digit(line[i + k]));
          append_utf8(value, cp);
          i += 4;
        } else {
          throw std::runtime_error(std::string("an unknown escape \\") + e);
        }
      }
      if (i < line.size() && line[i] != ' ') throw std::runtime_error("text after a closing quote");
    } else {
      auto end = line.find(' ', i);
      if (end == std::string_view::npos) end = line.size();
      value = std::string(line.substr(i, end - i));
      if (value.empty() || value.find_first_of("\"=") != std::string::npos)
        throw std::runtime_error("a bad bare value: " + value);
      i = end;
    }
    out.emplace_back(std::move(name), std::move(value));
  }
  return out;
}

// True when `s` is well-formed UTF-8 and holds no byte or code point that breaks or reorders a line.
bool one_safe_line(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) return false;
    if (c < 0x80) {
      ++i;
      continue;
    }
    std::size_t n = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 0;
    if (n == 0 || i + n > s.size()) return false;
    char32_t cp = c & (0x7f >> n);
    for (std::size_t k = 1; k < n; ++k) {
      unsigned char b = static_cast<unsigned char>(s[i + k]);
      if ((b & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (b & 0x3f);
    }
    if (logging::is_layout_control(cp)) return false;
    i += n;
  }
  return true;
}

const std::regex timestamp(R"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z)");

// Test strings built from pieces, with what a JSON parser must read back: the string itself where it is
// UTF-8, and U+FFFD for each byte that cannot be part of well-formed UTF-8 wherever it stands.
struct sample {
  std::string raw;
  std::string json_expected;
};

const std::string replacement = "\xef\xbf\xbd";

sample random_sample(std::mt19937& rng) {
  sample s;
  auto pick = [&](unsigned lo, unsigned hi) { return std::uniform_int_distribution<unsigned>(lo, hi)(rng); };
  const unsigned pieces = pick(0, 24);
  for (unsigned p = 0; p < pieces; ++p) {
    switch (pick(0, 5)) {
      case 0:
      case 1: {  // any ASCII byte, controls included
        char c = static_cast<char>(pick(0, 0x7f));
        s.raw += c;
        s.json_expected += c;
        break;
      }
      case 2: {  // a code point, often a layout control or a C1 control
        static const char32_t special[] = {0x85,   0x9b,   0x61c,  0x200e, 0x200f,  0x2028,   0x2029, 0x202e,
                                           0x2066, 0x2069, 0xfeff, 0xfffd, 0x1f600, 0x10ffff, 0xe9,   0x4e2d};
        char32_t cp = pick(0, 1) ? special[pick(0, std::size(special) - 1)] : pick(0x80, 0x10ffff);
        if (cp >= 0xd800 && cp <= 0xdfff) cp = 0xe000;
        std::string enc;
        append_utf8(enc, cp);
        s.raw += enc;
        s.json_expected += enc;
        break;
      }
      case 3: {  // a byte that is never part of well-formed UTF-8
        static const unsigned char never[] = {0x80, 0x9f, 0xa0, 0xbf, 0xc0, 0xc1, 0xf5, 0xf8, 0xfe, 0xff};
        s.raw += static_cast<char>(never[pick(0, std::size(never) - 1)]);
        s.json_expected += replacement;
        break;
      }
      case 4: {  // a sequence cut short, then ASCII: each of its bytes stands alone
        std::string enc;
        append_utf8(enc, pick(0x800, 0x10ffff));
        enc.pop_back();
        s.raw += enc + "z";
        for (std::size_t k = 0; k < enc.size(); ++k)
          s.json_expected += replacement;
        s.json_expected += 'z';
        break;
      }
      default: {  // what a value needs quotes for
        static const char* const marks[] = {" ", "\"", "\\", "=", "\\x41", "\\u202e", "level=error"};
        std::string m = marks[pick(0, std::size(marks) - 1)];
        s.raw += m;
        s.json_expected += m;
      }
    }
  }
  return s;
}

std::string field_name(std::size_t i) {
  return "f" + std::to_string(i);
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_logfmt_line_is_name_value_pairs_starting_with_ts_level_and_event) {
  std::vector<std::pair<std::string, std::string>> written;
  {
    captured_log out(logging::format::logfmt);
    logging::info("acquire",
                  {{"key", "jobs/a"}, {"token", 7}, {"owner", "node 1"}, {"note", "a=\"b\" \\ c"}});
    auto lines = out.lines();
    BOOST_REQUIRE_EQUAL(lines.size(), 1u);
    written = parse_logfmt(lines[0]);
  }
  BOOST_REQUIRE_EQUAL(written.size(), 7u);
  BOOST_TEST(written[0].first == "ts");
  BOOST_TEST(std::regex_match(written[0].second, timestamp), written[0].second);
  BOOST_TEST(written[1].first == "level");
  BOOST_TEST(written[1].second == "info");
  BOOST_TEST(written[2].first == "event");
  BOOST_TEST(written[2].second == "acquire");
  BOOST_TEST(written[3].second == "jobs/a");
  BOOST_TEST(written[4].second == "7");
  BOOST_TEST(written[5].second == "node 1");
  BOOST_TEST(written[6].first == "note");
  BOOST_TEST(written[6].second == "a=\"b\" \\ c");
}

BOOST_AUTO_TEST_CASE(every_byte_value_and_random_strings_round_trip_through_logfmt) {
  std::vector<std::string> values;
  for (int b = 0; b < 256; ++b) {
    values.push_back(std::string(1, static_cast<char>(b)));
    values.push_back("a" + std::string(1, static_cast<char>(b)) + "b c");
  }
  std::mt19937 rng(20261130);
  for (int n = 0; n < 1000; ++n) {
    values.push_back(random_sample(rng).raw);
    std::string bytes(std::uniform_int_distribution<int>(0, 16)(rng), '\0');
    for (auto& c : bytes)
      c = static_cast<char>(std::uniform_int_distribution<int>(0, 255)(rng));
    values.push_back(bytes);
  }
  values.push_back("");

  captured_log out(logging::format::logfmt);
  for (std::size_t i = 0; i < values.size(); ++i)
    logging::write_unthrottled(logging::level::info, "value", {{field_name(i), values[i]}});
  auto lines = out.lines();
  BOOST_REQUIRE_EQUAL(lines.size(), values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    BOOST_TEST_CONTEXT("value " << i << ", line " << lines[i]) {
      BOOST_TEST(one_safe_line(lines[i]));
      auto fields = parse_logfmt(lines[i]);
      BOOST_REQUIRE_EQUAL(fields.size(), 4u);
      BOOST_TEST(fields[3].first == field_name(i));
      BOOST_TEST((fields[3].second == values[i]));
    }
  }
}

BOOST_AUTO_TEST_CASE(every_byte_value_and_random_strings_parse_back_from_json) {
  std::vector<sample> samples;
  for (int b = 0; b < 256; ++b) {
    std::string raw(1, static_cast<char>(b));
    std::string expected = b < 0x80 ? raw : replacement;
    samples.push_back({raw, expected});
    samples.push_back({"a" + raw + "b", "a" + expected + "b"});
  }
  std::mt19937 rng(7);
  for (int n = 0; n < 2000; ++n)
    samples.push_back(random_sample(rng));

  captured_log out(logging::format::json);
  for (std::size_t i = 0; i < samples.size(); ++i)
    logging::write_unthrottled(logging::level::warn, samples[i].raw, {{"n", i}, {"value", samples[i].raw}});
  auto lines = out.lines();
  BOOST_REQUIRE_EQUAL(lines.size(), samples.size());
  for (std::size_t i = 0; i < samples.size(); ++i) {
    BOOST_TEST_CONTEXT("sample " << i << ", line " << lines[i]) {
      BOOST_TEST(one_safe_line(lines[i]));
      boost::system::error_code ec;
      auto v = boost::json::parse(lines[i], ec);
      BOOST_REQUIRE(!ec);
      BOOST_REQUIRE(v.is_object());
      const auto& o = v.as_object();
      BOOST_REQUIRE_EQUAL(o.size(), 5u);
      auto it = o.begin();
      BOOST_TEST(it->key() == "ts");
      BOOST_TEST(std::regex_match(std::string(it->value().as_string()), timestamp));
      ++it;
      BOOST_TEST(it->key() == "level");
      BOOST_TEST(it->value().as_string() == "warn");
      ++it;
      BOOST_TEST(it->key() == "event");
      BOOST_TEST((std::string(it->value().as_string()) == samples[i].json_expected));
      BOOST_TEST(o.at("n").as_string() == std::to_string(i));
      BOOST_TEST((std::string(o.at("value").as_string()) == samples[i].json_expected));
    }
  }
}

BOOST_AUTO_TEST_CASE(a_throttled_json_line_carries_suppressed_as_a_string) {
  captured_log out(logging::format::json);
  for (unsigned i = 0; i < logging::lines_per_event_per_second + 5; ++i)
    logging::warn("json_flood", {{"i", i}});
  // The window is one second: wait past it, then one more line says how many were dropped. Dropped lines
  // may be fewer than 5 only if this machine stalled for a second mid-loop; then there is nothing to check.
  ::usleep(1'100'000);
  logging::warn("json_flood", {{"i", "last"}});
  auto lines = out.lines();
  BOOST_REQUIRE(!lines.empty());
  auto last = boost::json::parse(lines.back()).as_object();
  BOOST_TEST(last.at("i").as_string() == "last");
  if (lines.size() == logging::lines_per_event_per_second + 1)
    BOOST_TEST(last.at("suppressed").as_string() == "5");
}

BOOST_AUTO_TEST_CASE(lines_carry_the_syslog_priority_when_journal_stream_names_the_output) {
  temp_dir dir;
  // JOURNAL_STREAM is read when the output is set, so it must name the file before the file is the output:
  // create it first and learn its device and inode.
  auto path = dir.path() / "journal";
  int probe = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  BOOST_REQUIRE(probe >= 0);
  ::close(probe);
  std::vector<std::string> lines;
  {
    logging::set_level(logging::level::debug);
    int fd = ::open(path.c_str(), O_RDWR | O_APPEND | O_CLOEXEC);
    BOOST_REQUIRE(fd >= 0);
    ::setenv("JOURNAL_STREAM", dev_ino(fd).c_str(), 1);
    logging::set_output(fd);
    logging::debug("d");
    logging::info("i");
    logging::warn("w");
    logging::error("e");
    logging::set_format(logging::format::json);
    logging::warn("j");
    logging::set_format(logging::format::logfmt);
    logging::set_output(STDERR_FILENO);
    ::unsetenv("JOURNAL_STREAM");
    ::close(fd);
    logging::set_level(logging::level::info);
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);)
      lines.push_back(line);
  }
  BOOST_REQUIRE_EQUAL(lines.size(), 5u);
  BOOST_TEST(lines[0].rfind("<7>ts=", 0) == 0, lines[0]);
  BOOST_TEST(lines[1].rfind("<6>ts=", 0) == 0, lines[1]);
  BOOST_TEST(lines[2].rfind("<4>ts=", 0) == 0, lines[2]);
  BOOST_TEST(lines[3].rfind("<3>ts=", 0) == 0, lines[3]);
  BOOST_TEST(lines[4].rfind("<4>{\"ts\":", 0) == 0, lines[4]);
  // What follows the prefix is an ordinary line.
  BOOST_TEST(parse_logfmt(lines[2].substr(3))[2].second == "w");
  BOOST_TEST(boost::json::parse(lines[4].substr(3)).as_object().at("event").as_string() == "j");
}

BOOST_AUTO_TEST_CASE(no_prefix_when_journal_stream_names_another_file_or_is_unset_or_malformed) {
  int other[2];
  BOOST_REQUIRE(::pipe(other) == 0);
  const std::string elsewhere = dev_ino(other[0]);
  for (const char* stream :
       {elsewhere.c_str(), static_cast<const char*>(nullptr), "", "12", "a:b", "1:2:3"}) {
    BOOST_TEST_CONTEXT("JOURNAL_STREAM=" << (stream ? stream : "(unset)")) {
      captured_log out(logging::format::logfmt, stream);
      BOOST_TEST(!logging::is_journal_stream(stream, out.fd()));
      logging::warn("plain");
      auto lines = out.lines();
      BOOST_REQUIRE_EQUAL(lines.size(), 1u);
      BOOST_TEST(lines[0].rfind("ts=", 0) == 0, lines[0]);
    }
  }
  ::close(other[0]);
  ::close(other[1]);
}

BOOST_AUTO_TEST_CASE(is_journal_stream_matches_the_device_and_inode_of_the_fd_only) {
  int a[2], b[2];
  BOOST_REQUIRE(::pipe(a) == 0);
  BOOST_REQUIRE(::pipe(b) == 0);
  BOOST_TEST(logging::is_journal_stream(dev_ino(a[1]).c_str(), a[1]));
  BOOST_TEST(logging::is_journal_stream(dev_ino(a[1]).c_str(), a[0]));  // both ends are one pipe
  BOOST_TEST(!logging::is_journal_stream(dev_ino(b[1]).c_str(), a[1]));
  BOOST_TEST(!logging::is_journal_stream((dev_ino(a[1]) + " ").c_str(), a[1]));
  BOOST_TEST(!logging::is_journal_stream(dev_ino(a[1]).c_str(), 9999));  // not an open fd
  for (int fd : {a[0], a[1], b[0], b[1]})
    ::close(fd);
}

BOOST_AUTO_TEST_CASE(parse_format_takes_logfmt_and_json_only) {
  logging::format f = logging::format::json;
  BOOST_TEST(logging::parse_format("logfmt", f));
  BOOST_TEST((f == logging::format::logfmt));
  BOOST_TEST(logging::parse_format("json", f));
  BOOST_TEST((f == logging::format::json));
  for (const char* bad : {"", "JSON", "text", "json "})
    BOOST_TEST(!logging::parse_format(bad, f), bad);
}
