// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE cli_command_line
#include <boost/test/unit_test.hpp>

// `baton exec`'s grace against its lease (sdk/cli/command_line.cpp): what fits after a loss, the default,
// and the refusal of a grace that does not fit.

#include "command_line.hpp"
#include "exit_code.hpp"

#include <functional>
#include <string>
#include <vector>

using namespace baton::cli;
using namespace std::chrono_literals;

namespace {

baton::lease_options lease_of(milliseconds ttl, milliseconds margin = 0ms) {
  baton::lease_options o;
  o.ttl = ttl;
  o.safety_margin = margin;
  return o;
}

int usage_code(const std::function<void()>& f) {
  try {
    f();
  } catch (const cli_error& e) {
    return e.code();
  }
  return 0;
}

exec_command parsed_exec(std::vector<std::string> options) {
  std::vector<std::string> args{"exec", "k"};
  args.insert(args.end(), options.begin(), options.end());
  for (const char* a : {"--", "true"})
    args.emplace_back(a);
  return std::get<exec_command>(parse_command_line(args, nullptr).what);
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_default_grace_is_5s_or_what_a_lost_lease_leaves) {
  BOOST_TEST(exec_grace(lease_of(3s), std::nullopt).count() == 150);  // ttl/10 / 2
  BOOST_TEST(exec_grace(lease_of(100s), std::nullopt).count() == 5000);
  BOOST_TEST(exec_grace(lease_of(1h), std::nullopt).count() == 5000);
  BOOST_TEST(exec_grace(lease_of(30s, 12s), std::nullopt).count() == 5000);
  BOOST_TEST(exec_grace(lease_of(30s, 4s), std::nullopt).count() == 2000);
}

BOOST_AUTO_TEST_CASE(a_grace_that_fits_is_taken_as_given) {
  BOOST_TEST(exec_grace(lease_of(3s), 150ms).count() == 150);
  BOOST_TEST(exec_grace(lease_of(3s), 0ms).count() == 0);
  BOOST_TEST(exec_grace(lease_of(30s, 12s), 6s).count() == 6000);
}

BOOST_AUTO_TEST_CASE(a_grace_that_cannot_fit_is_a_usage_error_naming_what_fits) {
  BOOST_TEST(usage_code([] { exec_grace(lease_of(3s), 151ms); }) == exit_code::usage);
  BOOST_TEST(usage_code([] { exec_grace(lease_of(3s), 5s); }) == exit_code::usage);
  try {
    exec_grace(lease_of(3s), 5s);
  } catch (const cli_error& e) {
    const std::string what = e.what();
    BOOST_TEST(what.find("--grace 5s") != std::string::npos, what);
    BOOST_TEST(what.find("at most 150ms") != std::string::npos, what);
    BOOST_TEST(what.find("--safety-margin") != std::string::npos, what);
  }
}

BOOST_AUTO_TEST_CASE(exec_parses_grace_and_safety_margin_against_each_other) {
  BOOST_TEST(parsed_exec({"--ttl", "3s"}).grace.count() == 150);
  BOOST_TEST(parsed_exec({"--ttl", "10s", "--grace", "500ms"}).grace.count() == 500);
  const auto wide = parsed_exec({"--ttl", "30s", "--safety-margin", "12s", "--grace", "5s"});
  BOOST_TEST(wide.lease.safety_margin.count() == 12'000);
  BOOST_TEST(wide.grace.count() == 5000);
  BOOST_TEST(usage_code([] { parsed_exec({"--ttl", "3s", "--grace", "5s"}); }) == exit_code::usage);
  BOOST_TEST(usage_code([] { parsed_exec({"--ttl", "3s", "--safety-margin", "3s"}); }) == exit_code::usage);
  BOOST_TEST(usage_code([] { parsed_exec({"--ttl", "3s", "--safety-margin", "0s"}); }) == exit_code::usage);
}
