// SPDX-License-Identifier: Apache-2.0
// batond and baton-agent under a service manager: the sd_notify messages a Type=notify unit with
// WatchdogSec relies on (READY=1 once serving, WATCHDOG=1 while the loop turns, STOPPING=1 on SIGTERM), and
// the log formats an operator picks (--log-format, log_format). The test plays systemd: it binds the
// NOTIFY_SOCKET datagram socket itself and passes WATCHDOG_USEC.
#define BOOST_TEST_MODULE sd_notify_daemons
#include <boost/test/unit_test.hpp>

#include "agent_fixture.hpp"
#include "batond_fixture.hpp"
#include "eventually.hpp"
#include "notify_listener.hpp"

#include <boost/json.hpp>

#include <algorithm>
#include <csignal>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

using namespace baton::test;
using namespace std::chrono_literals;

namespace {

// systemd would ping-check every 200 ms; the processes ping every 100 ms.
const std::string watchdog_usec = "WATCHDOG_USEC=200000";

std::vector<std::string> lines_of(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);)
    out.push_back(line);
  return out;
}

// Every line of a log written with --log-format json is one JSON object with ts, level and event first and
// every value a string; returns the events in order.
std::vector<std::string> json_events(const std::vector<std::string>& lines) {
  std::vector<std::string> events;
  for (const auto& line : lines) {
    BOOST_TEST_CONTEXT(line) {
      boost::system::error_code ec;
      auto v = boost::json::parse(line, ec);
      BOOST_REQUIRE(!ec);
      BOOST_REQUIRE(v.is_object());
      const auto& o = v.as_object();
      BOOST_REQUIRE(o.size() >= 3u);
      auto it = o.begin();
      BOOST_TEST(it->key() == "ts");
      BOOST_TEST((++it)->key() == "level");
      BOOST_TEST((++it)->key() == "event");
      for (const auto& kv : o)
        BOOST_TEST(kv.value().is_string(), kv.key());
      events.push_back(std::string(o.at("event").as_string()));
    }
  }
  return events;
}

int count_watchdogs(notify_listener& systemd, int wanted, std::chrono::milliseconds bound) {
  int seen = 0;
  const auto until = std::chrono::steady_clock::now() + bound;
  while (seen < wanted && std::chrono::steady_clock::now() < until) {
    auto got = systemd.receive(std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now() + 1ms));
    if (got.empty()) break;
    BOOST_TEST((got == "WATCHDOG=1"), got);
    if (got == "WATCHDOG=1") ++seen;
  }
  return seen;
}

}  // namespace

BOOST_AUTO_TEST_CASE(batond_says_ready_once_listening_pings_the_watchdog_and_says_stopping_on_sigterm) {
  temp_dir dir;
  const auto socket = (dir.path() / "notify").string();
  notify_listener systemd(socket);
  const auto log = dir.path() / "batond.log";
  // The fixture runs batond at --log-level warn; max-waiters not below max-connections is a warn line at
  // start-up, whose fields hold spaces and '='-free text alike.
  batond_process server(
      dir.path() / "data",
      {"--log-format", "json", "--threads", "2", "--max-connections", "64", "--max-connections-per-address",
       "64", "--max-waiters", "64", "--max-waiters-per-key", "8"},
      0, log.string(), {"NOTIFY_SOCKET=" + socket, watchdog_usec});

  const auto ready = systemd.receive(5s);
  BOOST_TEST(ready == "READY=1\nSTATUS=serving on 127.0.0.1:" + std::to_string(server.port()));
  // Ready means served: the port answers.
  BOOST_TEST(server.client().get("/healthz").status == 200);

  BOOST_TEST(count_watchdogs(systemd, 3, 5s) == 3);

  server.process().signal(SIGTERM);
  BOOST_TEST(systemd.wait_for("STOPPING=1", 5s));
  BOOST_TEST(server.process().wait(10s) == 0);

  const auto events = json_events(lines_of(log));
  BOOST_TEST((events == std::vector<std::string>{"waiters_not_below_connections"}), events.size());
}

BOOST_AUTO_TEST_CASE(batond_does_not_ping_for_a_watchdog_pid_that_is_not_its_own) {
  temp_dir dir;
  const auto socket = (dir.path() / "notify").string();
  notify_listener systemd(socket);
  // WATCHDOG_PID=1: the variables were meant for another process (batond started by a watched parent).
  batond_process server(dir.path() / "data", {}, 0, (dir.path() / "batond.log").string(),
                        {"NOTIFY_SOCKET=" + socket, watchdog_usec, "WATCHDOG_PID=1"});
  BOOST_TEST(systemd.receive(5s).rfind("READY=1\n", 0) == 0);
  // Ten of its would-be ping intervals.
  BOOST_TEST(systemd.receive(1s) == "");
}

