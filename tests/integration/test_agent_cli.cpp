// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE agent_cli
#include <boost/test/unit_test.hpp>

// baton-agent as a process: its command line, the one-shot commands (--check-config, --next-runs), a listen
// address that cannot be bound, and SIGHUP while it leads.

#include "batond_fixture.hpp"
#include "eventually.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/json/serialize.hpp>

#include <fstream>
#include <sstream>
#include <thread>

using namespace baton::test;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

fs::path write_file(const temp_dir& dir, const std::string& name, const std::string& text) {
  const auto p = dir.path() / name;
  std::ofstream(p) << text;
  return p;
}

std::string read_all(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The first log line with `event=<event>`, or "".
std::string log_line(const fs::path& log, const std::string& event) {
  std::istringstream in(read_all(log));
  for (std::string line; std::getline(in, line);)
    if (contains(line + " ", " event=" + event + " ")) return line;
  return {};
}

// Runs baton-agent to its end, with a stderr file of its own in `dir`.
finished_process agent(const temp_dir& dir, std::vector<std::string> args) {
  static int runs = 0;
  args.insert(args.begin(), bin_path("baton-agent"));
  return run_to_end(std::move(args), (dir.path() / ("stderr-" + std::to_string(++runs))).string(), 30s);
}

// A loopback TCP port held by this process, so that binding it again fails.
struct occupied_port {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  unsigned short port = 0;
  occupied_port() {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    BOOST_REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    BOOST_REQUIRE(::listen(fd, 1) == 0);
    BOOST_REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
    port = ntohs(a.sin_port);
  }
  ~occupied_port() { ::close(fd); }
};

}  // namespace

BOOST_AUTO_TEST_CASE(version_and_help_need_no_value_and_config_takes_the_equals_form) {
  temp_dir dir;
  const auto version = agent(dir, {"--version"});
  BOOST_TEST(version.code == 0, version.err);
  BOOST_TEST(version.out == "baton-agent " BATON_VERSION "\n");
  const auto help = agent(dir, {"--config", "/etc/baton/agent.yaml", "--help"});
  BOOST_TEST(help.code == 0);
  BOOST_TEST(contains(help.out, "--next-runs N"));
  const auto good = write_file(dir, "good.yaml", "listen: 127.0.0.1:0\n");
  const auto check = agent(dir, {"--check-config=" + good.string()});
  BOOST_TEST(check.code == 0, check.err);
  BOOST_TEST(check.out == good.string() + ": ok (0 jobs)\n");
  const auto unknown = agent(dir, {"--config=" + good.string(), "--lisen", "127.0.0.1:0"});
  BOOST_TEST(unknown.code == 2);
  BOOST_TEST(contains(unknown.err, "--lisen"), unknown.err);
}

BOOST_AUTO_TEST_CASE(a_listen_host_name_is_refused_by_check_config_with_its_place) {
  temp_dir dir;
  const auto file = write_file(dir, "agent.yaml", "server: http://127.0.0.1:9\nlisten: myhost:7071\n");
  const auto r = agent(dir, {"--check-config", file.string()});
  BOOST_TEST(r.code == 2);
  BOOST_TEST(contains(r.err, "agent.yaml:2:9: listen: \"myhost\" is not an IP address"), r.err);
  // localhost is taken, as batond takes it.
  const auto local = write_file(dir, "local.yaml", "listen: localhost:7071\n");
  BOOST_TEST(agent(dir, {"--check-config", local.string()}).code == 0);
}

