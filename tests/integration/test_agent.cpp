// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE agent
#include <boost/test/unit_test.hpp>

// batond, fenced-store and several baton-agents as real processes on loopback.

#include "agent_fixture.hpp"
#include "fault_proxy.hpp"
#include "process_metrics_check.hpp"

#include <boost/json/parse.hpp>

#include <signal.h>

#include <algorithm>
#include <ctime>
#include <fstream>
#include <iomanip>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

using namespace baton::test;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

namespace {

struct store_process {
  std::unique_ptr<child_process> proc;
  unsigned short port = 0;
  store_process() {
    proc = std::make_unique<child_process>(
        std::vector<std::string>{bin_path("fenced-store"), "--listen", "127.0.0.1:0"});
    auto line = proc->read_line(30s);
    port = static_cast<unsigned short>(std::stoul(line.substr(line.rfind(':') + 1)));
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port); }
};

// Polls until `pred` holds, at most `bound`.
template <class Pred>
bool eventually(Pred pred, std::chrono::seconds bound = 30s) {
  auto until = clock_type::now() + bound;
  while (clock_type::now() < until) {
    if (pred()) return true;
    std::this_thread::sleep_for(50ms);
  }
  return pred();
}

// The token agent i says it leads with, or nullopt when it does not lead (or is not running).
std::optional<std::uint64_t> leads_with(std::vector<std::unique_ptr<agent_process>>& agents, std::size_t i) {
  if (!agents[i] || !agents[i]->process().running()) return std::nullopt;
  auto r = agents[i]->leader();
  if (r.status != 200 || !r.json.at("is_leader").as_bool()) return std::nullopt;
  return r.json.at("token").to_number<std::uint64_t>();
}

// Index of the agent whose sidecar says it leads, or -1; fails the test if two lead at once. The sidecars
// are asked one after another, so two claims in one sweep may be a handover between the two answers; two
// leaders at once is proven when the earlier claimant still leads, with the same token, after the later
// claim.
int leader_of(std::vector<std::unique_ptr<agent_process>>& agents) {
  std::vector<std::pair<std::size_t, std::uint64_t>> claims;
  for (std::size_t i = 0; i < agents.size(); ++i)
    if (auto t = leads_with(agents, i)) claims.emplace_back(i, *t);
  if (claims.empty()) return -1;
  for (std::size_t c = 0; c + 1 < claims.size(); ++c) {
    auto again = leads_with(agents, claims[c].first);
    BOOST_REQUIRE_MESSAGE(again != claims[c].second, "two agents lead at once: agent "
                                                         << claims[c].first << " (token " << claims[c].second
                                                         << ") and agent " << claims.back().first
                                                         << " (token " << claims.back().second << ")");
  }
  return static_cast<int>(claims.back().first);
}

bool process_gone(int pid) {
  return ::kill(pid, 0) != 0 && errno == ESRCH;
}

}  // namespace

BOOST_AUTO_TEST_CASE(one_leader_at_a_time_and_a_standby_takes_over_after_kill9) {
  temp_dir dir;
  batond_process server(dir.path());
  auto cfg = write_config(dir, "agent.yaml", base_config(server, "1s", "  []\n"));
  auto agents = start_agents(cfg, 3, dir);
  int leader = -1;
  BOOST_REQUIRE(eventually([&] { return (leader = leader_of(agents)) >= 0; }));
  auto first = agents[leader]->leader();
  auto first_token = first.json.at("token").to_number<std::uint64_t>();
  BOOST_TEST(std::string(first.json.at("leader").as_string()).rfind(agents[leader]->identity() + "#", 0) ==
             0u);
  // Every sidecar agrees on who leads (the lock server's answer).
  for (auto& a : agents)
    BOOST_TEST(a->leader().json.at("leader") == first.json.at("leader"));
  // Watch for a while: never two leaders.
  for (int i = 0; i < 20; ++i) {
    leader_of(agents);
    std::this_thread::sleep_for(50ms);
  }
  agents[leader]->process().signal(SIGKILL);
  agents[leader]->process().wait(30s);
  agents[leader].reset();
  int next = -1;
  BOOST_REQUIRE(eventually([&] { return (next = leader_of(agents)) >= 0; }));
  BOOST_TEST(agents[next]->leader().json.at("token").to_number<std::uint64_t>() > first_token);
}

BOOST_AUTO_TEST_CASE(a_paused_leaders_late_write_is_refused_by_the_fenced_store) {
  temp_dir dir;
  batond_process server(dir.path());
  store_process store;
  // The job writes, takes 3 s (longer than the 1 s TTL), and writes again with the same token.
  std::string put =
      "curl -s -o /dev/null -X PUT -H \"Fencing-Token: $BATON_FENCING_TOKEN\" --data \"$BATON_IDENTITY\" " +
      store.url() + "/items/report";
  auto cfg = write_config(dir, "agent.yaml",
                          base_config(server, "1s",
                                      "  - name: writer\n    schedule: \"*/1 * * * * *\"\n    shell: true\n"
                                      "    command: ['" +
                                          put + "; sleep 3; " + put + "']\n    grace: 1s\n"));
  auto agents = start_agents(cfg, 2, dir);
  int leader = -1;
  BOOST_REQUIRE(eventually([&] { return (leader = leader_of(agents)) >= 0; }));
  auto old_token = agents[leader]->leader().json.at("token").to_number<std::uint64_t>();
  http_client store_client(store.port);
  BOOST_REQUIRE(eventually([&] { return store_client.get("/items/report").status == 200; }));
  // Freeze the leader agent and its jobs' guards, as a stopped cgroup of supervisors would be (a stopped
  // agent alone no longer suffices: the guard kills the job at the lease's deadline). The job, in a process
  // group of its own, runs on.
  agents[leader]->process().signal(SIGSTOP);
  struct stopped_guards {
    std::vector<int> pids;
    ~stopped_guards() {
      for (int pid : pids)
        ::kill(pid, SIGCONT);
    }
  } guards{guards_of(agents[leader]->pid())};
  for (int pid : guards.pids)
    ::kill(pid, SIGSTOP);
  int other = 1 - leader;
  BOOST_REQUIRE(eventually([&] {
    auto r = agents[other]->leader();
    return r.json.at("is_leader").as_bool();
  }));
  auto new_token = agents[other]->leader().json.at("token").to_number<std::uint64_t>();
  BOOST_TEST(new_token > old_token);
  // The stale job's second write carries the old token after the new leader wrote: refused.
  BOOST_TEST(eventually([&] {
    auto h = store_client.get("/history");
    return h.body.find("\"token\":" + std::to_string(old_token) + ",\"accepted\":false") != std::string::npos;
  }));
  for (int pid : guards.pids)
    ::kill(pid, SIGCONT);
  agents[leader]->process().signal(SIGCONT);
  BOOST_TEST(eventually([&] { return !agents[leader]->leader().json.at("is_leader").as_bool(); }));
  // Issue 26, defect 2: woken past its lease, the old leader decides nothing more. The slots that passed
  // while it was stopped were the new leader's (it ran them): not missed, and not counted here.
  BOOST_TEST(eventually([&] { return !agents[leader]->log_lines({"event=lost"}).empty(); }));
  BOOST_TEST(agents[leader]->log_lines({"event=job_skipped", "reason=missed"}).empty(),
             agents[leader]->log());
  BOOST_TEST(
      agents[leader]->metric("baton_agent_job_slots_skipped_total{job=\"writer\",reason=\"missed\"}") == 0);
}

BOOST_AUTO_TEST_CASE(running_jobs_are_killed_when_leadership_is_lost) {
  temp_dir dir;
  batond_process server(dir.path());
  auto pidfile = dir.path() / "pids";
  auto cfg = write_config(dir, "agent.yaml",
                          base_config(server, "1s",
                                      "  - name: long\n    schedule: \"*/1 * * * * *\"\n    shell: true\n"
                                      "    command: [\"sleep 1000 & echo $! >> " +
                                          pidfile.string() + "; echo $$ >> " + pidfile.string() +
                                          "; wait\"]\n    grace: 500ms\n"));
  agent_process agent(cfg, "solo", dir.path() / "a.log");
  BOOST_REQUIRE(eventually([&] {
    std::ifstream in(pidfile);
    std::string a, b;
    return static_cast<bool>(in >> a >> b);
  }));
  std::vector<int> pids;
  {
    std::ifstream in(pidfile);
    int p;
    while (in >> p)
      pids.push_back(p);
  }
  // The lock server freezes: the agent cannot renew, declares the loss and stops its jobs' process groups.
  server.process().signal(SIGSTOP);
  bool all_gone = eventually([&] {
    for (int p : pids)
      if (!process_gone(p)) return false;
    return true;
  });
  server.process().signal(SIGCONT);
  BOOST_TEST(all_gone);
  auto log_has = [&](const std::string& what) {
    std::ifstream log(dir.path() / "a.log");
    std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
    return text.find(what) != std::string::npos;
  };
  BOOST_TEST(eventually([&] { return log_has("event=lost"); }));
  // A run whose lease was lost is recorded as such (issue 26), not as a plain stop.
  BOOST_TEST(eventually([&] { return log_has("outcome=lost"); }));
}

