// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE json_string
#include <boost/test/unit_test.hpp>

// batond's answers and the SDK's batch renew bodies write their strings as text
// (baton/common/json_string.hpp): the text must be the very one Boost.JSON's serializer writes, and read back
// by its parser as the same string, for every byte.

#include "baton/common/json_string.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/string.hpp>

#include <cstdint>
#include <memory_resource>
#include <random>
#include <string>

using baton::append_json_string;
namespace json = boost::json;

namespace {

std::string as_text(std::string_view s) {
  std::string out;
  append_json_string(out, s);
  return out;
}

std::string reference(std::string_view s) {
  return json::serialize(json::string(s));
}

// A string of `n` code points, each from the whole Unicode range but surrogates, as UTF-8.
std::string random_utf8(std::mt19937& rng, std::size_t n) {
  std::uniform_int_distribution<std::uint32_t> plane(0, 3), ascii(0, 0x7f), any(0, 0x10ffff);
  std::string s;
  for (std::size_t i = 0; i < n; ++i) {
    std::uint32_t cp = plane(rng) == 0 ? any(rng) : ascii(rng);  // mostly ASCII, with control bytes
    if (cp >= 0xd800 && cp <= 0xdfff) cp = 0xfffd;
    if (cp < 0x80) {
      s += static_cast<char>(cp);
    } else if (cp < 0x800) {
      s += static_cast<char>(0xc0 | (cp >> 6));
      s += static_cast<char>(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      s += static_cast<char>(0xe0 | (cp >> 12));
      s += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      s += static_cast<char>(0x80 | (cp & 0x3f));
    } else {
      s += static_cast<char>(0xf0 | (cp >> 18));
      s += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
      s += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      s += static_cast<char>(0x80 | (cp & 0x3f));
    }
  }
  return s;
}

}  // namespace

BOOST_AUTO_TEST_CASE(every_byte_value_is_written_as_boost_json_writes_it) {
  for (int b = 0; b < 256; ++b) {
    const std::string alone(1, static_cast<char>(b));
    const std::string within = "a" + alone + "z" + alone;
    BOOST_TEST(as_text(alone) == reference(alone), "byte " << b);
    BOOST_TEST(as_text(within) == reference(within), "byte " << b);
  }
  std::string every_byte;
  for (int c = 0; c < 256; ++c)
    every_byte += static_cast<char>(c);
  BOOST_TEST(as_text(every_byte) == reference(every_byte));
  BOOST_TEST(as_text({}) == "\"\"");
  BOOST_TEST(as_text(std::string_view("\x7f\xc2\x85\u2028\0", 7)) ==
             reference(std::string_view("\x7f\xc2\x85\u2028\0", 7)));
}

BOOST_AUTO_TEST_CASE(every_ascii_byte_reads_back_as_itself) {
  for (int b = 0; b < 0x80; ++b) {
    const std::string s =
        "k" + std::string(1, static_cast<char>(b)) + "/" + std::string(1, static_cast<char>(b));
    BOOST_TEST(json::parse(as_text(s)).as_string() == s, "byte " << b);
  }
}

BOOST_AUTO_TEST_CASE(random_strings_are_written_as_boost_json_writes_them_and_read_back) {
  std::mt19937 rng(20261201);
  std::uniform_int_distribution<std::size_t> length(0, 80);
  std::uniform_int_distribution<int> byte(0, 255);
  for (int i = 0; i < 5'000; ++i) {
    std::string bytes(length(rng), '\0');
    for (auto& c : bytes)
      c = static_cast<char>(byte(rng));
    BOOST_TEST(as_text(bytes) == reference(bytes));

    const auto text = random_utf8(rng, length(rng));
    BOOST_TEST(as_text(text) == reference(text));
    BOOST_TEST(json::parse(as_text(text)).as_string() == text);
  }
}

// batond writes its answers into strings of its own allocator; the text is appended to what is there.
BOOST_AUTO_TEST_CASE(appends_to_a_string_of_any_allocator_keeping_what_is_there) {
  std::pmr::monotonic_buffer_resource arena;
  std::pmr::string out("{\"key\":", &arena);
  append_json_string(out, "say \"why\" \\ now\n");
  BOOST_TEST(std::string_view(out) == R"({"key":"say \"why\" \\ now\n")");
}
