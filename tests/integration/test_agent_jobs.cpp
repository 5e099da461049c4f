// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE agent_jobs
#include <boost/test/unit_test.hpp>

// The job settings and operations of baton-agent against real agents and batond: overlap: replace, the
// attempt an HTTP job is told, a jitter delay cut short by a lost lease, a reloaded grace, suspend and resume
// in per-job mode, starting_deadline in leader mode, and a reloaded election section while campaigning.

#include "agent_fixture.hpp"
#include "eventually.hpp"
#include "test_pki.hpp"
#include "tls_stub_server.hpp"

#include <boost/json/serialize.hpp>

#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <sstream>
#include <thread>

using namespace baton::test;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

namespace {

// A loopback listener the test controls, for HTTP jobs.
struct listener {
  int fd = -1;
  unsigned short port = 0;
  listener() {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    BOOST_REQUIRE(fd >= 0);
    sockaddr_in at{};
    at.sin_family = AF_INET;
    at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    BOOST_REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&at), sizeof at) == 0);
    BOOST_REQUIRE(::listen(fd, 64) == 0);
    socklen_t len = sizeof at;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&at), &len);
    port = ntohs(at.sin_port);
  }
  ~listener() { ::close(fd); }
  std::string url(const std::string& path) const { return "http://127.0.0.1:" + std::to_string(port) + path; }
};

// An HTTP server on a thread that keeps each request's head and answers the n-th request (1-based) with
// status(n), and the header lines `extra_headers` (each ending in CRLF).
class recording_server {
 public:
  explicit recording_server(std::function<int(int)> status, std::string extra_headers = {})
      : status_(std::move(status)), extra_headers_(std::move(extra_headers)) {
    thread_ = std::thread([this] { serve(); });
  }
  ~recording_server() {
    done_ = true;
    thread_.join();
  }
  std::string url(const std::string& path) const { return socket_.url(path); }
  std::vector<std::string> requests() const {
    std::lock_guard lk(mu_);
    return requests_;
  }

 private:
  void serve() {
    while (!done_) {
      pollfd p{socket_.fd, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      const int c = ::accept4(socket_.fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      std::string head;
      char buf[4096];
      while (head.find("\r\n\r\n") == std::string::npos) {
        pollfd q{c, POLLIN, 0};
        if (::poll(&q, 1, 5000) <= 0) break;
        const auto n = ::read(c, buf, sizeof buf);
        if (n <= 0) break;
        head.append(buf, static_cast<std::size_t>(n));
      }
      int n;
      {
        std::lock_guard lk(mu_);
        requests_.push_back(head);
        n = static_cast<int>(requests_.size());
      }
      const auto answer = "HTTP/1.1 " + std::to_string(status_(n)) + " X\r\n" + extra_headers_ +
                          "Content-Length: 2\r\nConnection: close\r\n\r\nok";
      [[maybe_unused]] auto w = ::write(c, answer.data(), answer.size());
      ::close(c);
    }
  }

  listener socket_;
  std::function<int(int)> status_;
  std::string extra_headers_;
  mutable std::mutex mu_;
  std::vector<std::string> requests_;
  std::atomic<bool> done_{false};
  std::thread thread_;
};

// The value of header `name` in a request head ("" when absent).
std::string header(const std::string& head, const std::string& name) {
  std::istringstream in(head);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.size() > name.size() + 1 && strncasecmp(line.c_str(), name.c_str(), name.size()) == 0 &&
        line[name.size()] == ':')
      return line.substr(line.find_first_not_of(' ', name.size() + 1));
  }
  return {};
}

boost::json::array runs_of(const agent_process& a, const std::string& job) {
  const auto r = a.get("/v1/jobs/" + job);
  if (r.status != 200) return {};
  return r.json.at("runs").as_array();
}

std::size_t count_lines(const std::string& text, const std::string& part) {
  std::size_t n = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    n += line.find(part) != std::string::npos;
  return n;
}

