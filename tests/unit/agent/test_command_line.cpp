// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE agent_command_line
#include <boost/test/unit_test.hpp>

// baton-agent's command line: every flag in both forms, the refusals, and the output of --check-config's
// program warnings and of --next-runs.

#include "command_line.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

using namespace baton::agent;
using action = command_line::action;
namespace fs = std::filesystem;

namespace {

std::string usage_error_of(const std::vector<std::string>& args) {
  try {
    parse_command_line(args);
  } catch (const usage_error& e) {
    return e.what();
  }
  return {};
}

std::chrono::sys_seconds utc(int y, unsigned m, unsigned d, int h = 0, int min = 0) {
  return date::sys_days{date::year{y} / m / d} + std::chrono::hours(h) + std::chrono::minutes(min);
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

struct scratch_dir {
  fs::path path;
  scratch_dir() {
    std::string pattern = (fs::temp_directory_path() / "agent-cli-XXXXXX").string();
    BOOST_REQUIRE(::mkdtemp(pattern.data()));
    path = pattern;
  }
  ~scratch_dir() { fs::remove_all(path); }
  fs::path file(const std::string& name, fs::perms perms) const {
    const auto p = path / name;
    std::ofstream(p) << "#!/bin/sh\n";
    fs::permissions(p, perms);
    return p;
  }
};

}  // namespace

BOOST_AUTO_TEST_CASE(config_takes_both_forms_and_version_takes_no_value) {
  const auto a = parse_command_line({"--config=agent.yaml"});
  BOOST_TEST((a.what == action::run));
  BOOST_TEST(a.config_path == "agent.yaml");
  BOOST_TEST(parse_command_line({"--config", "agent.yaml"}).config_path == "agent.yaml");
  BOOST_TEST((parse_command_line({"--version"}).what == action::version));
  BOOST_TEST((parse_command_line({"--config", "agent.yaml", "--version"}).what == action::version));
  BOOST_TEST((parse_command_line({"--check-config=agent.yaml"}).what == action::check_config));
}

BOOST_AUTO_TEST_CASE(every_override_flag_reaches_apply_overrides) {
  const auto c = parse_command_line({"--config", "f", "--server", "https://s:1", "--identity=pod-1",
                                     "--listen", "[::1]:0", "--election-key", "k", "--log-level", "debug",
                                     "--ca-file", "ca", "--cert", "c", "--key", "k.pem"});
  const std::map<std::string, std::string> expected{
      {"server", "https://s:1"}, {"identity", "pod-1"}, {"listen", "[::1]:0"}, {"election-key", "k"},
      {"log-level", "debug"},    {"ca-file", "ca"},     {"cert", "c"},         {"key", "k.pem"}};
  BOOST_TEST((c.overrides == expected));
  // --check-config takes the same flags; an empty value is passed on (apply_overrides: not given).
  const auto check = parse_command_line({"--check-config", "f", "--identity", ""});
  BOOST_TEST((check.what == action::check_config));
  BOOST_TEST(check.overrides.at("identity").empty());
}

BOOST_AUTO_TEST_CASE(help_wins_and_describes_every_flag) {
  BOOST_TEST((parse_command_line({"--config", "/etc/baton/agent.yaml", "--help"}).what == action::help));
  BOOST_TEST((parse_command_line({"-h"}).what == action::help));
  const auto text = help_text();
  for (const char* flag :
       {"--config", "--check-config", "--next-runs", "--from", "--server", "--identity", "--listen",
        "--election-key", "--log-level", "--ca-file", "--cert", "--key", "--help", "--version", "SIGHUP"})
    BOOST_TEST(contains(text, flag), flag);
  // An unknown flag is still refused with --help, so a deployment's command line can be checked with it.
  BOOST_TEST(contains(usage_error_of({"--conifg", "f", "--help"}), "--conifg"));
}

BOOST_AUTO_TEST_CASE(bad_command_lines_are_refused_naming_the_flag) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> table = {
      {{}, "--config FILE is required"},
      {{"--config"}, "--config"},
      {{"--config", "a", "--config", "b"}, "--config"},
      {{"--config", "a", "extra"}, "extra"},
      {{"--conf", "a"}, "--conf"},  // no guessing of abbreviations
      {{"--config", "a", "--ttl", "5s"}, "--ttl"},
      {{"--config", ""}, "--config FILE is required"},
      {{"--check-config", ""}, "--check-config needs a FILE"},
      {{"--check-config", "a", "--config", "b"}, "leave out --config"},
      {{"--check-config", "a", "--next-runs", "3"}, "give one"},
      {{"--next-runs", "3"}, "--config FILE is required"},
      {{"--config", "a", "--next-runs", "0"}, "--next-runs: expected a number from 1 to 1000, got \"0\""},
      {{"--config", "a", "--next-runs", "1001"}, "--next-runs: expected a number from 1 to 1000"},
      {{"--config", "a", "--next-runs", "3x"}, "--next-runs: expected a number"},
      {{"--config", "a", "--from", "2026-03-28T00:00:00Z"}, "--from goes with --next-runs"},
      {{"--config", "a", "--next-runs", "3", "--from", "2026-03-28"}, "--from: expected an RFC 3339 time"},
      {{"--config", "a", "--next-runs", "3", "--from", "2026-03-28T00:00:00Zjunk"}, "--from: expected"},
  };
  for (const auto& [args, expected] : table) {
    BOOST_TEST_CONTEXT(args.size() << " arguments, expecting " << expected) {
      BOOST_TEST(contains(usage_error_of(args), expected), usage_error_of(args));
    }
  }
}