BOOST_AUTO_TEST_CASE(the_agent_says_ready_with_its_sidecar_up_pings_and_says_stopping_on_sigterm) {
  temp_dir dir;
  batond_process server(dir.path() / "data", {}, 0, (dir.path() / "batond.log").string());
  const auto socket = (dir.path() / "notify").string();
  notify_listener systemd(socket);
  const auto config =
      write_config(dir, "agent.yaml", base_config(server, "2s", "  []\n") + "log_format: json\n");
  const auto log = dir.path() / "agent.log";
  agent_process agent(config, "node-0", log, {"NOTIFY_SOCKET=" + socket, watchdog_usec});

  const auto ready = systemd.receive(5s);
  BOOST_TEST(ready == "READY=1\nSTATUS=sidecar on 127.0.0.1:" + std::to_string(agent.port()));
  BOOST_TEST(agent.get("/healthz").status == 200);

  BOOST_TEST(count_watchdogs(systemd, 3, 5s) == 3);

  agent.process().signal(SIGTERM);
  BOOST_TEST(systemd.wait_for("STOPPING=1", 5s));
  BOOST_TEST(agent.process().wait(10s) == 0);

  const auto events = json_events(lines_of(log));
  BOOST_TEST(std::count(events.begin(), events.end(), "started") == 1);
  BOOST_TEST(std::count(events.begin(), events.end(), "stopped") == 1);
}

BOOST_AUTO_TEST_CASE(a_reload_switches_the_agents_log_format_at_once) {
  temp_dir dir;
  batond_process server(dir.path() / "data", {}, 0, (dir.path() / "batond.log").string());
  const auto base = base_config(server, "2s", "  []\n");
  const auto config = write_config(dir, "agent.yaml", base + "log_format: json\n");
  const auto log = dir.path() / "agent.log";
  agent_process agent(config, "node-0", log);
  write_config(dir, "agent.yaml", base + "log_format: logfmt\n");
  agent.process().signal(SIGHUP);
  BOOST_TEST(eventually(
                 [&] {
                   return !agent.log_lines({"ts=", " event=config_reload "}).empty();
                 },
                 10s),
             agent.log());
  BOOST_TEST(agent.process().wait(0ms) == -1);  // still running
  agent.process().signal(SIGTERM);
  BOOST_TEST(agent.process().wait(10s) == 0);

  // JSON up to the reload; from its own line on, logfmt.
  const auto lines = lines_of(log);
  const auto switched =
      std::find_if(lines.begin(), lines.end(), [](const std::string& l) { return l.rfind("ts=", 0) == 0; });
  BOOST_REQUIRE(switched != lines.end());
  BOOST_TEST(switched->find(" event=config_reload ") != std::string::npos, *switched);
  BOOST_TEST(json_events({lines.begin(), switched}).front() == "started");
  for (auto it = switched; it != lines.end(); ++it)
    BOOST_TEST(it->rfind("ts=", 0) == 0u, *it);
}

BOOST_AUTO_TEST_CASE(an_unknown_log_format_is_refused_with_one_line_and_status_2) {
  temp_dir dir;
  const auto err = [&](const char* name) { return (dir.path() / name).string(); };
  const auto batond = run_to_end(
      {bin_path("batond"), "--data-dir", dir.path().string(), "--log-format", "xml"}, err("batond.err"), 30s);
  BOOST_TEST(batond.code == 2);
  BOOST_TEST(batond.err == "batond: --log-format must be logfmt or json, got \"xml\"\n");

  const auto config = write_config(dir, "agent.yaml", "listen: 127.0.0.1:0\n");
  const auto flag =
      run_to_end({bin_path("baton-agent"), "--check-config", config.string(), "--log-format", "xml"},
                 err("flag.err"), 30s);
  BOOST_TEST(flag.code == 2);
  BOOST_TEST(flag.err.find("--log-format: expected logfmt or json, got \"xml\"") != std::string::npos,
             flag.err);
  BOOST_TEST(std::count(flag.err.begin(), flag.err.end(), '\n') == 1);

  const auto bad = write_config(dir, "bad.yaml", "listen: 127.0.0.1:0\nlog_format: text\n");
  const auto key = run_to_end({bin_path("baton-agent"), "--check-config", bad.string()}, err("key.err"), 30s);
  BOOST_TEST(key.code == 2);
  BOOST_TEST(key.err.find("log_format: expected logfmt or json, got \"text\"") != std::string::npos, key.err);
}