BOOST_AUTO_TEST_CASE(sigterm_releases_leadership_so_a_standby_takes_over_at_once) {
  temp_dir dir;
  batond_process server(dir.path());
  auto cfg = write_config(dir, "agent.yaml", base_config(server, "30s", "  []\n"));
  auto agents = start_agents(cfg, 2, dir);
  int leader = -1;
  BOOST_REQUIRE(eventually([&] { return (leader = leader_of(agents)) >= 0; }));
  auto started = clock_type::now();
  agents[leader]->process().signal(SIGTERM);
  int next = -1;
  BOOST_REQUIRE(eventually([&] { return (next = leader_of(agents)) >= 0 && next != leader; }));
  // Well under a second, against a 30 s TTL: the lease was released, not left to expire.
  BOOST_TEST(std::chrono::duration<double>(clock_type::now() - started).count() < 1.0);
  BOOST_TEST(agents[leader]->process().wait(30s) == 0);
}

BOOST_AUTO_TEST_CASE(resign_needs_the_token_and_hands_leadership_over) {
  temp_dir dir;
  batond_process server(dir.path());
  auto cfg =
      write_config(dir, "agent.yaml", "resign_token: s3cret-token\n" + base_config(server, "30s", "  []\n"));
  auto agents = start_agents(cfg, 2, dir);
  int leader = -1;
  BOOST_REQUIRE(eventually([&] { return (leader = leader_of(agents)) >= 0; }));
  auto raw = [&](int i, const std::string& auth) {
    return http_client::raw(agents[i]->port(),
                            "POST /v1/resign HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n" + auth +
                                "Connection: close\r\n\r\n");
  };
  BOOST_TEST(raw(leader, "").status == 401);
  BOOST_TEST(raw(leader, "Authorization: Bearer wrong\r\n").status == 401);
  BOOST_TEST(raw(1 - leader, "Authorization: Bearer s3cret-token\r\n").status == 409);  // not the leader
  BOOST_TEST(raw(leader, "Authorization: Bearer s3cret-token\r\n").status == 200);
  BOOST_TEST(eventually([&] { return leader_of(agents) == 1 - leader; }));
}

// The leader publishes its identity and sidecar URL with its lease; a follower's /v1/leader reads them from
// the lock server (it has no other way to know the leader's port), and the URL reaches the leader's sidecar.
BOOST_AUTO_TEST_CASE(a_followers_leader_route_reports_the_value_the_leader_published) {
  temp_dir dir;
  batond_process server(dir.path());
  auto cfg = write_config(dir, "agent.yaml", base_config(server, "30s", "  []\n"));
  auto agents = start_agents(cfg, 2, dir);
  int leader = -1;
  BOOST_REQUIRE(eventually([&] { return (leader = leader_of(agents)) >= 0; }));
  const auto expect_published_by = [&](const agent_process& follower, const agent_process& leading) {
    const auto r = follower.leader();
    BOOST_REQUIRE(r.status == 200);
    BOOST_TEST(!r.json.at("is_leader").as_bool());
    BOOST_TEST(r.json.at("leader_identity").as_string() == leading.identity());
    const auto api = "http://127.0.0.1:" + std::to_string(leading.port());
    BOOST_TEST(r.json.at("leader_api").as_string() == api);
    const auto value = boost::json::parse(r.json.at("leader_value").as_string());
    BOOST_TEST(value.at("identity").as_string() == leading.identity());
    BOOST_TEST(value.at("api").as_string() == api);
    // The URL is the leader's own sidecar.
    BOOST_TEST(http_client(leading.port(), 10s).get("/v1/leader").json.at("is_leader").as_bool());
  };
  expect_published_by(*agents[1 - leader], *agents[leader]);
  // The leader leaves; a third agent follows the new leader and reports the value that one published.
  agents[leader]->process().signal(SIGTERM);
  BOOST_REQUIRE(agents[leader]->process().wait(30s) == 0);
  agents[leader].reset();
  BOOST_REQUIRE(eventually([&] { return leader_of(agents) == 1 - leader; }));
  agent_process late(cfg, "node-late", dir.path() / "late.log");
  expect_published_by(late, *agents[1 - leader]);
}

// A web page can make a browser send a form or text/plain POST here without a preflight, and read answers
// through a DNS name it rebinds to 127.0.0.1: an Origin header, a foreign Host on a loopback socket and a
// page's content types are refused, and the leader stays; curl's bodyless POST still resigns.
BOOST_AUTO_TEST_CASE(cross_site_requests_and_dns_rebinding_do_not_reach_the_sidecar) {
  temp_dir dir;
  batond_process server(dir.path());
  auto cfg = write_config(dir, "agent.yaml", base_config(server, "30s", "  []\n"));
  agent_process agent(cfg, "node-0", dir.path() / "a.log");
  BOOST_REQUIRE(eventually([&] { return agent.leader().json.at("is_leader").as_bool(); }));
  const auto token = agent.leader().json.at("token");
  auto raw = [&](const std::string& method, const std::string& target, const std::string& headers) {
    return http_client::raw(agent.port(), method + " " + target + " HTTP/1.1\r\n" + headers +
                                              "Content-Length: 0\r\nConnection: close\r\n\r\n");
  };
  const std::string local = "Host: 127.0.0.1:" + std::to_string(agent.port()) + "\r\n";
  BOOST_TEST(raw("POST", "/v1/resign", local + "Origin: http://evil.example\r\nContent-Type: text/plain\r\n")
                 .status == 403);
  BOOST_TEST(raw("POST", "/v1/resign", "Host: evil.example:7071\r\nContent-Type: text/plain\r\n").status ==
             421);
  BOOST_TEST(raw("GET", "/v1/jobs", "Host: evil.example\r\n").status == 421);
  BOOST_TEST(raw("GET", "/v1/leader", local + "Origin: null\r\n").status == 403);
  for (const auto* type : {"text/plain", "application/x-www-form-urlencoded",
                           "multipart/form-data; boundary=x", "Text/Plain;charset=UTF-8"})
    BOOST_TEST(raw("POST", "/v1/resign", local + "Content-Type: " + type + "\r\n").status == 415, type);
  BOOST_TEST(raw("POST", "/v1/jobs/none/run", local + "Content-Type: text/plain\r\n").status == 415);
  // Still the same leader, with the same lease.
  const auto still = agent.leader();
  BOOST_TEST(still.json.at("is_leader").as_bool());
  BOOST_TEST(still.json.at("token") == token);
  // Loopback names in every form are answered; a bodyless POST (curl -X POST) and application/json resign.
  for (const auto* host : {"localhost", "LOCALHOST:7071", "127.0.0.1", "127.1.2.3:80", "[::1]", "[::1]:7071"})
    BOOST_TEST(raw("GET", "/healthz", std::string("Host: ") + host + "\r\n").status == 200, host);
  BOOST_TEST(raw("POST", "/v1/jobs/none/suspend", local + "Content-Type: application/json\r\n").status ==
             404);
  BOOST_TEST(raw("POST", "/v1/resign", local).status == 200);
}

BOOST_AUTO_TEST_CASE(per_job_mode_runs_each_slot_once_across_replicas) {
  temp_dir dir;
  batond_process server(dir.path());
  auto out = dir.path() / "slots";
  // A slot's lock is kept until halfway to the next slot, so a replica that wakes for the slot later than
  // that would run it again: a slot every 4 s (2 s of hold) leaves a loaded machine ten times the usual
  // wake-up delay, where a slot every second (0.5 s) did not.
  auto cfg = write_config(
      dir, "agent.yaml",
      "mode: per-job\n" + base_config(server, "10s",
                                      "  - name: tick\n    schedule: \"*/4 * * * * *\"\n"
                                      "    shell: true\n    command: [\"echo $BATON_SCHEDULED_AT "
                                      "$BATON_FENCING_TOKEN >> " +
                                          out.string() + "\"]\n"));
  auto agents = start_agents(cfg, 3, dir);
  BOOST_REQUIRE(eventually(
      [&] {
        std::ifstream in(out);
        int lines = 0;
        for (std::string l; std::getline(in, l);)
          ++lines;
        return lines >= 4;
      },
      60s));
  for (auto& a : agents)
    a->process().signal(SIGTERM);
  for (auto& a : agents)
    BOOST_TEST(a->process().wait(30s) == 0);
  std::ifstream in(out);
  std::set<std::string> slots;
  std::set<std::string> tokens;
  int lines = 0;
  for (std::string slot, token; in >> slot >> token; ++lines) {
    slots.insert(slot);
    tokens.insert(token);
  }
  BOOST_TEST(lines >= 4);
  BOOST_TEST(slots.size() == static_cast<std::size_t>(lines));   // no slot ran twice
  BOOST_TEST(tokens.size() == static_cast<std::size_t>(lines));  // each run had its own lease
}