// A job's `shell` and `command` that write "start" to `file`, run until SIGTERM, and then write "term".
std::string polite_command(const std::filesystem::path& file) {
  return "    shell: true\n    command: \"echo start >> " + file.string() + "; trap 'echo term >> " +
         file.string() + "; exit 143' TERM; sleep 1000 & wait\"\n";
}

// `file` holds the lines "start" and "term" that runs of a job write when they start and when SIGTERM ends
// them: a run that began before the previous one was over shows as two starts without a term between.
void check_each_start_follows_a_term(const std::filesystem::path& file) {
  std::istringstream lines(read_file(file));
  std::string previous;
  for (std::string line; std::getline(lines, line);) {
    if (line != "start" && line != "term") continue;
    if (line == "start") BOOST_TEST((previous.empty() || previous == "term"), "two starts without a term");
    previous = line;
  }
}

void stop(agent_process& a) {
  a.process().signal(SIGTERM);
  BOOST_TEST(a.process().wait(60s) == 0);
}

}  // namespace

// ---- overlap: replace

BOOST_AUTO_TEST_CASE(overlap_replace_stops_the_run_going_records_it_as_replaced_and_then_starts_the_new_one) {
  temp_dir dir;
  batond_process server(dir.path());
  listener silent;  // never accepts: an HTTP run hangs until it is stopped
  const auto out = dir.path() / "out", pid = dir.path() / "pid";
  // `polite` ends on SIGTERM; `stubborn` ignores it and is killed after its grace; `hanging` waits for an
  // answer that never comes. Each new run of stubborn says whether the previous one is still alive.
  const std::string every = "    schedule: \"*/4 * * * * *\"\n    overlap: replace\n";
  auto cfg = write_config(
      dir, "agent.yaml",
      base_config(server, "30s",
                  "  - name: polite\n" + every + polite_command(out) + "  - name: stubborn\n" + every +
                      "    grace: 500ms\n    shell: true\n    command: \"if [ -s " + pid.string() +
                      " ] && kill -0 $(cat " + pid.string() + ") 2>/dev/null; then echo overlap >> " +
                      out.string() + "; fi; echo $$ > " + pid.string() +
                      "; trap '' TERM; sleep 1000\"\n"
                      "  - name: hanging\n" +
                      every + "    http: {url: \"" + silent.url("/report") + "\"}\n"));
  agent_process agent(cfg, "node-0", dir.path() / "a.log");
  BOOST_REQUIRE(eventually([&] { return agent.leader().json.at("is_leader").as_bool(); }));
  const auto replaced = [&](const std::string& job) {
    boost::json::array out;
    for (const auto& r : runs_of(agent, job))
      if (r.at("outcome").as_string() == "replaced") out.push_back(r);
    return out;
  };
  BOOST_REQUIRE(eventually(
      [&] {
        return replaced("polite").size() >= 2u && replaced("stubborn").size() >= 2u &&
               !replaced("hanging").empty();
      },
      40s));
  // The run replaced is in the history with the reason, and the status it ended with.
  const auto polite = replaced("polite").at(0);
  BOOST_TEST(polite.at("status").to_number<int>() == 143);
  const std::string detail(polite.at("detail").as_string());
  BOOST_TEST(detail.starts_with("replaced by the run for slot "), detail);
  // Its slot is 4 s before the one that replaced it.
  const std::string slot(polite.at("slot").as_string());
  BOOST_TEST(slot < detail.substr(detail.rfind(' ') + 1), detail);
  const auto stubborn = replaced("stubborn").at(0);
  BOOST_TEST(stubborn.at("status").to_number<int>() == 128 + SIGKILL);
  BOOST_TEST(!agent.log_lines({"event=job_killed", "job=stubborn", "grace_ms=500"}).empty());
  const std::string http_detail(replaced("hanging").at(0).at("detail").as_string());
  BOOST_TEST(http_detail.starts_with("replaced by the run for slot "), http_detail);
  // The new run started only once the old one was gone: each polite start follows the previous one's term,
  // and no stubborn run found its predecessor alive.
  check_each_start_follows_a_term(out);
  BOOST_TEST(read_file(out).find("overlap") == std::string::npos);
  BOOST_TEST(agent.metric("baton_agent_job_runs_total{job=\"polite\",outcome=\"replaced\"}") >= 2);
  BOOST_TEST(!agent.log_lines({"event=job_stopped", "job=polite", "outcome=replaced"}).empty());
  BOOST_TEST(agent.metric("baton_agent_job_slots_skipped_total{job=\"polite\",reason=\"overlap\"}") == 0);
  stop(agent);
}