BOOST_AUTO_TEST_CASE(check_config_takes_each_overlap_policy_and_names_them_for_a_wrong_one) {
  temp_dir dir;
  const auto with = [&](const std::string& overlap) {
    return write_file(dir, overlap + ".yaml",
                      "jobs:\n  - name: a\n    schedule: \"* * * * *\"\n    command: [/bin/true]\n"
                      "    overlap: " +
                          overlap + "\n");
  };
  for (const std::string overlap : {"forbid", "allow", "replace"}) {
    const auto r = agent(dir, {"--check-config", with(overlap).string()});
    BOOST_TEST(r.code == 0, overlap << ": " << r.err);
  }
  const auto r = agent(dir, {"--check-config", with("queue").string()});
  BOOST_TEST(r.code == 2);
  BOOST_TEST(
      contains(r.err, "queue.yaml:5:14: jobs[0].overlap: expected forbid, allow or replace, got \"queue\""),
      r.err);
}

BOOST_AUTO_TEST_CASE(a_listen_port_in_use_is_one_line_naming_the_key_and_exit_2) {
  temp_dir dir;
  occupied_port busy;
  const auto address = "127.0.0.1:" + std::to_string(busy.port);
  const auto file = write_file(dir, "agent.yaml", "server: http://127.0.0.1:9\nlisten: " + address + "\n");
  const auto from_file = agent(dir, {"--config", file.string()});
  BOOST_TEST(from_file.code == 2);
  BOOST_TEST(from_file.out.empty());
  BOOST_TEST(from_file.err ==
             "baton-agent: listen: cannot listen on " + address + ": Address already in use\n");
  // Given by the flag, the flag is named.
  const auto plain = write_file(dir, "plain.yaml", "server: http://127.0.0.1:9\n");
  const auto from_flag = agent(dir, {"--config", plain.string(), "--listen", address});
  BOOST_TEST(from_flag.code == 2);
  BOOST_TEST(from_flag.err ==
             "baton-agent: --listen: cannot listen on " + address + ": Address already in use\n");
}

BOOST_AUTO_TEST_CASE(an_ipv6_listen_address_is_printed_in_brackets) {
  temp_dir dir;
  const auto file = write_file(dir, "agent.yaml", "server: http://127.0.0.1:9\nlisten: \"[::1]:0\"\n");
  child_process p({bin_path("baton-agent"), "--config", file.string()}, (dir.path() / "log").string());
  std::string line;
  try {
    line = p.read_line(30s);
  } catch (const std::exception&) {
    p.wait(10s);
    const auto log = read_all(dir.path() / "log");
    if (contains(log, "cannot listen on [::1]:0")) return;  // no IPv6 loopback on this machine
    BOOST_FAIL("the agent did not start: " + log);
  }
  BOOST_TEST(line.starts_with("baton-agent listening on [::1]:"), line);
  BOOST_TEST(std::stoul(line.substr(line.rfind(':') + 1)) > 0u);
  BOOST_TEST(eventually([&] { return contains(log_line(dir.path() / "log", "started"), "listen=[::1]:"); }));
  p.signal(SIGTERM);
  BOOST_TEST(p.wait(30s) == 0);
}

BOOST_AUTO_TEST_CASE(check_config_warns_about_a_program_missing_here_and_still_passes) {
  temp_dir dir;
  const auto file = write_file(dir, "agent.yaml",
                               "jobs:\n"
                               "  - name: a\n"
                               "    schedule: \"* * * * *\"\n"
                               "    command: [\"baton-no-such-program\"]\n"
                               "  - name: b\n"
                               "    schedule: \"* * * * *\"\n"
                               "    command: [\"sh\", \"-c\", \"true\"]\n");
  const auto r = agent(dir, {"--check-config", file.string()});
  BOOST_TEST(r.code == 0);
  BOOST_TEST(r.out == file.string() + ": ok (2 jobs)\n");
  BOOST_TEST(contains(r.err, "baton-agent: warning: " + file.string() +
                                 ":4:15: jobs[0].command[0]: \"baton-no-such-program\" is not found in PATH"),
             r.err);
  BOOST_TEST(!contains(r.err, "jobs[1]"), r.err);
}