BOOST_AUTO_TEST_CASE(check_config_accepts_a_good_file_and_names_the_line_of_a_bad_one) {
  temp_dir dir;
  auto good = write_config(dir, "good.yaml",
                           "jobs:\n  - name: a\n    schedule: \"* * * * *\"\n    command: [\"/bin/true\"]\n");
  auto bad = write_config(dir, "bad.yaml",
                          "jobs:\n  - name: a\n    schedule: \"61 * * * *\"\n    command: [\"/bin/true\"]\n");
  child_process ok({bin_path("baton-agent"), "--check-config", good.string()});
  BOOST_TEST(ok.wait(30s) == 0);
  child_process ko({bin_path("baton-agent"), "--check-config", bad.string()}, (dir.path() / "err").string());
  BOOST_TEST(ko.wait(30s) == 2);
  std::ifstream err(dir.path() / "err");
  std::string line;
  std::getline(err, line);
  BOOST_TEST(line.find("bad.yaml:3:") != std::string::npos);
  BOOST_TEST(line.find("jobs[0].schedule") != std::string::npos);
}

namespace {
// The ISO timestamp that starts the first log line containing all of `parts`, or "" if none.
std::string first_line_time(const std::filesystem::path& log, const std::vector<std::string>& parts) {
  std::istringstream in(read_file(log));
  for (std::string line; std::getline(in, line);) {
    bool all = true;
    for (const auto& p : parts)
      all = all && line.find(p) != std::string::npos;
    if (all) return line.substr(0, line.find(' '));
  }
  return {};
}
}  // namespace

BOOST_AUTO_TEST_CASE(kill9_failover_within_ttl_plus_a_second_runs_each_slot_once_with_increasing_tokens) {
  temp_dir dir;
  batond_process server(dir.path());
  store_process store;
  auto runs = dir.path() / "runs";
  std::string job =
      "  - name: tick\n    schedule: \"*/1 * * * * *\"\n    shell: true\n    command: ['echo "
      "$BATON_SCHEDULED_AT $BATON_FENCING_TOKEN >> " +
      runs.string() + "; curl -s -o /dev/null -X PUT -H \"Fencing-Token: $BATON_FENCING_TOKEN\" --data x " +
      store.url() + "/items/tick']\n";
  auto cfg = write_config(dir, "agent.yaml", base_config(server, "2s", job));
  auto agents = start_agents(cfg, 3, dir);
  int leader = -1;
  BOOST_REQUIRE(eventually([&] { return (leader = leader_of(agents)) >= 0; }));
  std::this_thread::sleep_for(2500ms);
  auto killed_at = clock_type::now();
  agents[leader]->process().signal(SIGKILL);
  agents[leader]->process().wait(30s);
  agents[leader].reset();
  int next = -1;
  BOOST_REQUIRE(eventually([&] { return (next = leader_of(agents)) >= 0; }));
  BOOST_TEST(std::chrono::duration<double>(clock_type::now() - killed_at).count() < 3.0);  // ttl + 1 s
  std::this_thread::sleep_for(2500ms);
  for (auto& a : agents)
    if (a) a->process().signal(SIGTERM);
  for (auto& a : agents)
    if (a) BOOST_TEST(a->process().wait(30s) == 0);

  // Every slot ran once, and tokens never went down in run order.
  std::istringstream in(read_file(runs));
  std::set<std::string> slots;
  std::uint64_t last_token = 0;
  int lines = 0;
  for (std::string slot; in >> slot;) {
    std::uint64_t token;
    in >> token;
    ++lines;
    BOOST_TEST(slots.insert(slot).second, "slot " << slot << " ran twice");
    BOOST_TEST(token >= last_token);
    last_token = token;
  }
  BOOST_TEST(lines >= 3);
  BOOST_TEST(slots.size() >= 2u);
  // The store accepted every write, in token order.
  std::istringstream history(http_client(store.port).get("/history").body);
  std::uint64_t highest = 0;
  int writes = 0;
  for (std::string line; std::getline(history, line);) {
    auto pos = line.find("\"token\":");
    if (pos == std::string::npos) continue;
    auto token = std::stoull(line.substr(pos + 8));
    BOOST_TEST(line.find("\"accepted\":true") != std::string::npos);
    BOOST_TEST(token >= highest);
    highest = token;
    ++writes;
  }
  BOOST_TEST(writes >= 3);
  BOOST_TEST(highest > 1u);  // writes from both leaderships
}

BOOST_AUTO_TEST_CASE(a_partitioned_leaders_job_is_killed_before_the_new_leaders_first_run) {
  temp_dir dir;
  batond_process server(dir.path());
  fault_proxy proxy(server.port());
  std::string job =
      "  - name: long\n    schedule: \"*/1 * * * * *\"\n    command: [\"/bin/sleep\", \"30\"]\n"
      "    grace: 500ms\n";
  auto via_proxy = base_config(server, "2s", job);
  via_proxy.replace(via_proxy.find(server.url()), server.url().size(),
                    "http://127.0.0.1:" + std::to_string(proxy.port()));
  auto cfg_a = write_config(dir, "a.yaml", via_proxy);
  auto cfg_b = write_config(dir, "b.yaml", base_config(server, "2s", job));
  agent_process a(cfg_a, "node-a", dir.path() / "a.log");
  BOOST_REQUIRE(eventually([&] { return a.leader().json.at("is_leader").as_bool(); }));
  BOOST_REQUIRE(
      eventually([&] { return !first_line_time(dir.path() / "a.log", {"event=job_started"}).empty(); }));
  agent_process b(cfg_b, "node-b", dir.path() / "b.log");
  proxy.set_blackhole(true);  // node-a can no longer reach the lock server
  BOOST_REQUIRE(eventually([&] { return b.leader().json.at("is_leader").as_bool(); }));
  BOOST_REQUIRE(
      eventually([&] { return !first_line_time(dir.path() / "b.log", {"event=job_started"}).empty(); }));
  auto a_stopped = first_line_time(dir.path() / "a.log", {"event=job_stopped", "job=long"});
  auto b_started = first_line_time(dir.path() / "b.log", {"event=job_started", "job=long"});
  BOOST_REQUIRE(!a_stopped.empty());
  // Same clock, same format: the old leader's job was gone before the new leader's first run began.
  BOOST_TEST(a_stopped < b_started);
  proxy.set_blackhole(false);
}

// ---- Per-job mode

BOOST_AUTO_TEST_CASE(per_job_mode_counts_slots_missed_while_paused_and_logs_overlap_skips) {
  temp_dir dir;
  batond_process server(dir.path());
  auto cfg = write_config(dir, "agent.yaml",
                          "mode: per-job\n" + base_config(server, "10s",
                                                          "  - name: slow\n    schedule: \"*/1 * * * * *\"\n"
                                                          "    command: [\"/bin/sleep\", \"2.5\"]\n"
                                                          "  - name: tick\n    schedule: \"*/1 * * * * *\"\n"
                                                          "    command: [\"/bin/true\"]\n"));
  agent_process agent(cfg, "solo", dir.path() / "a.log");
  // A slow run is still going when the next slots come due: they are skipped, and each skip says so.
  BOOST_TEST(eventually([&] {
    return !agent.log_lines({"event=job_skipped", "job=slow", "reason=overlap"}).empty();
  }));
  BOOST_TEST(agent.metric("baton_agent_job_slots_skipped_total{job=\"slow\",reason=\"overlap\"}") >= 1);
  // Paused for 3 s: the slots that passed meanwhile are counted as missed, not run one by one.
  BOOST_REQUIRE(eventually([&] { return !agent.log_lines({"event=job_finished", "job=tick "}).empty(); }));
  agent.process().signal(SIGSTOP);
  std::this_thread::sleep_for(3s);
  agent.process().signal(SIGCONT);
  BOOST_TEST(eventually([&] {
    return agent.metric("baton_agent_job_slots_skipped_total{job=\"tick\",reason=\"missed\"}") >= 1;
  }));
  BOOST_TEST(!agent.log_lines({"event=job_skipped", "job=tick", "reason=missed"}).empty());
  agent.process().signal(SIGTERM);
  BOOST_TEST(agent.process().wait(30s) == 0);
}

BOOST_AUTO_TEST_CASE(per_job_mode_logs_a_lost_race_for_a_slot_at_debug_only) {
  temp_dir dir;
  batond_process server(dir.path());
  auto cfg = write_config(
      dir, "agent.yaml",
      "mode: per-job\nlog_level: info\n" + base_config(server, "4s",
                                                       "  - name: tick\n    schedule: \"*/1 * * * * *\"\n"
                                                       "    command: [\"/bin/true\"]\n"));
  auto agents = start_agents(cfg, 2, dir);
  auto runs = [&] {
    std::size_t n = 0;
    for (auto& a : agents)
      n += a->log_lines({"event=job_finished", "job=tick "}).size();
    return n;
  };
  BOOST_REQUIRE(eventually([&] { return runs() >= 4; }));
  // Every slot, every replica but one loses the race for jobs/tick: routine, so not at info.
  for (auto& a : agents)
    BOOST_TEST(a->log_lines({"reason=held"}).empty());
  for (auto& a : agents)
    a->process().signal(SIGTERM);
  for (auto& a : agents)
    BOOST_TEST(a->process().wait(30s) == 0);
}

