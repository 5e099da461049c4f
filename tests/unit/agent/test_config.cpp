// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE agent_config
#include <boost/test/unit_test.hpp>

// baton-agent's configuration: every key read into its field, the defaults, every refusal with the file,
// line, column and key path it names, and the flags that override the file. The configurations shipped in the
// repository (the sample and the docs' example) are parsed too, so they cannot drift from the parser.

#include "config.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

using namespace baton::agent;
using namespace std::chrono_literals;

namespace {

// What parse_config refuses `yaml` with (empty if it accepts it), as the file `t.yaml`.
std::string error_of(const std::string& yaml) {
  try {
    parse_config(yaml, "t.yaml");
  } catch (const config_error& e) {
    return e.what();
  }
  return {};
}

// One job that is valid, lines 1-4, with `extra` appended at the job's indentation (from line 5).
std::string job_with(const std::string& extra) {
  return "jobs:\n"
         "  - name: a\n"
         "    schedule: \"* * * * *\"\n"
         "    command: [x]\n" +
         extra;
}

std::string http_job_with(const std::string& http_body) {
  return "jobs:\n"
         "  - name: a\n"
         "    schedule: \"* * * * *\"\n"
         "    http:\n" +
         http_body;
}

// The build passes the source tree; __FILE__ may be relative to the build directory (e.g. under ccache).
const std::filesystem::path repo_root = BATON_SOURCE_DIR;

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p);
  BOOST_REQUIRE_MESSAGE(in, "cannot open " << p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

BOOST_AUTO_TEST_CASE(every_field_is_read) {
  const auto c = parse_config(R"(# every key, none at its default
server: http://10.0.0.5:8080
identity: node-1
listen: "[::1]:9000"
mode: per-job
log_level: debug
resign_token: s3cr3t-token==
shutdown_grace: 45s
election:
  key: scheduler/leader
  ttl: 15s
  renew_every: 4s
  jitter: 0.1
  safety_margin: 2s
  lock_delay: 5s
jobs:
  - name: heartbeat
    schedule: "*/2 * * * * *"
    command: ["/usr/local/bin/heartbeat", "--fast", ""]
    timeout: 30s
    grace: 1m
    overlap: allow
    misfire: run_once
  - name: nightly-report
    schedule: "0 3 * * *"
    timezone: Europe/Kyiv
    http:
      method: put
      url: "http://127.0.0.1:9000/reports?x=1"
      headers: {X-Job: report, X-Second: "2"}
      body: "{}"
  - name: shell.job_1
    schedule: "@hourly"
    shell: true
    command: "echo $BATON_JOB | logger"
    overlap: replace
)",
                              "full.yaml");
  BOOST_TEST(c.server == "http://10.0.0.5:8080");
  BOOST_TEST(c.identity == "node-1");
  BOOST_TEST(c.listen == "[::1]:9000");
  BOOST_TEST((c.mode == agent_mode::per_job));
  BOOST_TEST(c.log_level == "debug");
  BOOST_TEST(c.resign_token == "s3cr3t-token==");
  BOOST_TEST(c.shutdown_grace.count() == 45'000);
  BOOST_TEST(c.election_key == "scheduler/leader");
  BOOST_TEST(c.election.ttl.count() == 15'000);
  BOOST_TEST(c.election.renew_every.count() == 4'000);
  BOOST_TEST(c.election.jitter == 0.1);
  BOOST_TEST(c.election.safety_margin.count() == 2'000);
  BOOST_TEST(c.election.lock_delay.count() == 5'000);
  BOOST_REQUIRE(c.jobs.size() == 3u);

  const auto& hb = c.jobs[0];
  BOOST_TEST(hb.name == "heartbeat");
  BOOST_TEST(hb.sched.text() == "*/2 * * * * *");
  BOOST_TEST(hb.timezone == "UTC");
  BOOST_TEST(hb.tz == nullptr);
  BOOST_TEST(hb.command == (std::vector<std::string>{"/usr/local/bin/heartbeat", "--fast", ""}));
  BOOST_TEST(!hb.shell);
  BOOST_TEST(!hb.http.has_value());
  BOOST_TEST(hb.timeout.count() == 30'000);
  BOOST_TEST(hb.grace.count() == 60'000);
  BOOST_TEST((hb.overlap == overlap_policy::allow));
  BOOST_TEST((hb.misfire == misfire_policy::run_once));

  const auto& report = c.jobs[1];
  BOOST_TEST(report.timezone == "Europe/Kyiv");
  BOOST_REQUIRE(report.tz != nullptr);
  BOOST_TEST(report.tz->name() == "Europe/Kyiv");
  BOOST_TEST(report.command.empty());
  BOOST_REQUIRE(report.http.has_value());
  BOOST_TEST(report.http->method == "PUT");
  BOOST_TEST(report.http->url == "http://127.0.0.1:9000/reports?x=1");
  BOOST_TEST((report.http->headers ==
              std::vector<std::pair<std::string, std::string>>{{"X-Job", "report"}, {"X-Second", "2"}}));
  BOOST_TEST(report.http->body == "{}");
  // The schedule is evaluated in the job's zone: 03:00 in Kyiv (UTC+2 in January) is 01:00 UTC.
  using namespace date;
  const auto next = report.sched.next_fire(sys_days{2026_y / January / 10} + 12h, report.tz);
  BOOST_REQUIRE(next.has_value());
  BOOST_TEST((*next == sys_days{2026_y / January / 11} + 1h));

  const auto& sh = c.jobs[2];
  BOOST_TEST(sh.name == "shell.job_1");
  BOOST_TEST(sh.shell);
  BOOST_TEST(sh.command == (std::vector<std::string>{"echo $BATON_JOB | logger"}));
  BOOST_TEST((sh.overlap == overlap_policy::replace));
}

BOOST_AUTO_TEST_CASE(defaults_apply_to_every_key_left_out) {
  const auto c = parse_config(job_with(""), "t.yaml");
  const agent_config defaults;
  BOOST_TEST(c.server == "http://127.0.0.1:7070");
  BOOST_TEST(c.identity.empty());
  BOOST_TEST(c.listen == "127.0.0.1:7071");
  BOOST_TEST((c.mode == agent_mode::leader));
  BOOST_TEST(c.log_level == "info");
  BOOST_TEST(c.resign_token.empty());
  BOOST_TEST(c.shutdown_grace.count() == 20'000);
  BOOST_TEST(c.election_key == "baton-agent/leader");
  BOOST_TEST(c.election.ttl.count() == 10'000);
  BOOST_TEST(c.election.jitter == 0.2);
  // Left at 0, which the SDK reads as ttl/3 and ttl/10.
  BOOST_TEST(c.election.renew_every.count() == 0);
  BOOST_TEST(c.election.safety_margin.count() == 0);
  BOOST_TEST(c.election.effective_renew_every().count() == 3'333);
  BOOST_TEST(c.election.effective_safety_margin().count() == 1'000);
  BOOST_TEST(c.election.lock_delay.count() == 0);
  BOOST_REQUIRE(c.jobs.size() == 1u);
  const auto& j = c.jobs[0];
  BOOST_TEST(j.timezone == "UTC");
  BOOST_TEST(j.tz == nullptr);
  BOOST_TEST(!j.shell);
  BOOST_TEST(j.timeout.count() == 0);
  BOOST_TEST(j.grace.count() == 5'000);
  BOOST_TEST((j.overlap == overlap_policy::forbid));
  BOOST_TEST((j.misfire == misfire_policy::skip));
  BOOST_TEST(defaults.jobs.empty());
}

BOOST_AUTO_TEST_CASE(an_empty_file_is_the_default_configuration_without_jobs) {
  for (const char* text : {"", "# only a comment\n", "---\n"}) {
    const auto c = parse_config(text, "t.yaml");
    BOOST_TEST(c.jobs.empty());
    BOOST_TEST(c.server == "http://127.0.0.1:7070");
  }
}

BOOST_AUTO_TEST_CASE(the_issue_example_parses) {
  const auto c = parse_config(R"(
server: http://127.0.0.1:7070      # the lock server (an etcd:// URL comes later)
identity: node-1                   # default: hostname:pid
listen: 127.0.0.1:7071             # sidecar HTTP API
election:
  key: scheduler/leader
  ttl: 10s
  renew_every: 3s                  # default ttl/3
  jitter: 0.2
jobs:
  - name: heartbeat
    schedule: "*/2 * * * * *"      # 6 fields = with seconds; 5 fields = classic cron
    command: ["/usr/local/bin/heartbeat", "--fast"]
    timeout: 30s
    grace: 5s                       # SIGTERM, then SIGKILL after grace
  - name: nightly-report
    schedule: "0 3 * * *"
    timezone: Europe/Kyiv
    http: {method: POST, url: "http://127.0.0.1:9000/reports", headers: {X-Job: report}, body: "{}"}
)",
                              "agent.yaml");
  BOOST_REQUIRE(c.jobs.size() == 2u);
  BOOST_TEST(c.jobs[1].http->headers.size() == 1u);
}

BOOST_AUTO_TEST_CASE(the_shipped_sample_and_the_docs_example_parse) {
  const auto sample = load_config((repo_root / "deploy/agent/sample.yaml").string());
  BOOST_TEST(sample.jobs.size() >= 2u);

  // docs/agent.md: the first ```yaml block is the full example.
  const auto doc = read_file(repo_root / "docs/agent.md");
  const auto begin = doc.find("```yaml\n");
  BOOST_REQUIRE(begin != std::string::npos);
  const auto end = doc.find("```", begin + 8);
  BOOST_REQUIRE(end != std::string::npos);
  const auto example = parse_config(doc.substr(begin + 8, end - begin - 8), "docs/agent.md");
  BOOST_TEST(example.jobs.size() >= 2u);
}

BOOST_AUTO_TEST_CASE(shell_commands) {
  auto c = parse_config(job_with("    shell: true\n"), "t.yaml");
  BOOST_TEST(c.jobs[0].shell);
  BOOST_TEST(c.jobs[0].command == (std::vector<std::string>{"x"}));
  // With a shell a list is `sh -c script $0 $1 ...`: kept as written.
  c = parse_config(
      "jobs:\n  - name: a\n    schedule: \"@daily\"\n    shell: true\n    command: ['echo \"$1\"', sh, "
      "hello]\n",
      "t.yaml");
  BOOST_TEST(c.jobs[0].command == (std::vector<std::string>{"echo \"$1\"", "sh", "hello"}));
}

BOOST_AUTO_TEST_CASE(an_error_carries_its_parts) {
  try {
    parse_config(job_with("    timeout: soon\n"), "dir/agent.yaml");
    BOOST_FAIL("accepted");
  } catch (const config_error& e) {
    BOOST_TEST(e.file() == "dir/agent.yaml");
    BOOST_TEST(e.line() == 5);
    BOOST_TEST(e.column() == 14);
    BOOST_TEST(e.key() == "jobs[0].timeout");
    BOOST_TEST(e.reason() == "\"soon\" is not a duration (write e.g. 500ms, 10s, 2m or 1h30m)");
    BOOST_TEST(std::string(e.what()) ==
               "dir/agent.yaml:5:14: jobs[0].timeout: \"soon\" is not a duration (write e.g. 500ms, 10s, 2m "
               "or 1h30m)");
  }
}

// Each row: a configuration and a part of the one-line error it must get, position and key path included.
BOOST_AUTO_TEST_CASE(invalid_configurations_are_refused_with_place_and_key) {
  struct row {
    std::string yaml;
    std::string expected;
  };
  const std::string long_name(65, 'n');
  const std::vector<row> rows = {
      // unknown keys, at every level, with a suggestion when one is close
      {"servr: http://127.0.0.1:1\n", "t.yaml:1:1: servr: unknown key (did you mean server?)"},
      {"colour: red\n", "t.yaml:1:1: colour: unknown key (expected one of: server, identity, listen, mode,"},
      {job_with("    comand: [x]\n"), "t.yaml:5:5: jobs[0].comand: unknown key (did you mean command?)"},
      {"election:\n  tll: 5s\n", "t.yaml:2:3: election.tll: unknown key (did you mean ttl?)"},
      {"log-level: info\n", "t.yaml:1:1: log-level: unknown key (did you mean log_level?)"},
      {http_job_with("      url: http://h/\n      header: {}\n"),
       "t.yaml:6:7: jobs[0].http.header: unknown key (did you mean headers?)"},
      // a key written twice
      {"server: http://a:1\nserver: http://b:1\n", "t.yaml:2:1: server: duplicate key (first at line 1)"},
      // YAML syntax, with yaml-cpp's position
      {"jobs:\n  - name: [a\n", "t.yaml:3:1: end of sequence flow not found"},
      {"election:\n  ttl: 1s\n bad: x\n", "t.yaml:3:2: end of map not found"},
      {"a: b: c\n", "t.yaml:1:5: illegal map value"},
      {"server: http://a:1\n---\nlisten: 127.0.0.1:1\n", "t.yaml:3:1: a second YAML document"},
      // yaml-cpp's LoadAll never returns on these (found by fuzz_agent_config)
      {",", "t.yaml:1:1: a second YAML document"},
      {",server: http://a:1\n", "t.yaml:1:1: a second YAML document"},
      {"- a\n- b\n", "t.yaml:1:1: the configuration must be a mapping of keys, got a list"},
      // wrong types
      {"server: {url: x}\n", "t.yaml:1:9: server: expected a string, got a mapping"},
      {"identity:\n", "t.yaml:1:1: identity: has no value"},
      {"jobs:\n  - name: a\n    schedule: \"* * * * *\"\n    command: [x, ~]\n",
       "t.yaml:4:18: jobs[0].command[1]: has no value"},
      {"election: 5s\n", "t.yaml:1:11: election: expected a mapping, got a string"},
      {"jobs: {a: 1}\n", "t.yaml:1:7: jobs: expected a list of jobs, got a mapping"},
      {"jobs:\n  - heartbeat\n", "t.yaml:2:5: jobs[0]: expected a mapping, got a string"},
      {"jobs:\n  - name: a\n    schedule: \"* * * * *\"\n    command: [x, [y]]\n",
       "t.yaml:4:18: jobs[0].command[1]: expected a string, got a list"},
      {"jobs:\n  - name: a\n    schedule: \"* * * * *\"\n    command: {x: 1}\n",
       "t.yaml:4:14: jobs[0].command: expected a list of strings, got a mapping"},
      {http_job_with("      url: http://h/\n      body: {a: 1}\n"),
       "t.yaml:6:13: jobs[0].http.body: expected a string, got a mapping"},
      {http_job_with("      url: http://h/\n      headers: [a]\n"),
       "t.yaml:6:16: jobs[0].http.headers: expected a mapping, got a list"},
      {job_with("    suspend: yes\n"), "t.yaml:5:14: jobs[0].suspend: expected true or false, got \"yes\""},
      {job_with("    retries: 101\n"),
       "t.yaml:5:14: jobs[0].retries: expected a whole number from 0 to 100, got \"101\""},
      {job_with("    retry_backoff: 0s\n"), "t.yaml:5:20: jobs[0].retry_backoff: must be positive"},
      {job_with("    retry_backoff: 5\n"), "t.yaml:5:20: jobs[0].retry_backoff: \"5\" has no unit"},
      {job_with("    starting_deadline: 30s\n"),
       "t.yaml:5:24: jobs[0].starting_deadline: applies to misfire: run_once"},
      {job_with("    misfire: run_once\n    starting_deadline: 1500ms\n"),
       "t.yaml:6:24: jobs[0].starting_deadline: must be whole seconds, at least 1s"},
      {job_with("    misfire: run_once\n    starting_deadline: 0s\n"),
       "t.yaml:6:24: jobs[0].starting_deadline: must be whole seconds, at least 1s"},
      {job_with("    jitter: 1m\n"),
       "t.yaml:5:13: jobs[0].jitter: must be less than the shortest time between the schedule's slots (60s)"},
      {job_with("    jitter: often\n"), "t.yaml:5:13: jobs[0].jitter: \"often\" is not a duration"},
      // history_limit, top level and per job
      {"history_limit: 0\n", "t.yaml:1:16: history_limit: expected a whole number from 1 to 1000, got \"0\""},
      {"history_limit: 1001\n", "t.yaml:1:16: history_limit: expected a whole number from 1 to 1000"},
      {"history_limit: -1\n", "t.yaml:1:16: history_limit: expected a whole number from 1 to 1000"},
      {"history_limit: 2.5\n", "t.yaml:1:16: history_limit: expected a whole number from 1 to 1000"},
      {"history_limit: [1]\n", "t.yaml:1:16: history_limit: expected a string, got a list"},
      {job_with("    history_limit: ten\n"),
       "t.yaml:5:20: jobs[0].history_limit: expected a whole number from 1 to 1000, got \"ten\""},
      {job_with("    history_limit:\n"), "t.yaml:5:5: jobs[0].history_limit: has no value"},
      // top-level values
      {"server: ftp://h:1\n", "t.yaml:1:9: server: server_url \"ftp://h:1\" must start with http://"},
      {"identity: \"\"\n", "t.yaml:1:11: identity: must not be empty"},
      {"identity: \"node\\x01\"\n", "t.yaml:1:11: identity: must not contain control characters"},
      {"listen: \"[::1]\"\n", "t.yaml:1:9: listen: expected [address]:port for IPv6"},
      {"listen: 7071\n", "t.yaml:1:9: listen: expected host:port, got \"7071\""},
      {"listen: \"::1:7071\"\n", "t.yaml:1:9: listen: an IPv6 address needs brackets"},
      {"listen: 127.0.0.1:70000\n", "t.yaml:1:9: listen: the port in \"127.0.0.1:70000\" must be a number"},
      {"listen: :7071\n", "t.yaml:1:9: listen: no host in \":7071\""},
      // bind() takes an address: a host name passed --check-config and then failed at start
      {"listen: myhost:7071\n", "t.yaml:1:9: listen: \"myhost\" is not an IP address"},
      {"listen: 10.0.0:7071\n", "t.yaml:1:9: listen: \"10.0.0\" is not an IP address"},
      {"listen: \"[127.0.0.1]:7071\"\n", "t.yaml:1:9: listen: \"127.0.0.1\" is not an IPv6 address"},
      {"listen: \"[::1]:-1\"\n", "t.yaml:1:9: listen: the port in \"[::1]:-1\" must be a number"},
      {"mode: follower\n", "t.yaml:1:7: mode: expected leader or per-job, got \"follower\""},
      {"log_level: verbose\n",
       "t.yaml:1:12: log_level: expected debug, info, warn or error, got \"verbose\""},
      {"resign_token: \"two words\"\n", "t.yaml:1:15: resign_token: a bearer token is"},
      {"resign_token: \"\"\n", "t.yaml:1:15: resign_token: must not be empty"},
      {"shutdown_grace: -1s\n", "t.yaml:1:17: shutdown_grace: \"-1s\" is not a duration"},
      // election: durations and the SDK's lease rules, blamed on the key that breaks them
      {"election:\n  ttl: 10\n",
       "t.yaml:2:8: election.ttl: \"10\" has no unit (write 10s, 10ms, 10m or 10h)"},
      {"election:\n  ttl: -10s\n", "t.yaml:2:8: election.ttl: \"-10s\" is not a duration"},
      {"election:\n  ttl: 0s\n", "t.yaml:2:8: election.ttl: must be positive"},
      {"election:\n  ttl: 1ms\n", "t.yaml:2:8: election.ttl: safety_margin must be below ttl"},
      {"election:\n  jitter: 1.5\n", "t.yaml:2:11: election.jitter: jitter must be within [0, 1)"},
      {"election:\n  jitter: lots\n", "t.yaml:2:11: election.jitter: expected a number, got \"lots\""},
      {"election:\n  jitter: .nan\n", "t.yaml:2:11: election.jitter: expected a number"},
      {"election:\n  ttl: 10s\n  safety_margin: 10s\n",
       "t.yaml:3:18: election.safety_margin: safety_margin must be below ttl"},
      {"election:\n  renew_every: 0s\n", "t.yaml:2:16: election.renew_every: must be positive"},
      {"election:\n  lock_delay: -1s\n", "t.yaml:2:15: election.lock_delay: \"-1s\" is not a duration"},
      {"election:\n  lock_delay: 5\n", "t.yaml:2:15: election.lock_delay: \"5\" has no unit"},
      {"election:\n  ttl: 10s\n  renew_every: 9s\n",
       "t.yaml:3:16: election.renew_every: renew_every (with jitter)"},
      {"election:\n  key: \"\"\n", "t.yaml:2:8: election.key: a lock key is 1-512 bytes"},
      // jobs: required keys, names
      {"jobs:\n  - schedule: \"* * * * *\"\n    command: [x]\n",
       "t.yaml:2:5: jobs[0].name: required key is missing"},
      {"jobs:\n  - name: a\n    command: [x]\n", "t.yaml:2:5: jobs[0].schedule: required key is missing"},
      {"jobs:\n  - name: a b\n    schedule: \"* * * * *\"\n    command: [x]\n",
       "t.yaml:2:11: jobs[0].name: \"a b\": a job name is 1-64 characters"},
      {"jobs:\n  - name: a/b\n    schedule: \"* * * * *\"\n    command: [x]\n",
       "t.yaml:2:11: jobs[0].name: \"a/b\""},
      {"jobs:\n  - name: ..\n    schedule: \"* * * * *\"\n    command: [x]\n",
       "t.yaml:2:11: jobs[0].name: \"..\""},
      {"jobs:\n  - name: " + long_name + "\n    schedule: \"* * * * *\"\n    command: [x]\n",
       "t.yaml:2:11: jobs[0].name: \"" + long_name + "\""},
      {job_with(
           "  - name: b\n    schedule: \"@daily\"\n    command: [y]\n  - name: a\n    schedule: \"@daily\"\n"
           "    command: [z]\n"),
       "t.yaml:8:11: jobs[2].name: duplicate job name \"a\" (also jobs[0], line 2)"},
      // jobs: schedules and zones
      {"jobs:\n  - name: a\n    schedule: \"61 * * * *\"\n    command: [x]\n",
       "t.yaml:3:15: jobs[0].schedule: minute"},
      {"jobs:\n  - name: a\n    schedule: \"* * *\"\n    command: [x]\n",
       "t.yaml:3:15: jobs[0].schedule: expected 5 or 6 fields, got 3"},
      {"jobs:\n  - name: a\n    schedule: \"0 0 30 2 *\"\n    command: [x]\n",
       "t.yaml:3:15: jobs[0].schedule: \"0 0 30 2 *\" never fires"},
      {job_with("    timezone: Europe/Atlantis\n"),
       "t.yaml:5:15: jobs[0].timezone: unknown time zone \"Europe/Atlantis\""},
      // jobs: what runs
      {"jobs:\n  - name: a\n    schedule: \"* * * * *\"\n",
       "t.yaml:2:5: jobs[0]: needs a command or an http request"},
      {job_with("    http: {url: \"http://h/\"}\n"), "t.yaml:2:5: jobs[0]: has both command and http"},
      {"jobs:\n  - name: a\n    schedule: \"* * * * *\"\n    command: []\n",
       "t.yaml:4:14: jobs[0].command: the command is empty"},
      {"jobs:\n  - name: a\n    schedule: \"* * * * *\"\n    command: [\"\", x]\n",
       "t.yaml:4:14: jobs[0].command[0]: the program is empty"},
      {"jobs:\n  - name: a\n    schedule: \"* * * * *\"\n    shell: true\n    command: \"\"\n",
       "t.yaml:5:14: jobs[0].command[0]: the script is empty"},
      {"jobs:\n  - name: a\n    schedule: \"* * * * *\"\n    command: \"echo hi\"\n",
       "t.yaml:4:14: jobs[0].command: a string command needs shell: true"},
      {"jobs:\n  - name: a\n    schedule: \"* * * * *\"\n    command: [\"a\\0b\"]\n",
       "t.yaml:4:14: jobs[0].command[0]: contains a NUL byte"},
      {job_with("    shell: yes\n"), "t.yaml:5:12: jobs[0].shell: expected true or false, got \"yes\""},
      {job_with("    timeout: 30\n"), "t.yaml:5:14: jobs[0].timeout: \"30\" has no unit"},
      {job_with("    grace: 5 s\n"), "t.yaml:5:12: jobs[0].grace: \"5 s\" is not a duration"},
      {job_with("    overlap: queue\n"),
       "t.yaml:5:14: jobs[0].overlap: expected forbid, allow or replace, got \"queue\""},
      {job_with("    misfire: always\n"),
       "t.yaml:5:14: jobs[0].misfire: expected skip or run_once, got \"always\""},
      // jobs: http
      {http_job_with("      method: POST\n"), "t.yaml:5:7: jobs[0].http.url: required key is missing"},
      {http_job_with("      url: ftp://h/\n"),
       "t.yaml:5:12: jobs[0].http.url: \"ftp://h/\" must start with http://"},
      {http_job_with("      url: http://h/\n      ca_file: /dev/null\n"),
       "t.yaml:6:16: jobs[0].http.ca_file: needs an https:// url"},
      {http_job_with("      url: https://h/\n      ca_file: /nonexistent/ca.pem\n"),
       "t.yaml:6:16: jobs[0].http.ca_file: \"/nonexistent/ca.pem\": cannot read: No such file or directory"},
      {http_job_with("      url: reports\n"),
       "t.yaml:5:12: jobs[0].http.url: \"reports\" is not an absolute URL"},
      {http_job_with("      url: \"http:///x\"\n"),
       "t.yaml:5:12: jobs[0].http.url: \"http:///x\" has no host"},
      {http_job_with("      url: http://h/\n      method: \"P@ST\"\n"),
       "t.yaml:6:15: jobs[0].http.method: expected an HTTP method"},
      {http_job_with("      url: http://h/\n      headers: {\"Bad Name\": x}\n"),
       "t.yaml:6:17: jobs[0].http.headers.Bad Name: a header name is"},
      {http_job_with("      url: http://h/\n      headers: {X-A: \"a\\r\\nX-Injected: 1\"}\n"),
       "t.yaml:6:22: jobs[0].http.headers.X-A: a header value must not contain CR, LF or NUL"},
      {"jobs:\n  - name: a\n    schedule: \"* * * * *\"\n    shell: true\n    http: {url: \"http://h/\"}\n",
       "t.yaml:4:12: jobs[0].shell: applies to a command, not to an http job"},
  };
  for (const auto& r : rows) {
    BOOST_TEST_CONTEXT("yaml:\n" << r.yaml) {
      const auto got = error_of(r.yaml);
      BOOST_TEST(got.find(r.expected) != std::string::npos,
                 "expected \"" << r.expected << "\" in \"" << got << "\"");
    }
  }
}

BOOST_AUTO_TEST_CASE(an_unquoted_cron_expression_is_a_yaml_error_with_a_hint) {
  // `*` starts a YAML alias, so an unquoted schedule is not even YAML; the error says what to do.
  for (const char* expression : {"* * * * *", "*/5 * * * *"}) {
    const auto got =
        error_of(std::string("jobs:\n  - name: a\n    schedule: ") + expression + "\n    command: [x]\n");
    BOOST_TEST(got.rfind("t.yaml:3:", 0) == 0u, got);
    BOOST_TEST(got.find("(quote cron schedules: a bare * starts a YAML alias)") != std::string::npos, got);
  }
}

BOOST_AUTO_TEST_CASE(load_config_reads_the_file_and_names_an_unreadable_one) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("baton_test_config_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto good = (dir / "agent.yaml").string();
  std::ofstream(good) << job_with("");
  BOOST_TEST(load_config(good).jobs.size() == 1u);

  const auto bad = (dir / "bad.yaml").string();
  std::ofstream(bad) << "election:\n  ttl: 0s\n";
  BOOST_CHECK_EXCEPTION(load_config(bad), config_error, [&](const config_error& e) {
    return std::string(e.what()) ==
           bad + ":2:8: election.ttl: must be positive (leave the key out for the default)";
  });

  const auto missing = (dir / "missing.yaml").string();
  BOOST_CHECK_EXCEPTION(load_config(missing), config_error, [&](const config_error& e) {
    return std::string(e.what()) == missing + ": cannot open: No such file or directory" && e.line() == 0;
  });
  BOOST_CHECK_EXCEPTION(load_config(dir.string()), config_error, [&](const config_error& e) {
    return std::string(e.what()) == dir.string() + ": cannot read: Is a directory";
  });
  std::filesystem::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(flags_override_the_file) {
  auto c = parse_config(job_with(""), "t.yaml");
  apply_overrides(c, {{"server", "http://10.1.1.1:7000"},
                      {"identity", "pod-7"},
                      {"--listen", "0.0.0.0:0"},
                      {"election-key", "other/leader"},
                      {"log-level", "warn"}});
  BOOST_TEST(c.server == "http://10.1.1.1:7000");
  BOOST_TEST(c.identity == "pod-7");
  BOOST_TEST(c.listen == "0.0.0.0:0");
  BOOST_TEST(c.election_key == "other/leader");
  BOOST_TEST(c.log_level == "warn");
}

BOOST_AUTO_TEST_CASE(an_empty_flag_value_is_a_flag_not_given) {
  auto c = parse_config("server: http://a:1\nidentity: node-1\n", "t.yaml");
  apply_overrides(
      c, {{"server", ""}, {"identity", ""}, {"listen", ""}, {"election-key", ""}, {"log-level", ""}});
  BOOST_TEST(c.server == "http://a:1");
  BOOST_TEST(c.identity == "node-1");
  BOOST_TEST(c.listen == "127.0.0.1:7071");
}

// The flags, the file keys they override and this message come from one table (config_settings.hpp).
BOOST_AUTO_TEST_CASE(an_unknown_flag_is_refused_naming_every_flag_that_overrides_the_file) {
  auto c = parse_config("", "t.yaml");
  try {
    apply_overrides(c, {{"--listn", "127.0.0.1:1"}});
    BOOST_ERROR("accepted");
  } catch (const config_error& e) {
    BOOST_TEST(std::string(e.what()) ==
               "--listn: unknown flag (the file can be overridden by --server, --identity, --listen, "
               "--election-key, --log-level, --log-format, --ca-file, --cert, --key, --etcd-password-file)");
  }
}

BOOST_AUTO_TEST_CASE(a_flag_sets_what_its_key_in_the_file_sets) {
  const auto from_file = parse_config(
      "server: http://a:1\nidentity: n-1\nlisten: 127.0.0.1:9\nelection:\n  key: k/1\nlog_level: debug\n"
      "log_format: json\n",
      "t.yaml");
  auto from_flags = parse_config("", "t.yaml");
  apply_overrides(from_flags, {{"server", "http://a:1"},
                               {"identity", "n-1"},
                               {"listen", "127.0.0.1:9"},
                               {"election-key", "k/1"},
                               {"log-level", "debug"},
                               {"log-format", "json"}});
  BOOST_TEST(from_flags.server == from_file.server);
  BOOST_TEST(from_flags.identity == from_file.identity);
  BOOST_TEST(from_flags.listen == from_file.listen);
  BOOST_TEST(from_flags.election_key == from_file.election_key);
  BOOST_TEST(from_flags.log_level == from_file.log_level);
  BOOST_TEST(from_flags.log_format == from_file.log_format);
  BOOST_TEST(from_file.election_key == "k/1");
  BOOST_TEST(from_file.log_format == "json");
}

BOOST_AUTO_TEST_CASE(a_bad_flag_is_refused_as_the_file_would_be_and_changes_nothing) {
  struct row {
    std::string flag, value, expected;
  };
  const std::vector<row> rows = {
      {"server", "ftp://h:1", "--server: server_url \"ftp://h:1\" must start with http://"},
      {"listen", "7071", "--listen: expected host:port, got \"7071\""},
      {"listen", "myhost:7071", "--listen: \"myhost\" is not an IP address"},
      {"log-level", "loud", "--log-level: expected debug, info, warn or error, got \"loud\""},
      {"election-key", std::string("a\nb"), "--election-key: a lock key is 1-512 bytes"},
      {"identity", std::string(201, 'i'), "--identity: identity must be at most 200 bytes"},
      {"ttl", "5s", "--ttl: unknown flag"},
  };
  for (const auto& r : rows) {
    BOOST_TEST_CONTEXT(r.flag << "=" << r.value) {
      auto c = parse_config("", "t.yaml");
      try {
        apply_overrides(c, {{r.flag, r.value}});
        BOOST_ERROR("accepted");
      } catch (const config_error& e) {
        BOOST_TEST(std::string(e.what()).find(r.expected) == 0u, e.what());
        BOOST_TEST(e.line() == 0);
      }
    }
  }
  // All or nothing: --election-key is applied before --server is found bad, and is undone.
  auto c = parse_config("", "t.yaml");
  BOOST_CHECK_THROW(apply_overrides(c, {{"election-key", "other/leader"}, {"server", "ftp://h:1"}}),
                    config_error);
  BOOST_TEST(c.election_key == "baton-agent/leader");
  BOOST_TEST(c.server == "http://127.0.0.1:7070");
}

BOOST_AUTO_TEST_CASE(tls_files_are_read_checked_and_overridable) {
  char ca_path[] = "/tmp/baton-config-ca-XXXXXX";
  const int fd = ::mkstemp(ca_path);
  BOOST_REQUIRE(fd >= 0);
  ::close(fd);
  const std::string ca = ca_path;
  auto c = parse_config("server: https://batond:7443\ntls:\n  ca_file: " + ca + "\n  cert_file: " + ca +
                            "\n  key_file: " + ca + "\n",
                        "t.yaml");
  BOOST_TEST(c.tls.ca_file == ca);
  BOOST_TEST(c.tls.cert_file == ca);
  BOOST_TEST(c.tls.key_file == ca);

  const std::vector<std::pair<std::string, std::string>> rows = {
      {"server: https://b:1\ntls:\n  ca_file: /nonexistent/ca.pem\n",
       "t.yaml:3:12: tls.ca_file: \"/nonexistent/ca.pem\": cannot read: No such file or directory"},
      {"server: https://b:1\ntls:\n  ca_fil: x\n",
       "t.yaml:3:3: tls.ca_fil: unknown key (did you mean ca_file?)"},
      {"server: http://b:1\ntls:\n  ca_file: " + ca + "\n",
       "t.yaml:3:3: tls: certificates need an https:// or etcds:// server"},
      {"server: https://b:1\ntls:\n  cert_file: " + ca + "\n",
       "t.yaml:3:3: tls: cert_file and key_file go together"},
      {"server: https://b:1\ntls: " + ca + "\n", "t.yaml:2:6: tls: expected a mapping, got a string"},
  };
  for (const auto& [yaml, expected] : rows) {
    BOOST_TEST_CONTEXT(yaml) {
      BOOST_TEST(error_of(yaml).find(expected) == 0u, error_of(yaml));
    }
  }

  // Flags: the same checks, and all or nothing.
  auto f = parse_config("server: https://b:1\n", "t.yaml");
  apply_overrides(f, {{"ca-file", ca}, {"--cert", ca}, {"key", ca}});
  BOOST_TEST(f.tls.ca_file == ca);
  BOOST_TEST(f.tls.key_file == ca);
  auto g = parse_config("", "t.yaml");
  try {
    apply_overrides(g, {{"ca-file", ca}});
    BOOST_ERROR("a CA file with an http:// server was accepted");
  } catch (const config_error& e) {
    BOOST_TEST(std::string(e.what()).find("certificates need an https://") != std::string::npos, e.what());
    BOOST_TEST(g.tls.ca_file.empty());
  }
  try {
    apply_overrides(f, {{"cert", "/nonexistent.pem"}});
    BOOST_ERROR("an unreadable certificate was accepted");
  } catch (const config_error& e) {
    BOOST_TEST(std::string(e.what()).find("--cert: \"/nonexistent.pem\": cannot read") == 0u, e.what());
  }
  ::unlink(ca_path);
}

BOOST_AUTO_TEST_CASE(token_file_is_read_trimmed_by_load_server_token_and_never_quoted) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("baton_test_token_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto token = (dir / "agent.token").string();
  const auto cfg_path = (dir / "agent.yaml").string();
  std::ofstream(cfg_path) << "token_file: " + token + "\n";

  // parse_config and load_config do no I/O for it: --check-config needs no secret.
  auto c = load_config(cfg_path);
  BOOST_TEST(c.token_file == token);
  BOOST_TEST(c.server_token.empty());

  std::ofstream(token) << "\n  s3cret-value\r\n";
  load_server_token(c, cfg_path);
  BOOST_TEST(c.server_token == "s3cret-value");

  auto refused = [&](const std::string& content, const std::string& reason) {
    std::ofstream(token, std::ios::trunc) << content;
    auto d = load_config(cfg_path);
    BOOST_CHECK_EXCEPTION(load_server_token(d, cfg_path), config_error, [&](const config_error& e) {
      const std::string what = e.what();
      BOOST_TEST(what.find("two") == std::string::npos);
      return what == cfg_path + ": token_file: " + token + ": " + reason && e.key() == "token_file";
    });
  };
  refused(" \n", "the file is empty");
  refused("two words\n", "must hold one token without spaces or control characters");
  std::filesystem::remove(token);
  auto d = load_config(cfg_path);
  BOOST_CHECK_EXCEPTION(load_server_token(d, cfg_path), config_error, [&](const config_error& e) {
    return std::string(e.what()) ==
           cfg_path + ": token_file: " + token + ": cannot open: No such file or directory";
  });
  BOOST_TEST(error_of("token_file: \"\"\n").find("t.yaml:1:13: token_file: must not be empty") == 0u);
  BOOST_TEST(parse_config("", "t.yaml").token_file.empty());
  std::filesystem::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(a_jobs_mode_defaults_to_the_files_and_may_override_it) {
  const std::string jobs = R"(jobs:
  - name: a
    schedule: "* * * * *"
    command: [x]
  - name: b
    mode: per-job
    schedule: "* * * * *"
    command: [y]
  - name: c
    mode: leader
    schedule: "* * * * *"
    command: [z]
)";
  const auto leader = parse_config(jobs, "t.yaml");
  BOOST_TEST((leader.jobs[0].mode == agent_mode::leader));
  BOOST_TEST((leader.jobs[1].mode == agent_mode::per_job));
  BOOST_TEST((leader.jobs[2].mode == agent_mode::leader));
  const auto per_job = parse_config("mode: per-job\n" + jobs, "t.yaml");
  BOOST_TEST((per_job.jobs[0].mode == agent_mode::per_job));
  BOOST_TEST((per_job.jobs[1].mode == agent_mode::per_job));
  BOOST_TEST((per_job.jobs[2].mode == agent_mode::leader));
  // A job that changes mode is a changed job, applied by a reload.
  auto moved = leader;
  moved.jobs[0].mode = agent_mode::per_job;
  const auto c = compare_configs(leader, moved);
  BOOST_TEST(c.jobs_changed == std::vector<std::string>{"a"}, boost::test_tools::per_element());
  BOOST_TEST(c.restart_needed.empty());
  BOOST_TEST(error_of(job_with("    mode: perjob\n")).find("jobs[0].mode") != std::string::npos,
             error_of(job_with("    mode: perjob\n")));
}

BOOST_AUTO_TEST_CASE(compare_configs_names_what_changed_and_what_needs_a_restart) {
  const std::string jobs = R"(jobs:
  - name: a
    schedule: "* * * * *"
    command: [x]
  - name: b
    schedule: "0 3 * * *"
    command: [y]
)";
  const auto running = parse_config("listen: 127.0.0.1:7071\n" + jobs, "t.yaml");
  // Read again unchanged, or with the same settings written differently: nothing to do.
  BOOST_TEST(compare_configs(running, running).empty());
  BOOST_TEST(
      compare_configs(running, parse_config("# same\nlisten: 127.0.0.1:7071\n\n" + jobs, "t.yaml")).empty());

  const auto loaded = parse_config(R"(listen: 127.0.0.1:7072
log_level: debug
election:
  ttl: 20s
jobs:
  - name: b
    schedule: "0 4 * * *"
    command: [y]
  - name: c
    schedule: "* * * * *"
    command: [z]
)",
                                   "t.yaml");
  const auto c = compare_configs(running, loaded);
  BOOST_TEST(c.keys == (std::vector<std::string>{"listen", "log_level", "election", "jobs"}),
             boost::test_tools::per_element());
  BOOST_TEST(c.restart_needed == std::vector<std::string>{"listen"}, boost::test_tools::per_element());
  BOOST_TEST(c.jobs_added == std::vector<std::string>{"c"}, boost::test_tools::per_element());
  BOOST_TEST(c.jobs_removed == std::vector<std::string>{"a"}, boost::test_tools::per_element());
  BOOST_TEST(c.jobs_changed == std::vector<std::string>{"b"}, boost::test_tools::per_element());
  BOOST_TEST(c.election);

  // The connection to the lock server, the mode and the token need a restart; each job setting is a change.
  auto other = running;
  other.server = "http://10.0.0.1:7070";
  other.mode = agent_mode::per_job;
  other.server_token = "new-token";
  other.jobs[0].grace = 1s;
  other.jobs[1].timezone = "Europe/Kyiv";
  const auto d = compare_configs(running, other);
  BOOST_TEST(d.restart_needed == (std::vector<std::string>{"server", "mode", "token_file"}),
             boost::test_tools::per_element());
  BOOST_TEST(d.jobs_changed == (std::vector<std::string>{"a", "b"}), boost::test_tools::per_element());
  BOOST_TEST(!d.election);
  // A new lock-delay is a change of the election's lease, applied to the next acquire.
  auto delayed = running;
  delayed.election.lock_delay = 5s;
  BOOST_TEST(compare_configs(running, delayed).election);
}

BOOST_AUTO_TEST_CASE(history_limit_defaults_to_ten_and_a_job_may_set_its_own) {
  BOOST_TEST(parse_config("", "t.yaml").history_limit == 10u);
  BOOST_TEST(parse_config(job_with(""), "t.yaml").jobs[0].history_limit == 10u);
  // The top-level value is every job's default, wherever it is written in the file.
  const auto c = parse_config(job_with("  - name: b\n    schedule: \"* * * * *\"\n    command: [y]\n"
                                       "    history_limit: 1000\n") +
                                  "history_limit: 3\n",
                              "t.yaml");
  BOOST_TEST(c.history_limit == 3u);
  BOOST_TEST(c.jobs[0].history_limit == 3u);
  BOOST_TEST(c.jobs[1].history_limit == 1000u);
  // A new limit is a change a reload applies, to the jobs it reaches.
  const auto running = parse_config(job_with(""), "t.yaml");
  const auto d = compare_configs(running, parse_config("history_limit: 5\n" + job_with(""), "t.yaml"));
  BOOST_TEST(d.keys == (std::vector<std::string>{"history_limit", "jobs"}), boost::test_tools::per_element());
  BOOST_TEST(d.jobs_changed == std::vector<std::string>{"a"}, boost::test_tools::per_element());
  BOOST_TEST(d.restart_needed.empty());
}

BOOST_AUTO_TEST_CASE(suspend_is_read_per_job_and_a_changed_one_is_a_job_change) {
  BOOST_TEST(!parse_config(job_with(""), "t.yaml").jobs[0].suspend);
  const auto c = parse_config(job_with("    suspend: true\n"), "t.yaml");
  BOOST_TEST(c.jobs[0].suspend);
  const auto d = compare_configs(parse_config(job_with(""), "t.yaml"), c);
  BOOST_TEST(d.jobs_changed == std::vector<std::string>{"a"}, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(env_working_dir_and_user_are_read_checked_and_a_change_is_a_job_change) {
  const auto c =
      parse_config(job_with("    env:\n      GREETING: hello\n      _X1: \"\"\n    working_dir: /srv/jobs\n"
                            "    user: root\n"),
                   "t.yaml");
  const auto& j = c.jobs[0];
  BOOST_TEST((j.env == std::vector<std::pair<std::string, std::string>>{{"GREETING", "hello"}, {"_X1", ""}}));
  BOOST_TEST(j.working_dir == "/srv/jobs");
  BOOST_TEST(j.user == "root");
  if (::geteuid() == 0) {
    BOOST_REQUIRE(j.credentials.has_value());
    BOOST_TEST(j.credentials->uid == 0u);
  }
  BOOST_TEST(
      compare_configs(parse_config(job_with(""), "t.yaml"), c).jobs_changed == std::vector<std::string>{"a"},
      boost::test_tools::per_element());
  BOOST_TEST(
      error_of(job_with("    env:\n      BATON_FENCING_TOKEN: \"7\"\n")) ==
      "t.yaml:6:7: jobs[0].env.BATON_FENCING_TOKEN: BATON_* variables are the agent's (the token, the slot, "
      "the run id)");
  BOOST_TEST(error_of(job_with("    env:\n      1X: a\n")).find("a variable name is letters") !=
             std::string::npos);
  BOOST_TEST(error_of(job_with("    working_dir: relative/dir\n")) ==
             "t.yaml:5:18: jobs[0].working_dir: must be an absolute path");
  BOOST_TEST(error_of(job_with("    user: no-such-user-here\n")) ==
             "t.yaml:5:11: jobs[0].user: \"no-such-user-here\": no such user on this machine");
}

BOOST_AUTO_TEST_CASE(retries_default_to_none_with_a_ten_second_backoff) {
  const auto plain = parse_config(job_with(""), "t.yaml").jobs[0];
  BOOST_TEST(plain.retries == 0);
  BOOST_TEST(plain.retry_backoff.count() == 10'000);
  const auto c = parse_config(job_with("    retries: 3\n    retry_backoff: 1m\n"), "t.yaml");
  BOOST_TEST(c.jobs[0].retries == 3);
  BOOST_TEST(c.jobs[0].retry_backoff.count() == 60'000);
  BOOST_TEST(
      compare_configs(parse_config(job_with(""), "t.yaml"), c).jobs_changed == std::vector<std::string>{"a"},
      boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(starting_deadline_is_read_with_misfire_run_once) {
  BOOST_TEST(!parse_config(job_with(""), "t.yaml").jobs[0].starting_deadline.has_value());
  const auto c = parse_config(job_with("    misfire: run_once\n    starting_deadline: 2m\n"), "t.yaml");
  BOOST_TEST(c.jobs[0].starting_deadline->count() == 120'000);
}

BOOST_AUTO_TEST_CASE(jitter_stays_below_the_shortest_gap_between_slots) {
  BOOST_TEST(parse_config(job_with(""), "t.yaml").jobs[0].jitter.count() == 0);
  BOOST_TEST(parse_config(job_with("    jitter: 59s\n"), "t.yaml").jobs[0].jitter.count() == 59'000);
  // The shortest gap, not the usual one: 02:00 and 02:10 every day leave ten minutes.
  const auto two = std::string("jobs:\n  - name: a\n    schedule: \"0,10 2 * * *\"\n    command: [x]\n");
  BOOST_TEST(parse_config(two + "    jitter: 9m59s\n", "t.yaml").jobs[0].jitter.count() == 599'000);
  BOOST_TEST(error_of(two + "    jitter: 10m\n").find("(600s)") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(etcd_password_file_is_read_as_a_key_and_a_flag_and_needs_an_etcd_url_with_a_user) {
  char path[] = "/tmp/baton-config-etcd-password-XXXXXX";
  const int fd = ::mkstemp(path);
  BOOST_REQUIRE(fd >= 0);
  ::close(fd);
  const std::string file = path;
  auto c = parse_config("server: etcd://baton@10.0.0.1:2379\netcd_password_file: " + file + "\n", "t.yaml");
  BOOST_TEST(c.etcd_password_file == file);

  const std::vector<std::pair<std::string, std::string>> rows = {
      {"server: etcd://baton@h:2379\netcd_password_file: /nonexistent/pw\n",
       "t.yaml:2:21: etcd_password_file: \"/nonexistent/pw\": cannot read: No such file or directory"},
      {"server: http://b:1\netcd_password_file: " + file + "\n",
       "t.yaml:2:21: etcd_password_file: etcd_password_file needs an etcd:// or etcds:// server_url"},
      {"server: etcd://baton:pw@h:2379\netcd_password_file: " + file + "\n",
       "t.yaml:2:21: etcd_password_file: server_url holds a password and etcd_password_file is set"},
  };
  for (const auto& [yaml, expected] : rows) {
    BOOST_TEST_CONTEXT(yaml) {
      BOOST_TEST(error_of(yaml).find(expected) == 0u, error_of(yaml));
    }
  }

  auto f = parse_config("server: etcds://baton@h:2379\n", "t.yaml");
  apply_overrides(f, {{"etcd-password-file", file}});
  BOOST_TEST(f.etcd_password_file == file);
  auto g = parse_config("", "t.yaml");
  try {
    apply_overrides(g, {{"etcd-password-file", file}});
    BOOST_FAIL("an etcd password file for a batond server was taken");
  } catch (const config_error& e) {
    BOOST_TEST(std::string(e.what()).find("--etcd-password-file: etcd_password_file needs an etcd://") == 0u,
               e.what());
  }
  BOOST_TEST(g.etcd_password_file.empty());
  // A changed file name needs a restart, as every setting of the connection to the lock server does.
  auto h = f;
  h.etcd_password_file = "/elsewhere";
  const auto changes = compare_configs(f, h);
  BOOST_TEST(changes.restart_needed == std::vector<std::string>{"etcd_password_file"});
  std::filesystem::remove(file);
}

BOOST_AUTO_TEST_CASE(etcd_lease_revocation_bug_is_warn_or_refuse_for_an_etcd_server_only) {
  BOOST_TEST(!parse_config("server: etcd://h:2379\n", "t.yaml").etcd_lease_revocation_bug.has_value());
  const auto refusing = parse_config("server: etcds://h:2379\netcd_lease_revocation_bug: refuse\n", "t.yaml");
  BOOST_TEST((refusing.etcd_lease_revocation_bug == baton::etcd_bug_policy::refuse));
  const auto warning = parse_config("server: etcd://h:2379\netcd_lease_revocation_bug: warn\n", "t.yaml");
  BOOST_TEST((warning.etcd_lease_revocation_bug == baton::etcd_bug_policy::warn));

  const std::vector<std::pair<std::string, std::string>> rows = {
      {"server: etcd://h:2379\netcd_lease_revocation_bug: ignore\n",
       "t.yaml:2:28: etcd_lease_revocation_bug: expected warn or refuse, got \"ignore\""},
      {"server: etcd://h:2379\netcd_lease_revocation_bug: Refuse\n",
       "t.yaml:2:28: etcd_lease_revocation_bug: expected warn or refuse, got \"Refuse\""},
      {"server: etcd://h:2379\netcd_lease_revocation_bug: [refuse]\n",
       "t.yaml:2:28: etcd_lease_revocation_bug: expected a string, got a list"},
      {"server: http://b:1\netcd_lease_revocation_bug: refuse\n",
       "t.yaml:2:28: etcd_lease_revocation_bug: is for an etcd:// or etcds:// server, and server is "
       "\"http://b:1\""},
      {"etcd_lease_revocation_bug: refuse\n",  // the default server is batond's
       "t.yaml:1:28: etcd_lease_revocation_bug: is for an etcd:// or etcds:// server"},
      {"server: etcd://h:2379\netcd_lease_revocation_bugs: refuse\n",
       "t.yaml:2:1: etcd_lease_revocation_bugs: unknown key (did you mean etcd_lease_revocation_bug?)"},
  };
  for (const auto& [yaml, expected] : rows) {
    BOOST_TEST_CONTEXT(yaml) {
      BOOST_TEST(error_of(yaml).find(expected) == 0u, error_of(yaml));
    }
  }

  // A --server flag that moves the agent to batond is refused while the file asks for an etcd policy.
  auto f = refusing;
  try {
    apply_overrides(f, {{"server", "http://127.0.0.1:7070"}});
    BOOST_FAIL("a batond server was taken with etcd_lease_revocation_bug set");
  } catch (const config_error& e) {
    BOOST_TEST(std::string(e.what()).find("--server: etcd_lease_revocation_bug is for an etcd://") == 0u,
               e.what());
  }
  BOOST_TEST(f.server == "etcds://h:2379");
  // The policy is read when the client is made: a change needs a restart.
  const auto changes = compare_configs(refusing, parse_config("server: etcds://h:2379\n", "t.yaml"));
  BOOST_TEST(changes.restart_needed == std::vector<std::string>{"etcd_lease_revocation_bug"});
}

BOOST_AUTO_TEST_CASE(an_http_job_takes_an_https_url_with_or_without_a_ca_file) {
  auto c = parse_config(http_job_with("      url: https://h:8443/hook\n"), "t.yaml");
  BOOST_TEST(c.jobs[0].http->url == "https://h:8443/hook");
  BOOST_TEST(c.jobs[0].http->ca_file.empty());
  auto d =
      parse_config(http_job_with("      url: https://h:8443/hook\n      ca_file: /dev/null\n"), "t.yaml");
  BOOST_TEST(d.jobs[0].http->ca_file == "/dev/null");
  // A new CA bundle changes the job.
  BOOST_TEST(compare_configs(c, d).jobs_changed == std::vector<std::string>{"a"});
}