BOOST_AUTO_TEST_CASE(next_runs_prints_each_jobs_slots_in_its_zone) {
  temp_dir dir;
  const auto file = write_file(dir, "agent.yaml",
                               "jobs:\n"
                               "  - name: nightly\n"
                               "    schedule: \"30 2 * * *\"\n"
                               "    timezone: America/New_York\n"
                               "    command: [x]\n");
  const auto r =
      agent(dir, {"--next-runs", "3", "--config", file.string(), "--from", "2026-03-07T12:00:00Z"});
  BOOST_TEST(r.code == 0, r.err);
  BOOST_TEST(r.out ==
             "nightly: \"30 2 * * *\" in America/New_York\n"
             "  2026-03-08 03:00:00 EDT -04:00  2026-03-08T07:00:00Z\n"
             "  2026-03-09 02:30:00 EDT -04:00  2026-03-09T06:30:00Z\n"
             "  2026-03-10 02:30:00 EDT -04:00  2026-03-10T06:30:00Z\n");
  const auto bad = agent(dir, {"--next-runs", "three", "--config", file.string()});
  BOOST_TEST(bad.code == 2);
  BOOST_TEST(contains(bad.err, "--next-runs: expected a number"), bad.err);
}

namespace {

// Lines of `text` that start with `prefix`.
std::size_t count_lines(const std::string& text, const std::string& prefix) {
  std::size_t n = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    n += line.starts_with(prefix) ? 1 : 0;
  return n;
}

// A leading baton-agent started on `file`, its log in `log`; port() is its sidecar's.
struct reloadable_agent {
  child_process proc;
  unsigned short port = 0;
  reloadable_agent(const fs::path& file, const fs::path& log)
      : proc({bin_path("baton-agent"), "--config", file.string(), "--identity", "reloader"}, log.string()) {
    const auto line = proc.read_line(30s);
    BOOST_REQUIRE(line.starts_with("baton-agent listening on "));
    port = static_cast<unsigned short>(std::stoul(line.substr(line.rfind(':') + 1)));
  }
  boost::json::value leader() const { return http_client(port, 10s).get("/v1/leader").json; }
  http_reply reload(const std::string& authorization) const {
    http_client c(port, 10s);
    c.set_authorization(authorization);
    return c.post("/v1/reload", "");
  }
  /// The line of /metrics that starts with `series` ("" when none).
  std::string metric_line(const std::string& series) const {
    std::istringstream lines(http_client(port, 10s).get("/metrics").body);
    for (std::string line; std::getline(lines, line);)
      if (line.starts_with(series)) return line;
    return {};
  }
};

}  // namespace