BOOST_AUTO_TEST_CASE(a_manual_run_of_a_replace_job_replaces_the_run_going) {
  temp_dir dir;
  batond_process server(dir.path());
  const auto out = dir.path() / "out";
  auto cfg =
      write_config(dir, "agent.yaml",
                   base_config(server, "30s",
                               "  - name: polite\n    schedule: \"0 0 1 1 *\"\n    overlap: replace\n" +
                                   polite_command(out)));
  agent_process agent(cfg, "node-0", dir.path() / "a.log");
  BOOST_REQUIRE(eventually([&] { return agent.leader().json.at("is_leader").as_bool(); }));
  const auto run = [&] { return http_client(agent.port(), 10s).post("/v1/jobs/polite/run", ""); };
  const auto first = run();
  BOOST_REQUIRE(first.status == 202);
  BOOST_REQUIRE(eventually([&] { return read_file(out) == "start\n"; }, 10s));
  // A second request is not refused (as with forbid): it stops the first run and starts once it is gone.
  const auto second = run();
  BOOST_REQUIRE(second.status == 202);
  BOOST_REQUIRE(eventually([&] { return read_file(out) == "start\nterm\nstart\n"; }, 15s));
  const auto runs = runs_of(agent, "polite");
  BOOST_REQUIRE(runs.size() == 1u);
  BOOST_TEST(runs[0].at("run_id") == first.json.at("run_id"));
  BOOST_TEST(runs[0].at("outcome").as_string() == "replaced");
  BOOST_TEST(runs[0].at("trigger").as_string() == "manual");
  BOOST_TEST(runs[0].at("detail").as_string() ==
             "replaced by the run for slot " + std::string(second.json.at("slot").as_string()));
  BOOST_TEST(agent.get("/v1/jobs/polite").json.at("running") == 1);
  stop(agent);
}

BOOST_AUTO_TEST_CASE(per_job_mode_overlap_replace_takes_the_slots_lock_once_the_replaced_run_released_it) {
  temp_dir dir;
  batond_process server(dir.path());
  const auto out = dir.path() / "out";
  auto cfg =
      write_config(dir, "agent.yaml",
                   "mode: per-job\n" + base_config(server, "10s",
                                                   "  - name: polite\n    schedule: \"*/4 * * * * *\"\n"
                                                   "    overlap: replace\n" +
                                                       polite_command(out)));
  agent_process agent(cfg, "node-0", dir.path() / "a.log");
  boost::json::array runs;
  BOOST_REQUIRE(eventually(
      [&] {
        runs = runs_of(agent, "polite");
        return runs.size() >= 2u;
      },
      40s));
  // Each replaced run held jobs/polite under its own lease; the run that replaced it took a new one.
  const auto& older = runs.at(runs.size() - 1);
  BOOST_TEST(older.at("outcome").as_string() == "replaced");
  BOOST_TEST(older.at("key").as_string() == "jobs/polite");
  BOOST_TEST(std::string(older.at("detail").as_string()).starts_with("replaced by the run for slot "));
  BOOST_TEST(runs.at(runs.size() - 2).at("token") != older.at("token"));
  check_each_start_follows_a_term(out);
  BOOST_TEST(
      !agent.log_lines({"event=job_stopped", "job=polite", "key=jobs/polite", "outcome=replaced"}).empty());
  stop(agent);
}