BOOST_AUTO_TEST_CASE(next_runs_takes_a_count_and_an_optional_start) {
  const auto c = parse_command_line({"--next-runs", "5", "--config", "a.yaml"});
  BOOST_TEST((c.what == action::next_runs));
  BOOST_TEST(c.next_runs == 5u);
  BOOST_TEST(!c.from.has_value());
  const auto z = parse_command_line({"--next-runs=2", "--config=a", "--from", "2026-03-28T01:30:00Z"});
  BOOST_TEST((*z.from == utc(2026, 3, 28, 1, 30)));
  const auto offset = parse_command_line({"--next-runs=2", "--config=a", "--from=2026-03-28T03:30:00+02:00"});
  BOOST_TEST((*offset.from == utc(2026, 3, 28, 1, 30)));
}

BOOST_AUTO_TEST_CASE(next_runs_shows_local_time_across_daylight_saving) {
  const auto config = parse_config(R"(jobs:
  - name: nightly
    schedule: "30 2 * * *"
    timezone: Europe/Berlin
    command: [x]
  - name: quarter
    schedule: "*/15 * * * *"
    command: [x]
  - name: never-again
    schedule: "0 0 1 1 *"
    command: [x]
)",
                                   "t.yaml");
  BOOST_TEST(next_runs_text(config, utc(2026, 3, 28), 3) ==
             "nightly: \"30 2 * * *\" in Europe/Berlin\n"
             "  2026-03-28 02:30:00 CET +01:00  2026-03-28T01:30:00Z\n"
             "  2026-03-29 03:00:00 CEST +02:00  2026-03-29T01:00:00Z\n"  // 02:30 does not exist that day
             "  2026-03-30 02:30:00 CEST +02:00  2026-03-30T00:30:00Z\n"
             "quarter: \"*/15 * * * *\" in UTC\n"
             "  2026-03-28 00:15:00 UTC +00:00  2026-03-28T00:15:00Z\n"
             "  2026-03-28 00:30:00 UTC +00:00  2026-03-28T00:30:00Z\n"
             "  2026-03-28 00:45:00 UTC +00:00  2026-03-28T00:45:00Z\n"
             "never-again: \"0 0 1 1 *\" in UTC\n"
             "  2027-01-01 00:00:00 UTC +00:00  2027-01-01T00:00:00Z\n"
             "  2028-01-01 00:00:00 UTC +00:00  2028-01-01T00:00:00Z\n"
             "  2029-01-01 00:00:00 UTC +00:00  2029-01-01T00:00:00Z\n");
  // Past the calculator's range there is no slot, and the output says so.
  const auto end = date::sys_days{date::year{9999} / 12 / 31} + std::chrono::hours(23);
  BOOST_TEST(contains(next_runs_text(config, end, 2),
                      "never-again: \"0 0 1 1 *\" in UTC\n  no slot after 9999-12-31T23:00:00Z\n"));
  BOOST_TEST(next_runs_text(parse_config("", "t.yaml"), utc(2026, 1, 1), 3) == "no jobs\n");
}