BOOST_AUTO_TEST_CASE(sighup_applies_new_jobs_while_the_leader_keeps_its_lease) {
  temp_dir dir;
  batond_process server(dir.path(), {}, 0, (dir.path() / "batond.log").string());
  const auto out = dir.path() / "out";
  // `extra` marks each run's start and end, with the token it runs under, and takes a second.
  const std::string extra =
      "  - name: extra\n    schedule: \"* * * * * *\"\n    shell: true\n    command: "
      "\"echo start $BATON_FENCING_TOKEN >> " +
      out.string() + "; sleep 1; echo end >> " + out.string() + "\"\n";
  const auto config = [&](const std::string& listen, const std::string& more_jobs) {
    return "server: " + server.url() + "\nlisten: " + listen +
           "\nshutdown_grace: 1s\nelection:\n  key: reload/leader\n  ttl: 2s\n"
           "jobs:\n  - name: tick\n    schedule: \"0 0 1 1 *\"\n    command: [\"/bin/true\"]\n" +
           more_jobs;
  };
  const auto file = write_file(dir, "agent.yaml", config("127.0.0.1:0", ""));
  const auto log = dir.path() / "agent.log";
  reloadable_agent a(file, log);
  auto& p = a.proc;
  BOOST_REQUIRE(eventually([&] { return a.leader().at("is_leader").as_bool(); }));
  const auto token = a.leader().at("token");

  // Unchanged file: nothing to do.
  p.signal(SIGHUP);
  BOOST_REQUIRE(eventually([&] { return !log_line(log, "config_reload").empty(); }, 10s));
  BOOST_TEST(contains(log_line(log, "config_reload"), "changed=none"), log_line(log, "config_reload"));

  // A new job: applied, and its runs carry the lease's token.
  write_file(dir, "agent.yaml", config("127.0.0.1:0", extra));
  p.signal(SIGHUP);
  BOOST_REQUIRE(eventually([&] { return contains(read_all(log), "changed=jobs jobs=+extra"); }, 10s));
  BOOST_TEST(contains(read_all(log), "jobs=+extra restart_needed=none applied=true"), read_all(log));
  BOOST_REQUIRE(eventually([&] { return count_lines(read_all(out), "start ") >= 2; }, 10s));
  BOOST_TEST(count_lines(read_all(out), "start " + boost::json::serialize(token)) ==
             count_lines(read_all(out), "start "));

  // A new listen address needs a restart: nothing of the file is applied, `extra` goes on.
  write_file(dir, "agent.yaml", config("127.0.0.1:1", ""));
  p.signal(SIGHUP);
  BOOST_REQUIRE(eventually([&] { return contains(read_all(log), "changed=listen,jobs"); }, 10s));
  BOOST_TEST(contains(read_all(log), "jobs=-extra restart_needed=listen applied=false reason="),
             read_all(log));
  const auto runs = count_lines(read_all(out), "start ");
  BOOST_TEST(eventually([&] { return count_lines(read_all(out), "start ") > runs; }, 10s));

  // A bad file: one error line with its place, and the running configuration is kept.
  write_file(dir, "agent.yaml",
             config("127.0.0.1:0", "  - name: broken\n    schedule: \"61 * * * *\"\n    command: [x]\n"));
  p.signal(SIGHUP);
  BOOST_REQUIRE(eventually([&] { return !log_line(log, "config_reload_failed").empty(); }, 10s));
  BOOST_TEST(
      contains(log_line(log, "config_reload_failed"), "agent.yaml:12:15: jobs[1].schedule: minute field"),
      log_line(log, "config_reload_failed"));

  // `extra` removed: the run in flight finishes on its own (not stopped), and no run starts after it.
  write_file(dir, "agent.yaml", config("127.0.0.1:0", ""));
  p.signal(SIGHUP);
  BOOST_REQUIRE(eventually([&] { return contains(read_all(log), "jobs=-extra restart_needed=none"); }, 10s));
  BOOST_TEST(eventually(
      [&] {
        const auto text = read_all(out);
        return count_lines(text, "start ") == count_lines(text, "end");
      },
      10s));
  const auto final_runs = count_lines(read_all(out), "start ");
  std::this_thread::sleep_for(2500ms);  // two and a half slots of the removed schedule
  BOOST_TEST(count_lines(read_all(out), "start ") == final_runs);
  BOOST_TEST(log_line(log, "job_stopped").empty(), read_all(log));

  // The leader kept its lease throughout.
  const auto after = a.leader();
  BOOST_TEST(after.at("is_leader").as_bool());
  BOOST_TEST(after.at("token") == token);
  BOOST_TEST(log_line(log, "lost").empty(), read_all(log));
  p.signal(SIGTERM);
  BOOST_TEST(p.wait(30s) == 0);
  BOOST_TEST(!log_line(log, "released").empty());
}

