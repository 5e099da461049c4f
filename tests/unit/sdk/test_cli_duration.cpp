// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE cli_duration
#include <boost/test/unit_test.hpp>

#include "baton/common/duration.hpp"

#include <string>

using baton::parse_duration;
using namespace std::chrono_literals;

namespace {
bool refused(std::string_view text) {
  return !parse_duration(text).has_value();
}
}  // namespace

BOOST_AUTO_TEST_CASE(each_unit_scales_to_milliseconds) {
  BOOST_TEST(parse_duration("500ms")->count() == 500);
  BOOST_TEST(parse_duration("10s")->count() == 10'000);
  BOOST_TEST(parse_duration("2m")->count() == 120'000);
  BOOST_TEST(parse_duration("1h")->count() == 3'600'000);
}

BOOST_AUTO_TEST_CASE(parts_add_up) {
  BOOST_TEST(parse_duration("1m30s")->count() == 90'000);
  BOOST_TEST(parse_duration("1h2m3s4ms")->count() == 3'723'004);
  BOOST_TEST(parse_duration("1s500ms")->count() == 1'500);
}

BOOST_AUTO_TEST_CASE(zero_and_leading_zeros_are_durations) {
  BOOST_TEST(parse_duration("0s")->count() == 0);
  BOOST_TEST(parse_duration("0ms")->count() == 0);
  BOOST_TEST(parse_duration("007s")->count() == 7'000);
}

BOOST_AUTO_TEST_CASE(a_number_without_a_unit_is_refused_not_guessed) {
  BOOST_TEST(refused("10"));
  BOOST_TEST(refused("1m30"));
  BOOST_TEST(refused("0"));
}

BOOST_AUTO_TEST_CASE(unknown_units_and_malformed_text_are_refused) {
  for (const char* text : {"", "s", "ms", "10x", "10 s", " 10s", "10s ", "10S", "10sec", "1d", "10us", "1.5s",
                           "-1s", "+1s", "10s10", "m1", "1h-", "1mss", "1e3ms"})
    BOOST_TEST(refused(text), "\"" << text << "\" should be refused");
}

BOOST_AUTO_TEST_CASE(totals_beyond_64_bit_milliseconds_are_refused) {
  BOOST_TEST(parse_duration("9223372036854775807ms")->count() == 9223372036854775807);
  BOOST_TEST(refused("9223372036854775808ms"));
  BOOST_TEST(refused("9223372036854776s"));
  BOOST_TEST(refused("99999999999999999999999h"));
  BOOST_TEST(refused("9223372036854775807ms1ms"));
  BOOST_TEST(parse_duration("2562047788015h")->count() == 2562047788015 * 3'600'000);
  BOOST_TEST(refused("2562047788016h"));
}