// ---- leader jobs and per-job jobs in one agent

BOOST_AUTO_TEST_CASE(leader_jobs_and_per_job_jobs_run_side_by_side_in_one_agent) {
  // The file's mode is per-job, so `each` takes jobs/each for every run on whichever replica wins it; `lead`
  // says `mode: leader`, so the replicas elect a leader for it and only the leader runs it, with the
  // election's token.
  temp_dir dir;
  batond_process server(dir.path());
  const auto lead_out = dir.path() / "lead", each_out = dir.path() / "each";
  const auto job = [](const std::string& name, const std::string& more, const std::filesystem::path& file) {
    return "  - name: " + name + "\n    schedule: \"* * * * * *\"\n" + more +
           "    shell: true\n    command: \"echo $BATON_IDENTITY $BATON_LOCK_KEY $BATON_FENCING_TOKEN >> " +
           file.string() + "\"\n";
  };
  auto cfg = write_config(
      dir, "agent.yaml",
      "mode: per-job\n" +
          base_config(server, "4s", job("each", "", each_out) + job("lead", "    mode: leader\n", lead_out)));
  auto agents = start_agents(cfg, 2, dir);
  BOOST_REQUIRE(eventually(
      [&] {
        return count_lines(read_file(lead_out), "node-") >= 3 &&
               count_lines(read_file(each_out), "node-") >= 3;
      },
      30s));
  int leader = -1;
  for (int i = 0; i < 2; ++i)
    if (agents[i]->leader().json.at("is_leader").as_bool()) leader = i;
  BOOST_REQUIRE(leader >= 0);
  const std::string leader_id = "node-" + std::to_string(leader);
  const auto token = agents[leader]->leader().json.at("token");
  std::istringstream lead_lines(read_file(lead_out));
  for (std::string line; std::getline(lead_lines, line);)
    BOOST_TEST(line == leader_id + " test/leader " + boost::json::serialize(token));
  std::istringstream each_lines(read_file(each_out));
  for (std::string line; std::getline(each_lines, line);)
    BOOST_TEST(line.find(" jobs/each ") != std::string::npos, line);

  // A manual run is for leader jobs; a per-job job is refused on every agent.
  const auto run_now = [&](int i, const std::string& name) {
    return http_client(agents[i]->port(), 10s).post("/v1/jobs/" + name + "/run", "");
  };
  BOOST_TEST(run_now(leader, "lead").status == 202);
  BOOST_TEST(run_now(leader, "each").status == 409);
  BOOST_TEST(run_now(leader, "each").json.at("error").as_string() == "per_job_mode");
  BOOST_TEST(run_now(1 - leader, "lead").status == 409);  // not_leader
  for (auto& a : agents)
    stop(*a);
}

// ---- HTTP jobs

BOOST_AUTO_TEST_CASE(an_http_job_is_told_its_attempt_and_run_id_in_headers) {
  temp_dir dir;
  batond_process server(dir.path());
  recording_server target([](int n) { return n == 1 ? 503 : 200; });  // the first attempt fails
  auto cfg = write_config(dir, "agent.yaml",
                          base_config(server, "30s",
                                      "  - name: report\n    schedule: \"0 0 1 1 *\"\n    retries: 2\n"
                                      "    retry_backoff: 100ms\n    http: {url: \"" +
                                          target.url("/report") + "\"}\n"));
  agent_process agent(cfg, "node-0", dir.path() / "a.log");
  BOOST_REQUIRE(eventually([&] { return agent.leader().json.at("is_leader").as_bool(); }));
  BOOST_REQUIRE(http_client(agent.port(), 10s).post("/v1/jobs/report/run", "").status == 202);
  BOOST_REQUIRE(eventually([&] { return runs_of(agent, "report").size() == 2u; }, 20s));
  const auto runs = runs_of(agent, "report");  // newest first
  BOOST_TEST(runs[0].at("outcome").as_string() == "succeeded");
  const auto requests = target.requests();
  BOOST_REQUIRE(requests.size() == 2u);
  for (int i = 0; i < 2; ++i) {
    BOOST_TEST(header(requests[i], "Baton-Attempt") == std::to_string(i + 1), requests[i]);
    BOOST_TEST(header(requests[i], "Baton-Run-Id") == std::string(runs[1 - i].at("run_id").as_string()),
               requests[i]);
    BOOST_TEST(header(requests[i], "Fencing-Token") ==
               std::to_string(runs[0].at("token").to_number<std::uint64_t>()));
  }
  stop(agent);
}

