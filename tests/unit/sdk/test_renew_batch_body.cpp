// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE renew_batch_body
#include <boost/test/unit_test.hpp>

// The batch renew body's entries are written as text, not built as JSON values: each entry must be the very
// object Boost.JSON's serializer writes. Its strings are written by baton::append_json_string, checked byte
// for byte by test_json_string.

#include "renew_batch_body.hpp"

#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <cstdint>
#include <limits>
#include <string>

using baton::renew_entry;
using baton::detail::append_renew_entry;
namespace json = boost::json;

BOOST_AUTO_TEST_CASE(an_entry_is_the_object_boost_json_would_write) {
  const std::uint64_t tokens[] = {0, 1, 42, std::numeric_limits<std::uint64_t>::max()};
  const std::int64_t ttls[] = {0, 1, 15'000, std::numeric_limits<std::int64_t>::max()};
  // Quotes, backslashes, control bytes, multi-byte UTF-8 and bytes that are not UTF-8, in keys and owners.
  const std::string keys[] = {"jobs/nightly", "k\"\\\n\x01\x1f", "cl\xc3\xa9/\xe2\x82\xac/\xf0\x9d\x84\x9e",
                              "\xff\xfe raw"};
  const std::string owners[] = {"host-1:4242", "o\t\"w\"\x7f", ""};
  for (auto token : tokens)
    for (auto ttl : ttls)
      for (const auto& key : keys)
        for (const auto& owner : owners) {
          renew_entry e{key, owner, token, baton::milliseconds(ttl)};
          std::string out = "[";  // appends, keeping what is there
          append_renew_entry(out, e);
          BOOST_TEST(out.front() == '[');
          const auto expected = json::serialize(json::object{
              {"key", e.key}, {"owner", e.owner}, {"token", e.token}, {"ttl_ms", e.ttl.count()}});
          BOOST_TEST(out.substr(1) == expected);
          if (key.starts_with('\xff')) continue;  // not UTF-8: Boost.JSON's parser refuses it, as it should
          const auto back = json::parse(out.substr(1)).as_object();
          BOOST_TEST(back.at("key").as_string() == e.key);
          BOOST_TEST(back.at("owner").as_string() == e.owner);
          BOOST_TEST(back.at("token").to_number<std::uint64_t>() == token);
          BOOST_TEST(back.at("ttl_ms").to_number<std::int64_t>() == ttl);
        }
}