BOOST_AUTO_TEST_CASE(a_program_is_looked_up_as_execvp_does) {
  scratch_dir dir;
  const auto runnable = dir.file("tool", fs::perms::owner_all);
  dir.file("plain", fs::perms::owner_read | fs::perms::owner_write);
  fs::create_directory(dir.path / "folder");
  const auto path = "/nonexistent-dir:" + dir.path.string();

  BOOST_TEST(program_problem("tool", path.c_str()).empty());
  BOOST_TEST(program_problem(runnable.string(), nullptr).empty());  // a path is used as it is
  BOOST_TEST(program_problem("sh", nullptr).empty());               // no PATH: execvp's /bin:/usr/bin
  BOOST_TEST(contains(program_problem("tool", "/nonexistent-dir"),
                      "\"tool\" is not found in PATH (/nonexistent-dir)"));
  BOOST_TEST(contains(program_problem("plain", path.c_str()), "plain\": not executable by this user"));
  BOOST_TEST(contains(program_problem("folder", path.c_str()), "folder\": not a regular file"));
  BOOST_TEST(
      contains(program_problem((dir.path / "missing").string(), nullptr), "No such file or directory"));
  // An empty element of PATH is the working directory.
  const auto cwd = fs::current_path();
  fs::current_path(dir.path);
  BOOST_TEST(program_problem("tool", "/nonexistent-dir::").empty());
  fs::current_path(cwd);
}

BOOST_AUTO_TEST_CASE(check_config_warns_about_programs_this_machine_cannot_run) {
  const auto config = parse_config(R"(jobs:
  - name: ok
    schedule: "* * * * *"
    command: [sh, -c, "true"]
  - name: missing
    schedule: "* * * * *"
    command: ["no-such-program-here", --flag]
  - name: web
    schedule: "* * * * *"
    http: {url: "http://127.0.0.1:9/"}
  - name: script
    schedule: "* * * * *"
    shell: true
    command: "no-such-program-here too"
)",
                                   "agent.yaml");
  const auto warnings = program_warnings(config, "agent.yaml", "/usr/bin:/bin");
  BOOST_REQUIRE(warnings.size() == 1u);
  BOOST_TEST(
      warnings[0] ==
      "agent.yaml:7:15: jobs[1].command[0]: \"no-such-program-here\" is not found in PATH (/usr/bin:/bin); "
      "its runs would end as spawn_failed on this machine");
}

BOOST_AUTO_TEST_CASE(run_now_takes_a_job_name_and_the_config_with_overrides) {
  const auto c =
      parse_command_line({"run-now", "report", "--config", "a.yaml", "--listen", "127.0.0.1:7071"});
  BOOST_TEST((c.what == command_line::action::run_now));
  BOOST_TEST(c.job == "report");
  BOOST_TEST(c.config_path == "a.yaml");
  BOOST_TEST(c.overrides.at("listen") == "127.0.0.1:7071");
  BOOST_TEST(usage_error_of({"run-now"}).starts_with("run-now needs the job's NAME"));
  BOOST_TEST(usage_error_of({"run-now", "--config", "a.yaml"}).starts_with("run-now needs the job's NAME"));
  BOOST_TEST(usage_error_of({"run-now", "report"}).starts_with("--config FILE is required"));
  BOOST_TEST(usage_error_of({"run-now", "report", "--config", "a.yaml", "--next-runs", "3"})
                 .starts_with("--next-runs and run-now are two commands"));
  BOOST_TEST(usage_error_of({"run-now", "report", "--check-config", "a.yaml"})
                 .starts_with("--check-config and run-now are two commands"));
  BOOST_TEST(usage_error_of({"run-now", "report", "other", "--config", "a.yaml"})
                 .starts_with("unexpected argument \"other\""));
  // Only as the first word: elsewhere it is a stray argument.
  BOOST_TEST(usage_error_of({"--config", "a.yaml", "run-now", "report"}).starts_with("unexpected argument"));
}