BOOST_AUTO_TEST_CASE(per_job_mode_runs_a_run_once_slot_that_passed_just_before_start) {
  temp_dir dir;
  batond_process server(dir.path());
  auto out = dir.path() / "runs";
  auto cfg =
      write_config(dir, "agent.yaml",
                   "mode: per-job\n" + base_config(server, "10s",
                                                   "  - name: report\n    schedule: \"*/20 * * * * *\"\n"
                                                   "    misfire: run_once\n    shell: true\n"
                                                   "    command: [\"echo $BATON_SCHEDULED_AT >> " +
                                                       out.string() + "\"]\n"));
  // Start 1-4 s after a slot: well inside the misfire window (TTL + 1 s), long before the next slot.
  const auto expected = wait_until_after_a_slot(20, 1, 4);
  agent_process agent(cfg, "solo", dir.path() / "a.log");
  BOOST_TEST(eventually([&] { return read_file(out).find(expected) != std::string::npos; }, 10s),
             "the slot of " << expected << " was not run; runs: " << read_file(out));
  agent.process().signal(SIGTERM);
  BOOST_TEST(agent.process().wait(30s) == 0);
}

// ---- BATON_RUN_ID

namespace {
// Lines "<run id> <token>" written by the jobs; checks every id is unique and `<token>-<n>`.
void check_run_ids(const std::filesystem::path& file, std::size_t at_least) {
  std::istringstream in(read_file(file));
  std::set<std::string> ids;
  std::size_t lines = 0;
  for (std::string id, token; in >> id >> token; ++lines) {
    BOOST_TEST(ids.insert(id).second, "run id " << id << " used twice");
    BOOST_TEST(id.rfind(token + "-", 0) == 0u, "run id " << id << " under token " << token);
  }
  BOOST_TEST(lines >= at_least);
}
}  // namespace

BOOST_AUTO_TEST_CASE(run_ids_are_unique_across_per_job_replicas) {
  temp_dir dir;
  batond_process server(dir.path());
  auto out = dir.path() / "ids";
  auto cfg =
      write_config(dir, "agent.yaml",
                   "mode: per-job\n" + base_config(server, "4s",
                                                   "  - name: tick\n    schedule: \"*/1 * * * * *\"\n"
                                                   "    shell: true\n    command: [\"echo $BATON_RUN_ID "
                                                   "$BATON_FENCING_TOKEN >> " +
                                                       out.string() + "\"]\n"));
  auto agents = start_agents(cfg, 3, dir);
  BOOST_REQUIRE(eventually([&] {
    std::set<std::string> runners;  // wait until at least two replicas have run slots
    for (std::size_t i = 0; i < agents.size(); ++i)
      if (!agents[i]->log_lines({"event=job_started", "job=tick"}).empty())
        runners.insert(agents[i]->identity());
    return runners.size() >= 2;
  }));
  for (auto& a : agents)
    a->process().signal(SIGTERM);
  for (auto& a : agents)
    BOOST_TEST(a->process().wait(30s) == 0);
  check_run_ids(out, 2);
}

BOOST_AUTO_TEST_CASE(run_ids_are_unique_across_leaderships) {
  temp_dir dir;
  batond_process server(dir.path());
  auto out = dir.path() / "ids";
  auto cfg = write_config(dir, "agent.yaml",
                          base_config(server, "4s",
                                      "  - name: tick\n    schedule: \"*/1 * * * * *\"\n    shell: true\n"
                                      "    command: [\"echo $BATON_RUN_ID $BATON_FENCING_TOKEN >> " +
                                          out.string() + "\"]\n"));
  auto agents = start_agents(cfg, 2, dir);
  int leader = -1;
  BOOST_REQUIRE(eventually([&] { return (leader = leader_of(agents)) >= 0; }));
  BOOST_REQUIRE(eventually([&] {
    return agents[leader]->log_lines({"event=job_finished", "job=tick "}).size() >= 2;
  }));
  agents[leader]->process().signal(
      SIGTERM);  // hands over at once: the standby's runs start from its own token
  BOOST_TEST(agents[leader]->process().wait(30s) == 0);
  const int other = 1 - leader;
  BOOST_REQUIRE(eventually([&] {
    return agents[other]->log_lines({"event=job_finished", "job=tick "}).size() >= 2;
  }));
  agents[other]->process().signal(SIGTERM);
  BOOST_TEST(agents[other]->process().wait(30s) == 0);
  check_run_ids(out, 4);
}

BOOST_AUTO_TEST_CASE(jobs_endpoint_reports_each_jobs_schedule_and_its_last_runs_within_the_limit) {
  temp_dir dir;
  batond_process server(dir.path());
  auto cfg =
      write_config(dir, "agent.yaml",
                   "history_limit: 2\n" +
                       base_config(server, "30s",
                                   "  - name: ok\n    schedule: \"* * * * * *\"\n    command: [/bin/true]\n"
                                   "  - name: bad\n    schedule: \"* * * * * *\"\n    shell: true\n"
                                   "    command: \"exit 3\"\n    history_limit: 1\n"
                                   "  - name: never\n    schedule: \"0 0 1 1 *\"\n"
                                   "    timezone: Europe/Kyiv\n    command: [/bin/true]\n"));
  agent_process leader(cfg, "node-a", dir.path() / "a.log");
  BOOST_REQUIRE(eventually([&] { return leader.leader().json.at("is_leader").as_bool(); }));
  const auto token = leader.leader().json.at("token").to_number<std::uint64_t>();
  agent_process standby(cfg, "node-b", dir.path() / "b.log");
  const auto runs_of = [&](const boost::json::value& jobs, std::size_t i) {
    return jobs.at("jobs").as_array().at(i).at("runs").as_array();
  };
  boost::json::value jobs;
  BOOST_REQUIRE(eventually([&] {
    jobs = leader.get("/v1/jobs").json;
    return runs_of(jobs, 0).size() == 2u && runs_of(jobs, 1).size() == 1u;
  }));
  // Three more seconds: still the limit, newest first.
  std::this_thread::sleep_for(3s);
  const auto reply = leader.get("/v1/jobs");
  BOOST_REQUIRE(reply.status == 200);
  jobs = reply.json;
  const auto& list = jobs.at("jobs").as_array();
  BOOST_REQUIRE(list.size() == 3u);
  BOOST_TEST(list[0].at("name").as_string() == "ok");
  BOOST_TEST(list[0].at("schedule").as_string() == "* * * * * *");
  BOOST_TEST(list[0].at("timezone").as_string() == "UTC");
  BOOST_TEST(list[0].at("history_limit").to_number<int>() == 2);
  BOOST_TEST(list[2].at("timezone").as_string() == "Europe/Kyiv");
  BOOST_TEST(std::string(list[2].at("next_run").as_string()).ends_with("-12-31T22:00:00Z"),
             list[2].at("next_run"));  // 1 January 00:00 in Kyiv (UTC+2)
  const auto ok = runs_of(jobs, 0);
  BOOST_REQUIRE(ok.size() == 2u);
  BOOST_TEST(ok[0].at("started_at").as_string() > ok[1].at("started_at").as_string());
  BOOST_TEST(ok[0].at("slot").as_string() > ok[1].at("slot").as_string());
  for (const auto& r : ok) {
    BOOST_TEST(r.at("outcome").as_string() == "succeeded");
    BOOST_TEST(r.at("status").to_number<int>() == 0);
    BOOST_TEST(r.at("token").to_number<std::uint64_t>() == token);
    BOOST_TEST(r.at("identity").as_string() == "node-a");
    BOOST_TEST(r.at("key").as_string() == "test/leader");
    BOOST_TEST(r.at("trigger").as_string() == "schedule");
    BOOST_TEST(std::string(r.at("run_id").as_string()).starts_with(std::to_string(token) + "-"));
    BOOST_TEST(r.at("duration_ms").to_number<std::int64_t>() >= 0);
  }
  const auto bad = runs_of(jobs, 1);
  BOOST_REQUIRE(bad.size() == 1u);
  BOOST_TEST(bad[0].at("outcome").as_string() == "failed");
  BOOST_TEST(bad[0].at("status").to_number<int>() == 3);
  BOOST_TEST(runs_of(jobs, 2).empty());

  // One job by name; an unknown name is a 404 with a reason; the routes take GET only.
  const auto one = leader.get("/v1/jobs/bad");
  BOOST_TEST(one.status == 200);
  BOOST_TEST(one.json.at("name").as_string() == "bad");
  const auto unknown = leader.get("/v1/jobs/nope");
  BOOST_TEST(unknown.status == 404);
  BOOST_TEST(unknown.json.at("error").as_string() == "unknown_job");
  BOOST_TEST(http_client(leader.port(), 10s).post("/v1/jobs", "").status == 405);

  // Per-job times on every agent: the standby reports each job too, at 0 (no run there).
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  const auto last_success_ok = leader.metric("baton_agent_job_last_success_timestamp_seconds{job=\"ok\"}");
  BOOST_TEST(last_success_ok > now - 30);
  BOOST_TEST(last_success_ok <= now + 1);
  BOOST_TEST(leader.metric("baton_agent_job_last_success_timestamp_seconds{job=\"bad\"}") == 0);
  BOOST_TEST(leader.metric("baton_agent_job_last_run_timestamp_seconds{job=\"bad\"}") > now - 30);
  BOOST_TEST(leader.metric("baton_agent_job_last_run_timestamp_seconds{job=\"never\"}") == 0);
  for (const std::string job : {"ok", "bad", "never"}) {
    BOOST_TEST(standby.metric("baton_agent_job_last_run_timestamp_seconds{job=\"" + job + "\"}") == 0);
    BOOST_TEST(standby.metric("baton_agent_job_last_success_timestamp_seconds{job=\"" + job + "\"}") == 0);
  }
  // Any replica answers for the group (issue 26): the standby shows the leader's runs, read from the
  // group's state, with where they ran.
  const auto seen_by_standby = runs_of(standby.get("/v1/jobs").json, 0);
  BOOST_TEST(!seen_by_standby.empty());
  for (const auto& r : seen_by_standby)
    BOOST_TEST(r.at("identity").as_string() == "node-a");
  // The build and process series, on every agent.
  check_process_metrics(leader.get("/metrics").body, BATON_VERSION);
  check_process_metrics(standby.get("/metrics").body, BATON_VERSION);
  leader.process().signal(SIGTERM);
  BOOST_TEST(leader.process().wait(30s) == 0);
  standby.process().signal(SIGTERM);
  BOOST_TEST(standby.process().wait(30s) == 0);
}