BOOST_AUTO_TEST_CASE(an_https_job_verifies_the_server_against_its_ca_file_and_a_redirect_is_its_result) {
  const auto& pki = test_pki::shared();
  temp_dir dir;
  batond_process server(dir.path());
  // Answers every request 500 once the handshake is done, and records it.
  tls_stub_server https(pki.server_cert(), pki.server_key());
  const auto https_url = "https://127.0.0.1:" + std::to_string(https.port()) + "/report";
  recording_server moved([](int) { return 302; }, "Location: https://elsewhere.example/report\r\n");
  const std::string once = "    schedule: \"0 0 1 1 *\"\n";
  auto cfg = write_config(dir, "agent.yaml",
                          base_config(server, "30s",
                                      "  - name: trusted\n" + once + "    http: {url: \"" + https_url +
                                          "\", ca_file: \"" + pki.ca() + "\"}\n  - name: untrusted\n" + once +
                                          "    http: {url: \"" + https_url + "\"}\n  - name: moved\n" + once +
                                          "    http: {url: \"" + moved.url("/report") + "\"}\n"));
  agent_process agent(cfg, "node-0", dir.path() / "a.log");
  BOOST_REQUIRE(eventually([&] { return agent.leader().json.at("is_leader").as_bool(); }));
  const auto run = [&](const std::string& job) {
    BOOST_REQUIRE(http_client(agent.port(), 10s).post("/v1/jobs/" + job + "/run", "").status == 202);
    BOOST_REQUIRE(eventually([&] { return runs_of(agent, job).size() == 1u; }, 20s));
    return runs_of(agent, job)[0].as_object();
  };

  // The system store does not know the test CA: no request reaches the server.
  const auto untrusted = run("untrusted");
  BOOST_TEST(untrusted.at("outcome").as_string() == "failed");
  BOOST_TEST(std::string(untrusted.at("detail").as_string()).find("is not trusted") != std::string::npos,
             untrusted.at("detail").as_string());
  BOOST_TEST(https.received().empty());

  const auto trusted = run("trusted");
  BOOST_TEST(trusted.at("outcome").as_string() == "failed");  // the stub's 500, over TLS
  BOOST_TEST(https.received().rfind("POST /report HTTP/1.1\r\n", 0) == 0u, https.received());
  BOOST_TEST(header(https.received(), "Fencing-Token") ==
             std::to_string(trusted.at("token").to_number<std::uint64_t>()));

  // A 302 is the run's answer: failed, with where it pointed; nothing follows it.
  const auto redirected = run("moved");
  BOOST_TEST(redirected.at("outcome").as_string() == "failed");
  BOOST_TEST(redirected.at("detail").as_string() ==
             "redirect to https://elsewhere.example/report not followed");
  BOOST_TEST(moved.requests().size() == 1u);
  BOOST_TEST(
      read_file(dir.path() / "a.log").find("redirect to https://elsewhere.example/report not followed") !=
      std::string::npos);
  stop(agent);
}

// ---- Leadership ending around a run

