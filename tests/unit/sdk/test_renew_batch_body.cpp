// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE renew_batch_body
#include <boost/test/unit_test.hpp>

// The batch renew body's entries are written as text, not built as JSON values: the text must be the very
// one Boost.JSON's serializer writes, and read back by its parser as the same strings, for every byte.

#include "renew_batch_body.hpp"

#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/string.hpp>

#include <cstdint>
#include <limits>
#include <random>
#include <string>

using baton::renew_entry;
using baton::detail::append_json_string;
using baton::detail::append_renew_entry;
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

BOOST_AUTO_TEST_CASE(an_entry_is_the_object_boost_json_would_write) {
  std::mt19937 rng(7);
  const std::uint64_t tokens[] = {0, 1, 42, std::numeric_limits<std::uint64_t>::max()};
  const std::int64_t ttls[] = {0, 1, 15'000, std::numeric_limits<std::int64_t>::max()};
  for (auto token : tokens)
    for (auto ttl : ttls) {
      renew_entry e{random_utf8(rng, 12) + "\"\\\n", random_utf8(rng, 30), token, baton::milliseconds(ttl)};
      std::string out = "[";
      append_renew_entry(out, e);
      const auto expected = json::serialize(
          json::object{{"key", e.key}, {"owner", e.owner}, {"token", e.token}, {"ttl_ms", e.ttl.count()}});
      BOOST_TEST(out.substr(1) == expected);
      const auto back = json::parse(out.substr(1)).as_object();
      BOOST_TEST(back.at("key").as_string() == e.key);
      BOOST_TEST(back.at("owner").as_string() == e.owner);
      BOOST_TEST(back.at("token").to_number<std::uint64_t>() == token);
      BOOST_TEST(back.at("ttl_ms").to_number<std::int64_t>() == ttl);
    }
}