BOOST_AUTO_TEST_CASE(a_manual_run_starts_now_on_the_leader_with_its_token_and_is_refused_elsewhere) {
  temp_dir dir;
  batond_process server(dir.path());
  const auto out = dir.path() / "out";
  auto cfg =
      write_config(dir, "agent.yaml",
                   "resign_token: s3cret-token\n" +
                       base_config(server, "30s",
                                   "  - name: report\n    schedule: \"0 0 1 1 *\"\n    shell: true\n"
                                   "    command: \"echo $BATON_FENCING_TOKEN $BATON_RUN_ID >> " +
                                       out.string() +
                                       "; sleep 2\"\n"
                                       "  - name: parallel\n    schedule: \"0 0 1 1 *\"\n    overlap: allow\n"
                                       "    command: [sleep, \"1\"]\n"));
  auto agents = start_agents(cfg, 2, dir);
  int leader = -1;
  BOOST_REQUIRE(eventually([&] { return (leader = leader_of(agents)) >= 0; }));
  const auto token = agents[leader]->leader().json.at("token").to_number<std::uint64_t>();
  const auto run = [&](int i, const std::string& job, const std::string& auth = "Bearer s3cret-token") {
    http_client c(agents[i]->port(), 10s);
    c.set_authorization(auth);
    return c.post("/v1/jobs/" + job + "/run", "");
  };

  BOOST_TEST(run(leader, "report", "").status == 401);
  BOOST_TEST(run(leader, "report", "Bearer wrong").status == 401);
  BOOST_TEST(run(leader, "nope").status == 404);
  BOOST_TEST(run(leader, "nope").json.at("error").as_string() == "unknown_job");
  // The standby refuses and names the leader.
  const auto refused = run(1 - leader, "report");
  BOOST_TEST(refused.status == 409);
  BOOST_TEST(refused.json.at("error").as_string() == "not_leader");
  BOOST_TEST(refused.json.at("leader_identity").as_string() == agents[leader]->identity());

  // The leader starts it now, with its token; a second request while it runs is refused (overlap: forbid).
  const auto started = run(leader, "report");
  BOOST_REQUIRE(started.status == 202);
  BOOST_TEST(started.json.at("token").to_number<std::uint64_t>() == token);
  const std::string run_id(started.json.at("run_id").as_string());
  BOOST_TEST(run_id.starts_with(std::to_string(token) + "-"));
  const auto again = run(leader, "report");
  BOOST_TEST(again.status == 409);
  BOOST_TEST(again.json.at("error").as_string() == "running");
  BOOST_TEST(eventually([&] { return read_file(out) == std::to_string(token) + " " + run_id + "\n"; }, 10s));
  // overlap: allow runs two at once.
  BOOST_TEST(run(leader, "parallel").status == 202);
  BOOST_TEST(run(leader, "parallel").status == 202);

  // The runs are in the history as manual ones, and in the log.
  BOOST_TEST(eventually(
      [&] {
        const auto job = agents[leader]->get("/v1/jobs/report").json;
        const auto& runs = job.at("runs").as_array();
        return runs.size() == 1u && runs[0].at("trigger").as_string() == "manual" &&
               runs[0].at("outcome").as_string() == "succeeded" && runs[0].at("run_id").as_string() == run_id;
      },
      15s));
  BOOST_TEST(eventually(
      [&] { return agents[leader]->get("/v1/jobs/parallel").json.at("runs").as_array().size() == 2u; }, 10s));
  BOOST_TEST(agents[leader]->log_lines({"event=job_started", "job=report", "trigger=manual"}).size() == 1u);
  // Once it is over, it can run again; `baton-agent run-now` asks the sidecar the file names (or --listen).
  BOOST_TEST(eventually([&] { return run(leader, "report").status == 202; }, 10s));
  const auto cli = [&](int i, const std::string& job) {
    static int n = 0;
    return run_to_end({bin_path("baton-agent"), "run-now", job, "--config", cfg.string(), "--listen",
                       "127.0.0.1:" + std::to_string(agents[i]->port())},
                      (dir.path() / ("run-now-" + std::to_string(++n))).string(), 30s);
  };
  BOOST_TEST(eventually([&] { return agents[leader]->get("/v1/jobs/report").json.at("running") == 0; }, 10s));
  const auto by_cli = cli(leader, "report");
  BOOST_TEST(by_cli.code == 0, by_cli.err);
  BOOST_TEST(by_cli.out.starts_with("started report: run " + std::to_string(token) + "-"), by_cli.out);
  const auto busy = cli(leader, "report");
  BOOST_TEST(busy.code == 1);
  BOOST_TEST(busy.err.find("409 running") != std::string::npos, busy.err);
  const auto standby = cli(1 - leader, "report");
  BOOST_TEST(standby.code == 3);
  BOOST_TEST(standby.err.find("the leader is " + agents[leader]->identity() + " at http://127.0.0.1:" +
                              std::to_string(agents[leader]->port())) != std::string::npos,
             standby.err);
  const auto unknown = cli(leader, "nope");
  BOOST_TEST(unknown.code == 1);
  BOOST_TEST(unknown.err.find("404 unknown_job") != std::string::npos, unknown.err);
  // The file's port 0 names no running agent; a port where none listens is no answer.
  const auto no_port = run_to_end({bin_path("baton-agent"), "run-now", "report", "--config", cfg.string()},
                                  (dir.path() / "run-now-port0").string(), 30s);
  BOOST_TEST(no_port.code == 2);
  BOOST_TEST(no_port.err.find("port 0") != std::string::npos, no_port.err);
  const auto nobody = run_to_end(
      {bin_path("baton-agent"), "run-now", "report", "--config", cfg.string(), "--listen", "127.0.0.1:1"},
      (dir.path() / "run-now-nobody").string(), 30s);
  BOOST_TEST(nobody.code == 1);
  BOOST_TEST(nobody.err.find("cannot ask the agent at 127.0.0.1:1") != std::string::npos, nobody.err);
  for (auto& a : agents) {
    a->process().signal(SIGTERM);
    BOOST_TEST(a->process().wait(30s) == 0);
  }
}

BOOST_AUTO_TEST_CASE(a_manual_run_is_refused_in_per_job_mode) {
  temp_dir dir;
  batond_process server(dir.path());
  auto cfg = write_config(dir, "agent.yaml",
                          "mode: per-job\n" + base_config(server, "5s",
                                                          "  - name: report\n    schedule: \"0 0 1 1 *\"\n"
                                                          "    command: [/bin/true]\n"));
  agent_process agent(cfg, "node-0", dir.path() / "a.log");
  const auto r = http_client(agent.port(), 10s).post("/v1/jobs/report/run", "");
  BOOST_TEST(r.status == 409);
  BOOST_TEST(r.json.at("error").as_string() == "per_job_mode");
  agent.process().signal(SIGTERM);
  BOOST_TEST(agent.process().wait(30s) == 0);
}