BOOST_AUTO_TEST_CASE(a_run_still_in_its_jitter_delay_when_the_lease_is_lost_never_starts) {
  temp_dir dir;
  batond_process server(dir.path());
  const auto out = dir.path() / "out";
  auto cfg = write_config(dir, "agent.yaml",
                          base_config(server, "1s",
                                      "  - name: tick\n    schedule: \"*/20 * * * * *\"\n    jitter: 19s\n"
                                      "    shell: true\n    command: \"echo $BATON_SCHEDULED_AT >> " +
                                          out.string() + "\"\n"));
  agent_process agent(cfg, "node-0", dir.path() / "a.log");
  // The delay is drawn at random: a slot whose run is seen waiting (counted as running, not started) when
  // the lock server is frozen is the case. A short draw (about one in eight) starts first, and the slot just
  // after an election has no run; then the next slot is tried.
  std::string dropped, tried;
  for (int attempt = 0; attempt < 5 && dropped.empty(); ++attempt) {
    BOOST_REQUIRE(eventually([&] { return agent.leader().json.at("is_leader").as_bool(); }, 30s));
    auto slot = wait_until_after_a_slot(20, 0, 0);
    while (slot == tried) {  // the second of the slot tried last is not over yet
      std::this_thread::sleep_for(200ms);
      slot = wait_until_after_a_slot(20, 0, 0);
    }
    tried = slot;
    std::this_thread::sleep_for(300ms);
    const auto running = agent.get("/v1/jobs/tick").json.at("running");
    if (running != 1 || !agent.log_lines({"event=job_started", "slot=" + slot}).empty()) {
      BOOST_TEST_MESSAGE("slot " << slot << ": running " << running << ", already started: not in its delay");
      continue;
    }
    const auto lost_before = agent.log_lines({"event=lost"}).size();
    server.process().signal(SIGSTOP);
    const bool lost = eventually([&] { return agent.log_lines({"event=lost"}).size() > lost_before; }, 15s);
    server.process().signal(SIGCONT);
    BOOST_REQUIRE(lost);
    BOOST_REQUIRE(eventually([&] { return agent.get("/v1/jobs/tick").json.at("running") == 0; }, 10s));
    if (!agent.log_lines({"event=job_skipped", "slot=" + slot, "reason=stopped"}).empty())
      dropped = slot;
    else
      BOOST_TEST_MESSAGE("slot " << slot << ": its delay ended before the loss was noticed");
  }
  BOOST_REQUIRE_MESSAGE(!dropped.empty(), "no run was caught in its delay");
  // Wait past the longest delay: the dropped run never started, ran or entered the history.
  std::this_thread::sleep_for(2s);
  BOOST_TEST(agent.log_lines({"event=job_started", "slot=" + dropped}).empty());
  BOOST_TEST(read_file(out).find(dropped) == std::string::npos, read_file(out));
  for (const auto& r : runs_of(agent, "tick"))
    BOOST_TEST(r.at("slot").as_string() != dropped);
  stop(agent);
}

BOOST_AUTO_TEST_CASE(a_grace_changed_by_sighup_is_the_one_used_at_the_next_lease_loss) {
  temp_dir dir;
  batond_process server(dir.path());
  const auto pid = dir.path() / "pid";
  // The job ignores SIGTERM: it ends only by SIGKILL, after its grace.
  const auto config = [&](const std::string& grace) {
    // A safety margin of 1 s: a lost lease leaves 500 ms before SIGKILL must come, room for the 300 ms grace
    // (a longer one is cut at 500 ms, and the agent's guard kills then too).
    return base_config(server, "2s\n  safety_margin: 1s",
                       "  - name: stubborn\n    schedule: \"0 0 1 1 *\"\n    grace: " + grace +
                           "\n    shell: true\n    command: \"echo $$ > " + pid.string() +
                           "; trap '' TERM; sleep 1000\"\n");
  };
  auto cfg = write_config(dir, "agent.yaml", config("1h"));
  agent_process agent(cfg, "node-0", dir.path() / "a.log");
  BOOST_REQUIRE(eventually([&] { return agent.leader().json.at("is_leader").as_bool(); }));
  write_config(dir, "agent.yaml", config("300ms"));
  agent.process().signal(SIGHUP);
  BOOST_REQUIRE(eventually(
      [&] {
        return !agent.log_lines({"event=config_reload", "jobs=~stubborn", "applied=true"}).empty();
      },
      10s));
  BOOST_REQUIRE(http_client(agent.port(), 10s).post("/v1/jobs/stubborn/run", "").status == 202);
  BOOST_REQUIRE(eventually([&] { return !read_file(pid).empty(); }, 10s));
  const int shell = std::stoi(read_file(pid));
  server.process().signal(SIGSTOP);
  const auto frozen = clock_type::now();
  // With the hour's grace, SIGKILL would come when the lost lease's time runs out (`grace_ms=3600000`); with
  // 300 ms, 300 ms after the loss.
  const bool killed = eventually(
      [&] {
        return !agent.log_lines({"event=job_killed", "job=stubborn", "grace_ms=300"}).empty();
      },
      20s);
  const auto took = clock_type::now() - frozen;
  server.process().signal(SIGCONT);
  BOOST_REQUIRE(killed);
  BOOST_TEST(std::chrono::duration<double>(took).count() < 15.0);
  BOOST_TEST(eventually([&] { return live_processes_in_group(shell).empty(); }, 10s));
  BOOST_TEST(!agent.log_lines({"event=lost"}).empty());
  stop(agent);
}