BOOST_AUTO_TEST_CASE(reload_over_the_api_is_authorised_and_answers_what_changed_or_why_not) {
  temp_dir dir;
  batond_process server(dir.path(), {}, 0, (dir.path() / "batond.log").string());
  const auto config = [&](const std::string& listen, const std::string& key, const std::string& token) {
    return "server: " + server.url() + "\nlisten: " + listen + "\nresign_token: " + token +
           "\nshutdown_grace: 1s\nelection:\n  key: " + key + "\n  ttl: 2s\njobs: []\n";
  };
  const auto file = write_file(dir, "agent.yaml", config("127.0.0.1:0", "api/leader", "first-token"));
  const auto log = dir.path() / "agent.log";
  reloadable_agent a(file, log);
  BOOST_REQUIRE(eventually([&] { return a.leader().at("is_leader").as_bool(); }));
  const auto token = a.leader().at("token").to_number<std::uint64_t>();

  // Without the token, or with a wrong one: refused, nothing read.
  BOOST_TEST(a.reload("").status == 401);
  BOOST_TEST(a.reload("Bearer wrong").status == 401);
  BOOST_TEST(log_line(log, "config_reload").empty());

  // Nothing changed.
  auto r = a.reload("Bearer first-token");
  BOOST_TEST(r.status == 200, r.body);
  BOOST_TEST(r.json.at("changed").as_array().empty());
  BOOST_TEST(r.json.at("applied").as_bool());
  // The file applied is named by its hash, and the last reload succeeded (issue 26: drift and failed reloads
  // show on /metrics).
  const auto applied_hash = a.metric_line("baton_agent_config_info{hash=\"");
  BOOST_TEST(applied_hash.size() > std::string("baton_agent_config_info{hash=\"\"} 1").size(), applied_hash);
  BOOST_TEST(a.metric_line("baton_agent_config_last_reload_successful ") ==
             "baton_agent_config_last_reload_successful 1");

  // A bad file: 400 with the file's error; the running configuration stays.
  write_file(dir, "agent.yaml", config("127.0.0.1:0", "api/leader", "first-token") + "bogus: 1\n");
  r = a.reload("Bearer first-token");
  BOOST_TEST(a.metric_line("baton_agent_config_last_reload_successful ") ==
             "baton_agent_config_last_reload_successful 0");
  BOOST_TEST(a.metric_line("baton_agent_config_info{hash=\"") == applied_hash);
  BOOST_TEST(r.status == 400, r.body);
  BOOST_TEST(r.json.at("error").as_string() == "invalid_config");
  BOOST_TEST(contains(std::string(r.json.at("message").as_string()), "agent.yaml:9:1: bogus: unknown key"),
             r.body);

  // A key only a restart applies: 409, and nothing of the file is applied (the new token is not taken).
  write_file(dir, "agent.yaml", config("127.0.0.1:1", "api/leader", "second-token"));
  r = a.reload("Bearer first-token");
  BOOST_TEST(r.status == 409, r.body);
  BOOST_TEST(r.json.at("error").as_string() == "restart_needed");
  BOOST_TEST(boost::json::serialize(r.json.at("restart_needed")) == R"(["listen"])");
  BOOST_TEST(!r.json.at("applied").as_bool());
  BOOST_TEST(a.reload("Bearer second-token").status == 401);

  // A new resign token and a new election key: applied; the agent campaigns on the new key at once.
  write_file(dir, "agent.yaml", config("127.0.0.1:0", "api/other", "second-token"));
  r = a.reload("Bearer first-token");
  BOOST_TEST(r.status == 200, r.body);
  BOOST_TEST(boost::json::serialize(r.json.at("changed")) == R"(["resign_token","election"])");
  BOOST_TEST(r.json.at("election").as_bool());
  BOOST_TEST(r.json.at("applied").as_bool());
  BOOST_TEST(eventually(
      [&] {
        const auto l = a.leader();
        return l.at("key").as_string() == "api/other" && l.at("is_leader").as_bool() &&
               l.at("token").to_number<std::uint64_t>() > token;
      },
      10s));
  BOOST_TEST(!log_line(log, "election_changed").empty(), read_all(log));
  BOOST_TEST(log_line(log, "lost").empty(), read_all(log));
  // The old key was released, not left to expire.
  const auto old_key = server.client().get("/v1/locks/api%2Fleader");
  BOOST_TEST(old_key.status == 404, old_key.body);
  BOOST_TEST(old_key.json.at("error").as_string() == "not_held", old_key.body);
  BOOST_TEST(a.reload("Bearer first-token").status == 401);
  BOOST_TEST(a.reload("Bearer second-token").status == 200);
  BOOST_TEST(a.metric_line("baton_agent_config_last_reload_successful ") ==
             "baton_agent_config_last_reload_successful 1");
  BOOST_TEST(a.metric_line("baton_agent_config_info{hash=\"") != applied_hash);
  a.proc.signal(SIGTERM);
  BOOST_TEST(a.proc.wait(30s) == 0);
}