BOOST_AUTO_TEST_CASE(a_suspended_job_skips_its_slots_until_resumed_and_a_manual_run_still_runs_it) {
  temp_dir dir;
  batond_process server(dir.path());
  const auto out = dir.path() / "out";
  const auto config = [&](const std::string& more_jobs) {
    return "resign_token: s3cret-token\n" +
           base_config(server, "30s",
                       "  - name: tick\n    schedule: \"* * * * * *\"\n    suspend: true\n    shell: true\n"
                       "    command: \"echo run >> " +
                           out.string() + "\"\n" + more_jobs);
  };
  auto cfg = write_config(dir, "agent.yaml", config(""));
  agent_process agent(cfg, "node-0", dir.path() / "a.log");
  BOOST_REQUIRE(eventually([&] { return agent.leader().json.at("is_leader").as_bool(); }));
  const auto post = [&](const std::string& target, const std::string& auth = "Bearer s3cret-token") {
    http_client c(agent.port(), 10s);
    c.set_authorization(auth);
    return c.post(target, "");
  };
  const auto lines = [&] {
    const auto text = read_file(out);
    return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
  };
  const auto suspended = [&] { return agent.get("/v1/jobs/tick").json.at("suspended").as_bool(); };

  // Suspended by the file: slots are skipped, logged and counted; nothing runs.
  BOOST_REQUIRE(eventually(
      [&] {
        return agent.metric("baton_agent_job_slots_skipped_total{job=\"tick\",reason=\"suspended\"}") >= 2;
      },
      10s));
  BOOST_TEST(lines() == 0u);
  BOOST_TEST(!agent.log_lines({"event=job_skipped", "job=tick", "reason=suspended"}).empty());
  BOOST_TEST(agent.metric("baton_agent_job_suspended{job=\"tick\"}") == 1);
  BOOST_TEST(suspended());

  // A manual run still runs it.
  BOOST_TEST(post("/v1/jobs/tick/run").status == 202);
  BOOST_TEST(eventually([&] { return lines() == 1u; }, 10s));

  // Resume and suspend are authorised; an unknown job is a 404; both are idempotent.
  BOOST_TEST(post("/v1/jobs/tick/resume", "").status == 401);
  BOOST_TEST(post("/v1/jobs/nope/resume").status == 404);
  const auto resumed = post("/v1/jobs/tick/resume");
  BOOST_TEST(resumed.status == 200);
  BOOST_TEST(!resumed.json.at("suspended").as_bool());
  BOOST_TEST(post("/v1/jobs/tick/resume").status == 200);
  BOOST_TEST(eventually([&] { return lines() >= 3u; }, 10s));
  BOOST_TEST(agent.metric("baton_agent_job_suspended{job=\"tick\"}") == 0);

  // A reload that leaves tick's `suspend` alone keeps what the API made of it.
  write_config(dir, "agent.yaml",
               config("  - name: other\n    schedule: \"0 0 1 1 *\"\n    command: [/bin/true]\n"));
  BOOST_TEST(post("/v1/reload").status == 200);
  BOOST_TEST(!suspended());

  BOOST_TEST(post("/v1/jobs/tick/suspend").status == 200);
  BOOST_TEST(suspended());
  // A run that started just before has written its line once none is in flight.
  BOOST_TEST(eventually([&] { return agent.get("/v1/jobs/tick").json.at("running") == 0; }, 10s));
  const auto before = lines();
  std::this_thread::sleep_for(2500ms);  // two and a half slots
  BOOST_TEST(lines() == before);
  BOOST_TEST(agent.log_lines({"event=job_suspended", "job=tick"}).size() == 1u);
  BOOST_TEST(agent.log_lines({"event=job_resumed", "job=tick"}).size() == 2u);
  agent.process().signal(SIGTERM);
  BOOST_TEST(agent.process().wait(30s) == 0);
}

BOOST_AUTO_TEST_CASE(
    a_failed_run_is_retried_with_backoff_each_attempt_recorded_and_never_into_the_next_slot) {
  temp_dir dir;
  batond_process server(dir.path());
  const auto tries = dir.path() / "tries";
  // flaky fails until its third attempt; broken always fails; tight's retry would reach its next slot.
  auto cfg = write_config(
      dir, "agent.yaml",
      "resign_token: s3cret-token\n" +
          base_config(
              server, "30s",
              "  - name: flaky\n    schedule: \"0 0 1 1 *\"\n    retries: 5\n    retry_backoff: 100ms\n"
              "    shell: true\n    command: \"echo $BATON_ATTEMPT $BATON_RUN_ID >> " +
                  tries.string() + "; test $BATON_ATTEMPT -ge 3\"\n" +
                  "  - name: broken\n    schedule: \"0 0 1 1 *\"\n    retries: 1\n"
                  "    retry_backoff: 100ms\n    command: [/bin/false]\n"
                  "  - name: tight\n    schedule: \"* * * * * *\"\n    retries: 3\n"
                  "    retry_backoff: 2s\n    command: [/bin/false]\n"
                  "  - name: patient\n    schedule: \"0 0 1 1 *\"\n    retries: 3\n"
                  "    retry_backoff: 20s\n    command: [/bin/false]\n"));
  agent_process agent(cfg, "node-0", dir.path() / "a.log");
  BOOST_REQUIRE(eventually([&] { return agent.leader().json.at("is_leader").as_bool(); }));
  const auto token = agent.leader().json.at("token").to_number<std::uint64_t>();
  const auto run = [&](const std::string& job) {
    http_client c(agent.port(), 10s);
    c.set_authorization("Bearer s3cret-token");
    return c.post("/v1/jobs/" + job + "/run", "");
  };
  const auto runs = [&](const std::string& job) {
    return agent.get("/v1/jobs/" + job).json.at("runs").as_array();
  };

  // Issue 26, defect 4: every series of every job is there from the start, at zero, so that increase() sees
  // the first failure.
  const auto series = [&](const std::string& family, const std::string& job, const std::string& outcome) {
    return agent.metric(family + "{job=\"" + job + "\",outcome=\"" + outcome + "\"}");
  };
  for (const std::string job : {"flaky", "broken"})
    for (const std::string outcome : {"succeeded", "failed", "timed_out", "lost"}) {
      BOOST_TEST(series("baton_agent_job_runs_total", job, outcome) == 0);
      BOOST_TEST(series("baton_agent_job_slots_total", job, outcome) == 0);
    }
  BOOST_TEST(agent.metric("baton_agent_job_consecutive_failures{job=\"broken\"}") == 0);
  BOOST_TEST(agent.metric("baton_agent_job_next_run_timestamp_seconds{job=\"flaky\"}") > 0);

  BOOST_REQUIRE(run("flaky").status == 202);
  BOOST_REQUIRE(eventually([&] { return runs("flaky").size() == 3u; }, 15s));
  std::this_thread::sleep_for(500ms);  // five backoffs of 100 ms: no fourth attempt follows a success
  const auto flaky = runs("flaky");
  BOOST_REQUIRE(flaky.size() == 3u);
  std::set<std::string> ids;
  for (std::size_t i = 0; i < 3; ++i) {
    const auto& r = flaky[i];
    BOOST_TEST(r.at("attempt").to_number<int>() == static_cast<int>(3 - i));  // newest first
    BOOST_TEST(r.at("outcome").as_string() == (i == 0 ? "succeeded" : "failed"));
    BOOST_TEST(r.at("token").to_number<std::uint64_t>() == token);
    BOOST_TEST(r.at("trigger").as_string() == "manual");
    BOOST_TEST(r.at("slot") == flaky[2].at("slot"));  // one slot, three attempts
    ids.insert(std::string(r.at("run_id").as_string()));
  }
  BOOST_TEST(ids.size() == 3u);
  // The job saw its attempt number and each attempt's own run id.
  std::istringstream lines(read_file(tries));
  std::string line;
  for (int attempt = 1; attempt <= 3; ++attempt) {
    BOOST_REQUIRE(std::getline(lines, line));
    BOOST_TEST(line.starts_with(std::to_string(attempt) + " "), line);
    BOOST_TEST(ids.contains(line.substr(line.find(' ') + 1)), line);
  }
  BOOST_TEST(agent.log_lines({"event=job_retry ", "job=flaky"}).size() == 2u);

  // retries: 1 is two attempts in all.
  BOOST_REQUIRE(run("broken").status == 202);
  BOOST_REQUIRE(eventually([&] { return runs("broken").size() == 2u; }, 15s));
  std::this_thread::sleep_for(500ms);
  BOOST_TEST(runs("broken").size() == 2u);
  BOOST_TEST(agent.metric("baton_agent_job_runs_total{job=\"broken\",outcome=\"failed\"}") == 2);
  // Attempts count each failure; the slot counts once, with its final outcome: flaky's slot succeeded.
  BOOST_TEST(series("baton_agent_job_runs_total", "flaky", "failed") == 2);
  BOOST_TEST(series("baton_agent_job_slots_total", "flaky", "succeeded") == 1);
  BOOST_TEST(series("baton_agent_job_slots_total", "flaky", "failed") == 0);
  BOOST_TEST(series("baton_agent_job_slots_total", "broken", "failed") == 1);
  BOOST_TEST(agent.metric("baton_agent_job_consecutive_failures{job=\"broken\"}") == 1);
  BOOST_TEST(agent.metric("baton_agent_job_consecutive_failures{job=\"flaky\"}") == 0);

  // A retry of at least a second would reach the next slot of a job that fires every second: skipped.
  BOOST_TEST(eventually(
      [&] {
        return !agent.log_lines({"event=job_retry_skipped", "job=tight", "reason=next_slot"}).empty();
      },
      10s));
  for (const auto& r : runs("tight"))
    BOOST_TEST(r.at("attempt").to_number<int>() == 1);
  BOOST_TEST(agent.log_lines({"event=job_retry ", "job=tight"}).empty());

  // A shutdown ends a retry's wait: the agent stops within its shutdown_grace, and the retry never starts.
  BOOST_REQUIRE(run("patient").status == 202);
  BOOST_REQUIRE(eventually(
      [&] {
        return !agent.log_lines({"event=job_retry ", "job=patient"}).empty();
      },
      10s));
  const auto stopping = clock_type::now();
  agent.process().signal(SIGTERM);
  BOOST_TEST(agent.process().wait(30s) == 0);
  BOOST_TEST(std::chrono::duration<double>(clock_type::now() - stopping).count() <
             10.0);  // 1 s grace, 20 s backoff
  BOOST_TEST(agent.log_lines({"event=job_started", "job=patient", "attempt=2"}).empty());
}