// ---- Suspend and resume in per-job mode

BOOST_AUTO_TEST_CASE(per_job_mode_a_job_suspended_on_one_replica_runs_on_the_others_until_suspended_on_all) {
  temp_dir dir;
  batond_process server(dir.path());
  const auto out = dir.path() / "out";
  auto cfg = write_config(
      dir, "agent.yaml",
      "mode: per-job\n" + base_config(server, "4s",
                                      "  - name: tick\n    schedule: \"* * * * * *\"\n    shell: true\n"
                                      "    command: \"echo $BATON_IDENTITY >> " +
                                          out.string() + "\"\n"));
  auto agents = start_agents(cfg, 2, dir);
  const auto runs_by = [&](int i) { return count_lines(read_file(out), "node-" + std::to_string(i)); };
  const auto post = [&](int i, const std::string& what) {
    return http_client(agents[i]->port(), 10s).post("/v1/jobs/tick/" + what, "");
  };
  const auto idle = [&](int i) {
    return eventually([&] { return agents[i]->get("/v1/jobs/tick").json.at("running") == 0; }, 10s);
  };
  BOOST_REQUIRE(eventually([&] { return runs_by(0) + runs_by(1) >= 2; }, 30s));

  // Suspended on node-0 only: node-0 skips every slot, node-1 takes them all.
  BOOST_REQUIRE(post(0, "suspend").status == 200);
  BOOST_REQUIRE(idle(0));
  const auto before0 = runs_by(0), before1 = runs_by(1);
  std::this_thread::sleep_for(4s);
  BOOST_TEST(runs_by(0) == before0);
  BOOST_TEST(runs_by(1) >= before1 + 2);
  BOOST_TEST(!agents[0]->log_lines({"event=job_skipped", "job=tick", "reason=suspended"}).empty());
  BOOST_TEST(agents[1]->log_lines({"reason=suspended"}).empty());
  BOOST_TEST(agents[0]->metric("baton_agent_job_suspended{job=\"tick\"}") == 1);
  BOOST_TEST(agents[1]->metric("baton_agent_job_suspended{job=\"tick\"}") == 0);

  // Resumed: node-0 takes part again and wins some slots.
  BOOST_REQUIRE(post(0, "resume").status == 200);
  BOOST_TEST(eventually([&] { return runs_by(0) > before0; }, 40s));

  // Suspended on both: nobody runs it.
  BOOST_REQUIRE(post(0, "suspend").status == 200);
  BOOST_REQUIRE(post(1, "suspend").status == 200);
  BOOST_REQUIRE(idle(0));
  BOOST_REQUIRE(idle(1));
  const auto total = runs_by(0) + runs_by(1);
  std::this_thread::sleep_for(4s);
  BOOST_TEST(runs_by(0) + runs_by(1) == total);
  for (auto& a : agents)
    stop(*a);
}