BOOST_AUTO_TEST_CASE(the_leader_endpoint_gives_the_leaders_identity_apart_from_its_owner_string) {
  temp_dir dir;
  batond_process server(dir.path(), {}, 0, (dir.path() / "batond.log").string());
  const auto file = write_file(dir, "agent.yaml", "server: " + server.url() + "\nlisten: 127.0.0.1:0\n");
  child_process p({bin_path("baton-agent"), "--config", file.string(), "--identity", "node#7"},
                  (dir.path() / "agent.log").string());
  const auto line = p.read_line(30s);
  const auto port = static_cast<unsigned short>(std::stoul(line.substr(line.rfind(':') + 1)));
  boost::json::value answer;
  BOOST_REQUIRE(eventually([&] {
    answer = http_client(port, 10s).get("/v1/leader").json;
    return answer.at("is_leader").as_bool();
  }));
  // The owner is the identity with the SDK's random suffix; an identity may contain '#' itself.
  const std::string owner(answer.at("leader").as_string());
  BOOST_TEST(owner.starts_with("node#7#"), owner);
  BOOST_TEST(owner.size() == std::string("node#7#").size() + 16);
  BOOST_TEST(answer.at("leader_identity").as_string() == "node#7");
  p.signal(SIGTERM);
  BOOST_TEST(p.wait(30s) == 0);
}

// stderr lands in terminals and CI logs: an etcd password (etcd://user:password@host) quoted by a message,
// whether from the file, a flag or a mistyped flag, is shown as ***.
BOOST_AUTO_TEST_CASE(an_etcd_password_never_appears_in_an_error_line) {
  temp_dir dir;
  const auto ca = write_file(dir, "ca.pem", "not a certificate, but readable\n");
  const auto tls = write_file(
      dir, "tls.yaml", "server: etcd://u:s3cret@127.0.0.1:2379\ntls:\n  ca_file: " + ca.string() + "\n");
  const auto plain = write_file(dir, "plain.yaml", "server: etcd://u:s3cret@127.0.0.1:2379\n");
  const auto job = write_file(dir, "job.yaml",
                              "jobs:\n"
                              "  - name: a\n"
                              "    schedule: \"* * * * *\"\n"
                              "    http: {url: \"ftp://u:s3cret@127.0.0.1/x\"}\n");
  const std::vector<std::vector<std::string>> runs = {
      {"--check-config", tls.string()},
      {"--check-config", plain.string(), "--ca-file", ca.string()},
      {"--config", plain.string(), "--ca-file", ca.string()},
      {"--check-config", job.string()},
      {"--config", plain.string(), "--sever=etcd://u:s3cret@h"},
      {"--config", plain.string(), "etcd://u:s3cret@h"},
  };
  for (const auto& args : runs) {
    const auto r = agent(dir, args);
    BOOST_TEST(r.code == 2, args.back());
    BOOST_TEST(!r.err.empty(), args.back());
    BOOST_TEST(!contains(r.err, "s3cret"), r.err);
    BOOST_TEST(contains(r.err, "***@"), r.err);
  }
}