BOOST_AUTO_TEST_CASE(per_job_mode_retries_a_failed_run_under_the_slots_lock) {
  temp_dir dir;
  batond_process server(dir.path());
  auto cfg = write_config(
      dir, "agent.yaml",
      "mode: per-job\n" + base_config(server, "5s",
                                      "  - name: flaky\n    schedule: \"*/5 * * * * *\"\n"
                                      "    retries: 1\n    retry_backoff: 100ms\n"
                                      "    shell: true\n    command: \"test $BATON_ATTEMPT = 2\"\n"));
  agent_process agent(cfg, "node-0", dir.path() / "a.log");
  boost::json::array runs;
  BOOST_REQUIRE(eventually(
      [&] {
        runs = agent.get("/v1/jobs/flaky").json.at("runs").as_array();
        return runs.size() >= 2u;
      },
      20s));
  // Newest first: the retry succeeded, under the same lease as the failed first attempt.
  BOOST_TEST(runs[0].at("attempt").to_number<int>() == 2);
  BOOST_TEST(runs[0].at("outcome").as_string() == "succeeded");
  BOOST_TEST(runs[1].at("attempt").to_number<int>() == 1);
  BOOST_TEST(runs[1].at("outcome").as_string() == "failed");
  BOOST_TEST(runs[0].at("key").as_string() == "jobs/flaky");
  BOOST_TEST(runs[0].at("token") == runs[1].at("token"));
  const auto token = std::to_string(runs[0].at("token").to_number<std::uint64_t>());
  BOOST_TEST(runs[1].at("run_id").as_string() == token + "-1");
  BOOST_TEST(runs[0].at("run_id").as_string() == token + "-2");
  agent.process().signal(SIGTERM);
  BOOST_TEST(agent.process().wait(30s) == 0);
}

BOOST_AUTO_TEST_CASE(
    per_job_mode_runs_a_slot_that_passed_within_its_starting_deadline_not_the_default_window) {
  temp_dir dir;
  batond_process server(dir.path());
  const auto out = dir.path() / "deadline", plain = dir.path() / "plain";
  const auto job = [](const std::string& name, const std::string& more, const std::filesystem::path& file) {
    return "  - name: " + name + "\n    schedule: \"*/20 * * * * *\"\n    misfire: run_once\n" + more +
           "    shell: true\n    command: [\"echo $BATON_SCHEDULED_AT >> " + file.string() + "\"]\n";
  };
  // TTL 1 s: the default window is 2 s; `deadline` allows 15 s.
  auto cfg = write_config(
      dir, "agent.yaml",
      "mode: per-job\n" +
          base_config(server, "1s",
                      job("deadline", "    starting_deadline: 15s\n", out) + job("plain", "", plain)));
  // Start 5-10 s after a slot: past the default window, within the deadline, before the next slot.
  const auto expected = wait_until_after_a_slot(20, 5, 10);
  agent_process agent(cfg, "solo", dir.path() / "a.log");
  BOOST_TEST(eventually([&] { return read_file(out).find(expected) != std::string::npos; }, 10s),
             "the slot of " << expected << " was not run; runs: " << read_file(out));
  BOOST_TEST(read_file(plain).find(expected) == std::string::npos, read_file(plain));
  agent.process().signal(SIGTERM);
  BOOST_TEST(agent.process().wait(30s) == 0);
}

BOOST_AUTO_TEST_CASE(jitter_delays_each_scheduled_run_within_its_bound) {
  temp_dir dir;
  batond_process server(dir.path());
  auto cfg = write_config(dir, "agent.yaml",
                          base_config(server, "30s",
                                      "  - name: tick\n    schedule: \"*/2 * * * * *\"\n    jitter: 1500ms\n"
                                      "    command: [/bin/true]\n"));
  agent_process agent(cfg, "node-0", dir.path() / "a.log");
  // started_at - slot, in ms, of each kept run (RFC 3339 with and without milliseconds).
  const auto delays = [&] {
    std::vector<std::int64_t> out;
    const auto job = agent.get("/v1/jobs/tick").json;
    for (const auto& r : job.at("runs").as_array()) {
      const std::string slot(r.at("slot").as_string()), started(r.at("started_at").as_string());
      std::tm a{}, b{};
      ::strptime(slot.c_str(), "%Y-%m-%dT%H:%M:%SZ", &a);
      ::strptime(started.c_str(), "%Y-%m-%dT%H:%M:%S", &b);
      const auto ms = std::stoi(started.substr(started.find('.') + 1, 3));
      out.push_back((::timegm(&b) - ::timegm(&a)) * 1000 + ms);
    }
    return out;
  };
  BOOST_REQUIRE(eventually([&] { return delays().size() >= 6u; }, 30s));
  const auto seen = delays();
  // Each within [0, 1.5 s) after its slot (plus the time to notice the slot and start); not all at once: the
  // chance that six draws all fall below 100 ms is (1/15)^6.
  for (const auto d : seen) {
    BOOST_TEST(d >= 0);
    BOOST_TEST(d < 1500 + 500);
  }
  BOOST_TEST(*std::max_element(seen.begin(), seen.end()) >= 100);
  agent.process().signal(SIGTERM);
  BOOST_TEST(agent.process().wait(30s) == 0);
}

// ---- The group as one cluster (issue 26): state in the election lock's record

namespace {

// The lines `<slot> <token>` the ledger job wrote, by slot: how many runs each slot had.
std::map<std::string, int> ledger_runs(const std::filesystem::path& ledger) {
  std::map<std::string, int> out;
  std::istringstream lines(read_file(ledger));
  for (std::string line; std::getline(lines, line);)
    if (!line.empty()) ++out[line.substr(0, line.find(' '))];
  return out;
}

// The slots of job `job` the logs in `dir` (every agent's, restarts included) counted as missed.
std::uint64_t counted_missed(const temp_dir& dir, const std::string& job) {
  std::uint64_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    if (e.path().extension() != ".log") continue;
    std::istringstream lines(read_file(e.path()));
    for (std::string line; std::getline(lines, line);) {
      if (line.find("event=job_skipped") == std::string::npos ||
          line.find("job=" + job + " ") == std::string::npos ||
          line.find("reason=missed") == std::string::npos)
        continue;
      const auto at = line.find("slots=");
      if (at != std::string::npos) n += std::stoull(line.substr(at + 6));
    }
  }
  return n;
}

std::chrono::sys_seconds parse_slot(const std::string& text) {
  std::tm tm{};
  std::istringstream in(text);
  in >> std::get_time(&tm, "%Y-%m-%dT%H:%M:%SZ");
  return std::chrono::sys_seconds(std::chrono::seconds(::timegm(&tm)));
}

