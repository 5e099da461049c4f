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

// --etcd-lease-revocation-bug sets client_config::etcd_lease_revocation_bug for every command that makes a
// client, before or after the command word, as `--flag value` or `--flag=value`.
BOOST_AUTO_TEST_CASE(etcd_lease_revocation_bug_is_a_flag_of_every_command_that_talks_to_a_server) {
  const std::string etcd = "etcd://127.0.0.1:2379";
  const std::vector<std::vector<std::string>> commands = {
      {"get", "k"},
      {"acquire", "k", "--ttl", "10s"},
      {"renew", "k", "--owner", "o", "--token", "3", "--ttl", "10s"},
      {"release", "k", "--owner", "o", "--token", "3"},
      {"exec", "k", "--ttl", "10s", "--", "true"},
      {"conformance"},
  };
  for (const auto& command : commands) {
    BOOST_TEST_CONTEXT(command.front()) {
      auto after = command;
      after.insert(after.begin() + 1, {"--server", etcd, "--etcd-lease-revocation-bug=refuse"});
      BOOST_TEST((parse_command_line(after, nullptr).client.etcd_lease_revocation_bug ==
                  baton::etcd_bug_policy::refuse));
      auto before = command;
      before.insert(before.begin(), {"--etcd-lease-revocation-bug", "warn"});
      BOOST_TEST((parse_command_line(before, etcd.c_str()).client.etcd_lease_revocation_bug ==
                  baton::etcd_bug_policy::warn));
      BOOST_TEST((parse_command_line(command, etcd.c_str()).client.etcd_lease_revocation_bug ==
                  baton::etcd_bug_policy::warn));  // the SDK's default
    }
  }
  auto refused = [](std::vector<std::string> args) {
    try {
      parse_command_line(args, nullptr);
    } catch (const cli_error& e) {
      BOOST_TEST(e.code() == exit_code::usage);
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  BOOST_TEST(
      refused({"get", "k", "--server", etcd, "--etcd-lease-revocation-bug", "ignore"}) ==
      "get: --etcd-lease-revocation-bug: expected warn or refuse, got \"ignore\" (see baton get --help)");
  BOOST_TEST(refused({"get", "k", "--server", etcd, "--etcd-lease-revocation-bug", ""}) ==
             "get: --etcd-lease-revocation-bug: expected warn or refuse, got \"\" (see baton get --help)");
  BOOST_TEST(
      refused({"get", "k", "--etcd-lease-revocation-bug", "refuse"}) ==
      "get: --etcd-lease-revocation-bug needs an etcd:// or etcds:// server, got \"http://127.0.0.1:7070\" "
      "(see baton get --help)");
  BOOST_TEST(refused({"get", "k", "--server", etcd, "--etcd-lease-revocation-bug"})
                 .find("get: the required argument for option '--etcd-lease-revocation-bug' is missing") ==
             0u);
}

BOOST_AUTO_TEST_CASE(ls_takes_an_optional_prefix_a_limit_a_cursor_and_json) {
  auto all = std::get<ls_command>(parse_command_line({"ls"}, nullptr).what);
  BOOST_TEST(all.prefix.empty());
  BOOST_TEST(all.limit == 1000u);
  BOOST_TEST(!all.json);
  auto l = std::get<ls_command>(
      parse_command_line({"ls", "jobs/", "--limit", "5", "--after", "jobs/b", "--json"}, nullptr).what);
  BOOST_TEST(l.prefix == "jobs/");
  BOOST_TEST(l.limit == 5u);
  BOOST_TEST(l.after == "jobs/b");
  BOOST_TEST(l.json);
  for (const char* bad : {"0", "-1", "x", "5x"})
    BOOST_TEST(usage_code([&] {
                 parse_command_line({"ls", "--limit", bad}, nullptr);
               }) == exit_code::usage,
               bad);
  BOOST_TEST(usage_code([] { parse_command_line({"ls", "a", "b"}, nullptr); }) == exit_code::usage);
}

BOOST_AUTO_TEST_CASE(break_takes_a_key_and_an_optional_token) {
  auto any = std::get<break_command>(parse_command_line({"break", "jobs/a"}, nullptr).what);
  BOOST_TEST(any.key == "jobs/a");
  BOOST_TEST(any.token == 0u);
  BOOST_TEST(
      std::get<break_command>(parse_command_line({"break", "k", "--token", "41"}, nullptr).what).token ==
      41u);
  BOOST_TEST(usage_code([] { parse_command_line({"break"}, nullptr); }) == exit_code::usage);
  BOOST_TEST(usage_code([] {
               parse_command_line({"break", "k", "--token", "0"}, nullptr);
             }) == exit_code::usage);
}

BOOST_AUTO_TEST_CASE(acquire_and_exec_take_a_lock_delay_and_other_commands_do_not) {
  BOOST_TEST(std::get<acquire_command>(parse_command_line({"acquire", "k", "--ttl", "10s"}, nullptr).what)
                 .lock_delay.count() == 0);
  BOOST_TEST(std::get<acquire_command>(
                 parse_command_line({"acquire", "k", "--ttl", "10s", "--lock-delay", "5s"}, nullptr).what)
                 .lock_delay.count() == 5000);
  BOOST_TEST(parsed_exec({"--ttl", "10s", "--lock-delay", "750ms"}).lease.lock_delay.count() == 750);
  BOOST_TEST(parsed_exec({"--ttl", "10s"}).lease.lock_delay.count() == 0);
  BOOST_TEST(usage_code([] {
               parse_command_line({"acquire", "k", "--ttl", "10s", "--lock-delay", "soon"}, nullptr);
             }) == exit_code::usage);
  BOOST_TEST(usage_code([] {
               parse_command_line(
                   {"renew", "k", "--owner", "o", "--token", "1", "--ttl", "10s", "--lock-delay", "5s"},
                   nullptr);
             }) == exit_code::usage);
}

BOOST_AUTO_TEST_CASE(acquire_and_exec_take_a_permit_count_and_refuse_a_bad_one) {
  BOOST_TEST(
      std::get<acquire_command>(parse_command_line({"acquire", "k", "--ttl", "10s"}, nullptr).what).permits ==
      1u);
  BOOST_TEST(std::get<acquire_command>(
                 parse_command_line({"acquire", "k", "--ttl", "10s", "--permits", "3"}, nullptr).what)
                 .permits == 3u);
  BOOST_TEST(parsed_exec({"--ttl", "10s", "--permits", "65535"}).permits == 65535u);
  BOOST_TEST(parsed_exec({"--ttl", "10s"}).permits == 1u);
  for (const char* bad : {"0", "65536", "-1", "3x", ""}) {
    BOOST_TEST(usage_code([bad] {
                 parse_command_line({"acquire", "k", "--ttl", "10s", "--permits", bad}, nullptr);
               }) == exit_code::usage,
               bad);
  }
  BOOST_TEST(usage_code([] {
               parse_command_line(
                   {"renew", "k", "--owner", "o", "--token", "1", "--ttl", "10s", "--permits", "3"}, nullptr);
             }) == exit_code::usage);
}