// ---- starting_deadline in leader mode

BOOST_AUTO_TEST_CASE(
    a_new_leader_runs_a_slot_that_passed_within_its_starting_deadline_not_the_default_window) {
  temp_dir dir;
  batond_process server(dir.path());
  const auto with_deadline = dir.path() / "deadline", plain = dir.path() / "plain";
  const auto job = [](const std::string& name, const std::string& more, const std::filesystem::path& file) {
    return "  - name: " + name + "\n    schedule: \"*/30 * * * * *\"\n    misfire: run_once\n" + more +
           "    shell: true\n    command: [\"echo $BATON_SCHEDULED_AT >> " + file.string() + "\"]\n";
  };
  // TTL 1 s: the default window is 2 s; `deadline` allows 20 s.
  auto cfg = write_config(
      dir, "agent.yaml",
      base_config(server, "1s",
                  job("deadline", "    starting_deadline: 20s\n", with_deadline) + job("plain", "", plain)));
  // Elected 5-10 s after a slot (and the agent's start): past the default window, well within the deadline.
  const auto expected = wait_until_after_a_slot(30, 5, 10);
  agent_process agent(cfg, "solo", dir.path() / "a.log");
  BOOST_TEST(eventually([&] { return read_file(with_deadline).find(expected) != std::string::npos; }, 15s),
             "the slot of " << expected << " was not run; runs: " << read_file(with_deadline));
  BOOST_TEST(agent.leader().json.at("is_leader").as_bool());
  BOOST_TEST(read_file(plain).find(expected) == std::string::npos, read_file(plain));
  BOOST_TEST(agent.log_lines({"event=job_started", "job=plain", "slot=" + expected}).empty());
  stop(agent);
}

// ---- The election section reloaded

BOOST_AUTO_TEST_CASE(a_campaigning_agent_given_a_new_election_key_by_reload_campaigns_on_it_at_once) {
  temp_dir dir;
  batond_process server(dir.path());
  const auto config = [&](const std::string& key) {
    auto text = base_config(server, "30s", "  []\n");
    text.replace(text.find("test/leader"), 11, key);
    return text;
  };
  auto cfg_a = write_config(dir, "a.yaml", config("test/leader"));
  auto cfg_b = write_config(dir, "b.yaml", config("test/leader"));
  agent_process a(cfg_a, "node-a", dir.path() / "a.log");
  BOOST_REQUIRE(eventually([&] { return a.leader().json.at("is_leader").as_bool(); }));
  const auto token = a.leader().json.at("token");
  agent_process b(cfg_b, "node-b", dir.path() / "b.log");
  // node-b campaigns (waits on test/leader); node-a holds it with a 30 s TTL.
  BOOST_REQUIRE(eventually([&] { return b.leader().json.at("leader_identity") == "node-a"; }, 10s));
  BOOST_TEST(!b.leader().json.at("is_leader").as_bool());

  write_config(dir, "b.yaml", config("test/other"));
  const auto reply = http_client(b.port(), 10s).post("/v1/reload", "");
  BOOST_REQUIRE(reply.status == 200);
  BOOST_TEST(reply.json.at("election").as_bool());
  // Well within the 30 s TTL: node-b left its campaign on test/leader and won the free test/other.
  BOOST_TEST(eventually([&] { return b.leader().json.at("is_leader").as_bool(); }, 10s));
  BOOST_TEST(b.leader().json.at("key").as_string() == "test/other");
  BOOST_TEST(!b.log_lines({"event=elected", "key=test/other"}).empty());
  BOOST_TEST(b.log_lines({"event=elected", "key=test/leader"}).empty());
  // node-a still leads test/leader with the same lease.
  BOOST_TEST(a.leader().json.at("is_leader").as_bool());
  BOOST_TEST(a.leader().json.at("token") == token);
  stop(b);
  stop(a);
}