// As BATON_SCHEDULED_AT writes it.
std::string rfc3339_utc(std::chrono::sys_seconds t) {
  const std::time_t c = t.time_since_epoch().count();
  std::tm tm{};
  ::gmtime_r(&c, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// Walks the ledger's slots from its first to its last, `period` apart: each slot that ran must have run once;
// returns how many slots in that span did not run, and how many the span holds.
std::pair<std::uint64_t, std::uint64_t> absent_slots(const std::map<std::string, int>& runs,
                                                     std::chrono::seconds period) {
  std::uint64_t absent = 0, slots = 0;
  const auto first = parse_slot(runs.begin()->first), last = parse_slot(runs.rbegin()->first);
  for (auto t = first; t <= last; t += period, ++slots) {
    const auto it = runs.find(rfc3339_utc(t));
    if (it == runs.end())
      ++absent;
    else
      BOOST_TEST(it->second == 1, "slot " << it->first << " ran " << it->second << " times");
  }
  return {absent, slots};
}

}  // namespace

BOOST_AUTO_TEST_CASE(
    suspension_and_history_are_the_groups_and_a_handed_over_run_once_slot_does_not_run_again) {
  temp_dir dir;
  batond_process server(dir.path());
  const auto ledger = dir.path() / "ledger";
  auto cfg = write_config(
      dir, "agent.yaml",
      "resign_token: s3cret-token\n" +
          base_config(
              server, "3s",
              "  - name: tick\n    schedule: \"* * * * * *\"\n    misfire: run_once\n    shell: true\n"
              "    command: \"echo $BATON_SCHEDULED_AT $BATON_FENCING_TOKEN >> " +
                  ledger.string() +
                  "\"\n"
                  "  - name: other\n    schedule: \"0 0 1 1 *\"\n    command: [/bin/true]\n"));
  auto agents = start_agents(cfg, 2, dir);
  int leader = -1;
  BOOST_REQUIRE(eventually([&] { return (leader = leader_of(agents)) >= 0; }));
  const int follower = 1 - leader;
  const auto post = [&](int i, const std::string& target) {
    http_client c(agents[i]->port(), 10s);
    c.set_authorization("Bearer s3cret-token");
    return c.post(target, "");
  };
  // Suspension is the group's: the leader changes it; a follower names the leader.
  const auto refused = post(follower, "/v1/jobs/other/suspend");
  BOOST_TEST(refused.status == 409, refused.body);
  BOOST_TEST(refused.json.at("error").as_string() == "not_leader");
  BOOST_TEST(refused.json.at("leader_identity").as_string() == agents[leader]->identity());
  BOOST_REQUIRE(post(leader, "/v1/jobs/other/suspend").status == 200);
  // Any replica answers for the group: the follower shows the leader's runs, with where they ran.
  BOOST_REQUIRE(eventually([&] {
    const auto r = agents[follower]->get("/v1/jobs/tick");
    return r.status == 200 && !r.json.at("runs").as_array().empty();
  }));
  const auto seen = agents[follower]->get("/v1/jobs");
  BOOST_TEST(seen.json.at("state_from").at("leader").as_string() == agents[leader]->identity());
  const auto& run = seen.json.at("jobs").as_array()[0].at("runs").as_array()[0];
  BOOST_TEST(run.at("identity").as_string() == agents[leader]->identity());
  BOOST_TEST(agents[follower]->get("/v1/jobs/other").json.at("suspended").as_bool());

  // A resign hands over: the new leader keeps the suspension and runs no slot the old one started.
  BOOST_REQUIRE(post(leader, "/v1/resign").status == 200);
  BOOST_REQUIRE(eventually([&] { return leads_with(agents, follower).has_value(); }));
  BOOST_TEST(eventually([&] {
    return !agents[follower]->log_lines({"event=group_state_loaded", "handover=true"}).empty();
  }));
  BOOST_TEST(agents[follower]->get("/v1/jobs/other").json.at("suspended").as_bool());
  const auto runs_before = ledger_runs(ledger).size();
  BOOST_REQUIRE(eventually([&] { return ledger_runs(ledger).size() >= runs_before + 3; }));
  for (const auto& [slot, n] : ledger_runs(ledger))
    BOOST_TEST(n == 1, "slot " << slot << " ran " << n << " times");
  // Resumed on the new leader: the old one, now a follower, sees it.
  BOOST_REQUIRE(post(follower, "/v1/jobs/other/resume").status == 200);
  BOOST_TEST(!agents[leader]->get("/v1/jobs/other").json.at("suspended").as_bool());
  for (auto& a : agents)
    a->process().signal(SIGTERM);
  for (auto& a : agents)
    BOOST_TEST(a->process().wait(30s) == 0);
}

// The done-when of issue 26: a rolling restart, a SIGSTOP of the leader and a lock server outage, against a
// ledger of every slot of a job firing each second: every slot ran at most once, and every slot that did not
// run is counted as missed by some agent.
BOOST_AUTO_TEST_CASE(every_slot_runs_once_or_is_counted_through_a_restart_a_frozen_leader_and_an_outage) {
  temp_dir dir;
  batond_process server(dir.path());
  const auto ledger = dir.path() / "ledger";
  auto cfg = write_config(dir, "agent.yaml",
                          base_config(server, "2s",
                                      "  - name: tick\n    schedule: \"* * * * * *\"\n    shell: true\n"
                                      "    command: \"echo $BATON_SCHEDULED_AT $BATON_FENCING_TOKEN >> " +
                                          ledger.string() + "\"\n"));
  auto agents = start_agents(cfg, 3, dir);
  int leader = -1;
  const auto await_leader = [&] {
    BOOST_REQUIRE(eventually([&] { return (leader = leader_of(agents)) >= 0; }));
  };
  const auto await_runs = [&](std::size_t more) {
    const auto before = ledger_runs(ledger).size();
    BOOST_REQUIRE(eventually([&] { return ledger_runs(ledger).size() >= before + more; }));
  };
  await_leader();
  await_runs(3);

  // A rolling restart: SIGTERM the leader, start it again.
  agents[leader]->process().signal(SIGTERM);
  BOOST_REQUIRE(agents[leader]->process().wait(30s) == 0);
  const auto restarted = "node-" + std::to_string(leader);
  agents[leader] = std::make_unique<agent_process>(cfg, restarted, dir.path() / ("r" + restarted + ".log"));
  await_leader();
  await_runs(3);

  // The leader frozen past its TTL (its jobs' guards stop them at the deadline): another leads, then it
  // wakes.
  const int frozen = leader;
  agents[frozen]->process().signal(SIGSTOP);
  BOOST_REQUIRE(eventually([&] {
    for (std::size_t i = 0; i < agents.size(); ++i)
      if (static_cast<int>(i) != frozen && leads_with(agents, i)) return true;
    return false;
  }));
  await_runs(2);
  agents[frozen]->process().signal(SIGCONT);
  await_leader();
  await_runs(2);

  // The lock server stopped for 4 s (two TTLs): the leader loses its lease; someone leads again after.
  server.process().signal(SIGSTOP);
  std::this_thread::sleep_for(4s);
  server.process().signal(SIGCONT);
  await_leader();
  await_runs(3);
  for (auto& a : agents)
    a->process().signal(SIGTERM);
  for (auto& a : agents)
    BOOST_TEST(a->process().wait(30s) == 0);

  const auto runs = ledger_runs(ledger);
  BOOST_REQUIRE(!runs.empty());
  const auto [absent, slots] = absent_slots(runs, 1s);
  const auto counted = counted_missed(dir, "tick");
  BOOST_TEST_MESSAGE("slots " << slots << ", absent " << absent << ", counted missed " << counted);
  BOOST_TEST(counted >= absent, "slots that neither ran nor were counted: " << absent - counted);
}

// Issue 26, defect 5: in per-job mode a replica killed with SIGKILL while it runs a slot leaves the job's
// lock held for its TTL. The slots that pass meanwhile cannot run; the replica that runs the job next counts
// them (from the job's record), at warn; and no slot runs twice.
BOOST_AUTO_TEST_CASE(per_job_mode_counts_the_slots_a_killed_replicas_lock_kept_from_running) {
  temp_dir dir;
  batond_process server(dir.path());
  const auto ledger = dir.path() / "ledger";
  auto cfg = write_config(
      dir, "agent.yaml",
      "mode: per-job\n" + base_config(server, "6s",
                                      "  - name: tick\n    schedule: \"*/2 * * * * *\"\n    shell: true\n"
                                      "    command: \"echo $BATON_SCHEDULED_AT $BATON_FENCING_TOKEN >> " +
                                          ledger.string() + "; sleep 1\"\n"));
  auto agents = start_agents(cfg, 2, dir);
  BOOST_REQUIRE(eventually([&] { return ledger_runs(ledger).size() >= 3; }));
  // Kill whichever replica runs the next slot, while it runs.
  int victim = -1;
  BOOST_REQUIRE(eventually(
      [&] {
        for (std::size_t i = 0; i < agents.size(); ++i)
          if (agents[i]->metric("baton_agent_job_running{job=\"tick\"}") > 0 &&
              !agents[i]->log_lines({"event=job_started", "job=tick"}).empty() &&
              agents[i]->log_lines({"event=job_started", "job=tick"}).size() >
                  agents[i]->log_lines({"event=job_finished", "job=tick"}).size()) {
            victim = static_cast<int>(i);
            return true;
          }
        return false;
      },
      20s));
  agents[victim]->process().signal(SIGKILL);
  agents[victim]->process().wait(10s);
  // The survivor runs the job again once the dead replica's lease has expired, and counts what it missed.
  const int survivor = 1 - victim;
  BOOST_TEST(
      eventually(
          [&] {
            return !agents[survivor]
                        ->log_lines({"event=job_skipped", "job=tick", "reason=missed", "while=no_replica"})
                        .empty();
          },
          30s),
      agents[survivor]->log());
  const auto before = ledger_runs(ledger).size();
  BOOST_REQUIRE(eventually([&] { return ledger_runs(ledger).size() >= before + 2; }, 20s));
  agents[survivor]->process().signal(SIGTERM);
  BOOST_TEST(agents[survivor]->process().wait(30s) == 0);

  const auto runs = ledger_runs(ledger);
  const auto [absent, slots] = absent_slots(runs, 2s);
  BOOST_TEST_MESSAGE("slots " << slots << ", absent " << absent);
  BOOST_TEST(absent >= 1u);
  BOOST_TEST(counted_missed(dir, "tick") >= absent);
}