// Issue 26: Prometheus reaches /metrics on an address of its own while the API stays on loopback.
BOOST_AUTO_TEST_CASE(metrics_listen_serves_metrics_and_healthz_only_beside_the_api) {
  temp_dir dir;
  batond_process server(dir.path(), {}, 0, (dir.path() / "batond.log").string());
  const auto file =
      write_file(dir, "agent.yaml",
                 "server: " + server.url() +
                     "\nlisten: 127.0.0.1:0\nmetrics_listen: 127.0.0.1:0\nelection:\n  key: m/leader\n"
                     "  ttl: 2s\njobs: []\n");
  child_process proc({bin_path("baton-agent"), "--config", file.string(), "--identity", "m"},
                     (dir.path() / "agent.log").string());
  const auto api_line = proc.read_line(30s);
  BOOST_REQUIRE(api_line.starts_with("baton-agent listening on "));
  const auto metrics_line = proc.read_line(30s);
  BOOST_TEST_REQUIRE(metrics_line.starts_with("baton-agent metrics on "), metrics_line);
  const auto port_of = [](const std::string& line) {
    return static_cast<unsigned short>(std::stoul(line.substr(line.rfind(':') + 1)));
  };
  http_client metrics(port_of(metrics_line), 10s);
  const auto m = metrics.get("/metrics");
  BOOST_TEST(m.status == 200);
  BOOST_TEST(m.body.find("baton_agent_leader ") != std::string::npos);
  BOOST_TEST(metrics.get("/healthz").status == 200);
  BOOST_TEST(metrics.get("/v1/jobs").status == 404);
  BOOST_TEST(metrics.post("/v1/resign", "").status == 404);
  BOOST_TEST(http_client(port_of(api_line), 10s).get("/v1/jobs").status == 200);
  proc.signal(SIGTERM);
  BOOST_TEST(proc.wait(30s) == 0);
}

// Issue 26: a ConfigMap update reaches the agent without a restart or a signal: with reload_on_change it
// reloads a file whose bytes changed, once per change.
BOOST_AUTO_TEST_CASE(reload_on_change_applies_a_changed_file_and_tries_a_bad_one_once) {
  temp_dir dir;
  batond_process server(dir.path(), {}, 0, (dir.path() / "batond.log").string());
  const auto config = [&](const std::string& jobs) {
    return "server: " + server.url() +
           "\nlisten: 127.0.0.1:0\nreload_on_change: 200ms\nelection:\n  key: w/leader\n  ttl: 2s\njobs:" +
           jobs;
  };
  const auto file = write_file(dir, "agent.yaml", config(" []\n"));
  const auto log = dir.path() / "agent.log";
  reloadable_agent a(file, log);
  BOOST_REQUIRE(eventually([&] { return a.leader().at("is_leader").as_bool(); }));
  write_file(dir, "agent.yaml",
             config("\n  - name: added\n    schedule: \"0 0 1 1 *\"\n    command: [/bin/true]\n"));
  BOOST_TEST(eventually(
      [&] { return http_client(a.port, 10s).get("/v1/jobs").json.at("jobs").as_array().size() == 1u; }));
  BOOST_TEST(!log_line(log, "config_changed").empty(), read_all(log));
  BOOST_TEST(a.metric_line("baton_agent_config_last_reload_successful ") ==
             "baton_agent_config_last_reload_successful 1");
  write_file(dir, "agent.yaml", config(" []\nbogus: 1\n"));
  BOOST_TEST(eventually([&] { return !log_line(log, "config_reload_failed").empty(); }));
  std::this_thread::sleep_for(1s);  // five more looks: the same bad file is not tried again
  std::size_t failures = 0;
  std::istringstream lines(read_all(log));
  for (std::string line; std::getline(lines, line);)
    failures += line.find("event=config_reload_failed") != std::string::npos;
  BOOST_TEST(failures == 1u);
  BOOST_TEST(a.metric_line("baton_agent_config_last_reload_successful ") ==
             "baton_agent_config_last_reload_successful 0");
  BOOST_TEST(http_client(a.port, 10s).get("/v1/jobs").json.at("jobs").as_array().size() == 1u);
  a.proc.signal(SIGTERM);
  BOOST_TEST(a.proc.wait(30s) == 0);
}