BOOST_AUTO_TEST_CASE(check_config_warns_about_a_grace_a_lost_lease_cuts_short) {
  // election.ttl 15 s: safety margin 1.5 s, so a lost lease leaves 750 ms between SIGTERM and SIGKILL.
  const auto config = parse_config(R"(election:
  ttl: 15s
jobs:
  - name: short
    schedule: "* * * * *"
    command: ["true"]
    grace: 750ms
  - name: default
    schedule: "* * * * *"
    command: ["true"]
  - name: long
    schedule: "* * * * *"
    command: ["true"]
    grace: 1s
  - name: web
    schedule: "* * * * *"
    http: {url: "http://127.0.0.1:9/"}
    grace: 1h
)",
                                   "agent.yaml");
  const auto warnings = grace_warnings(config, "agent.yaml");
  // Not the default 5 s (cut without a word, as documented), nor the HTTP job, which has no process.
  BOOST_REQUIRE(warnings.size() == 1u);
  BOOST_TEST(
      warnings[0].starts_with("agent.yaml:14:12: jobs[2].grace: 1000ms is longer than a lost lease leaves: "
                              "after a loss SIGKILL comes 750ms after SIGTERM"),
      warnings[0]);
  auto roomy = config;
  roomy.election.safety_margin = std::chrono::seconds(10);
  BOOST_TEST(grace_warnings(roomy, "agent.yaml").empty());
}

BOOST_AUTO_TEST_CASE(per_job_jobs_sending_to_one_url_are_warned_about_as_fenced_by_different_locks) {
  const std::string jobs = R"(
jobs:
  - name: a
    schedule: "* * * * *"
    http: {url: "http://store:8080/items/report"}
  - name: b
    schedule: "* * * * *"
    http: {url: "http://store:8080/items/report"}
  - name: c
    schedule: "* * * * *"
    http: {url: "http://store:8080/items/other"}
)";
  const auto warnings = fencing_warnings(parse_config("mode: per-job" + jobs, "agent.yaml"), "agent.yaml");
  BOOST_REQUIRE(warnings.size() == 1u);
  BOOST_TEST(warnings[0].starts_with(
                 "agent.yaml: jobs[1].http.url: jobs \"a\" and \"b\" both send to "
                 "\"http://store:8080/items/report\" with the fencing tokens of different locks"),
             warnings[0]);
  // Leader mode: one token fences them all.
  BOOST_TEST(fencing_warnings(parse_config(jobs, "agent.yaml"), "agent.yaml").empty());
}

BOOST_AUTO_TEST_CASE(a_per_job_job_and_a_leader_job_sending_to_one_url_are_warned_about) {
  // Leader mode, but `b` takes its own lock: its tokens and the election's come from one counter.
  const auto config = parse_config(R"(
election: {key: cron/leader}
jobs:
  - name: a
    schedule: "* * * * *"
    http: {url: "http://store:8080/items/report"}
  - name: b
    mode: per-job
    schedule: "* * * * *"
    http: {url: "http://store:8080/items/report"}
  - name: c
    schedule: "* * * * *"
    http: {url: "http://store:8080/items/report"}
)",
                                   "agent.yaml");
  const auto warnings = fencing_warnings(config, "agent.yaml");
  // a and b, b and c; not a and c (both leader jobs: the election's token).
  BOOST_REQUIRE(warnings.size() == 2u);
  BOOST_TEST(warnings[0].find("jobs \"a\" and \"b\"") != std::string::npos, warnings[0]);
  BOOST_TEST(warnings[0].find("(cron/leader, jobs/b)") != std::string::npos, warnings[0]);
  BOOST_TEST(warnings[1].find("jobs \"b\" and \"c\"") != std::string::npos, warnings[1]);
}
