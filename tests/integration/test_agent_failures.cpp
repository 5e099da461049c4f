// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE agent_failures
#include <boost/test/unit_test.hpp>

// baton-agent's failure paths, against real batond and baton-agent processes on loopback: jobs that cannot
// start, cannot be stopped, time out or lose their output; HTTP targets that refuse or never answer; a lock
// server that cannot be reached; the agent itself killed with SIGKILL. Each time the run is recorded with its
// reason (log and metrics) and the agent goes on leading, serving its API and running its other jobs.
//
// Bounds: what the agent does within a second or two is given 15 s (the machine is shared and slow).

#include "agent_fixture.hpp"
#include "eventually.hpp"
#include "fault_proxy.hpp"
#include "lock_requests.hpp"
#include "overlap.hpp"
#include "process_faults.hpp"
#include "recording_server.hpp"
#include "storage_faults.hpp"

#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

using namespace baton::test;
using namespace std::chrono_literals;

namespace {

constexpr auto bound = 15s;

// A job that succeeds every second: the agent's "other jobs" that must keep running.
const std::string tick_job =
    "  - name: tick\n    schedule: \"*/1 * * * * *\"\n    command: [\"/bin/true\"]\n";

std::uint64_t leader_token(const agent_process& a) {
  auto r = a.leader();
  if (r.status != 200 || !r.json.at("is_leader").as_bool()) return 0;
  return r.json.at("token").to_number<std::uint64_t>();
}

// Waits until `a` leads; returns its token.
std::uint64_t await_leadership(const agent_process& a) {
  std::uint64_t token = 0;
  BOOST_REQUIRE(eventually([&] { return (token = leader_token(a)) != 0; }, bound));
  return token;
}

std::size_t count(const agent_process& a, const std::vector<std::string>& parts) {
  return a.log_lines(parts).size();
}

// The agent still leads under `token`, answers its API, and runs `job` (which succeeds) again and again.
void check_keeps_working(const agent_process& a, std::uint64_t token, const std::string& job = "tick") {
  BOOST_TEST(a.get("/healthz", 5s).status == 200);
  BOOST_TEST(leader_token(a) == token);
  const std::vector<std::string> ok{"event=job_finished", "job=" + job + " ", "outcome=succeeded"};
  const auto before = count(a, ok);
  BOOST_TEST(eventually([&] { return count(a, ok) >= before + 2; }, bound), job << " runs no more");
  BOOST_TEST(leader_token(a) == token);
}

// Waits for the first `job_finished` line of `job` with `outcome`, and returns it ("" if none came).
std::string await_finished(const agent_process& a, const std::string& job, const std::string& outcome) {
  std::vector<std::string> lines;
  eventually(
      [&] {
        return !(lines = a.log_lines({"event=job_finished", "job=" + job + " ", "outcome=" + outcome}))
                    .empty();
      },
      bound);
  return lines.empty() ? std::string() : lines.front();
}

std::string runs_metric(const std::string& job, const std::string& outcome) {
  return "baton_agent_job_runs_total{job=\"" + job + "\",outcome=\"" + outcome + "\"}";
}

// SIGTERM ends the agent promptly: its event loop is not stuck.
void check_stops_on_sigterm(agent_process& a) {
  a.process().signal(SIGTERM);
  BOOST_TEST(a.process().wait(bound) == 0);
}

int read_pid(const std::filesystem::path& file) {
  std::ifstream in(file);
  int pid = 0;
  in >> pid;
  return pid;
}

// batond and one agent that runs `jobs` and tick_job, leading.
struct solo_leader {
  temp_dir dir;
  batond_process server{dir.path()};
  std::unique_ptr<agent_process> agent;
  std::uint64_t token = 0;

  std::filesystem::path file(const std::string& name) const { return dir.path() / name; }
  // Starts the agent (with `env` added to its environment) and waits until it leads.
  agent_process& start(const std::string& jobs, std::vector<std::string> env = {},
                       const std::string& ttl = "4s") {
    auto cfg = write_config(dir, "agent.yaml", base_config(server, ttl, jobs + tick_job));
    agent = std::make_unique<agent_process>(cfg, "solo", file("a.log"), std::move(env));
    token = await_leadership(*agent);
    return *agent;
  }
  // After the failure: the run is counted under `outcome`, and the agent still leads, serves and runs tick,
  // and stops at once on SIGTERM.
  void check_recovered(const std::string& job, const std::string& outcome,
                       const std::string& other = "tick") {
    BOOST_TEST(agent->metric(runs_metric(job, outcome)) >= 1);
    check_keeps_working(*agent, token, other);
    check_stops_on_sigterm(*agent);
  }
};

// A job in YAML, `extra` being further keys (each line indented by four spaces).
std::string job(const std::string& name, const std::string& command, const std::string& extra = "") {
  return "  - name: " + name + "\n    schedule: \"*/1 * * * * *\"\n    " + command + "\n" + extra;
}

// Lowers the descriptor limit of `pid` to its lowest free descriptor number: every new descriptor fails with
// EMFILE, those already open (its listener, its connection to batond) keep working. Returns the old limit.
struct rlimit run_out_of_descriptors(int pid) {
  struct rlimit old {};
  BOOST_REQUIRE(::prlimit(pid, RLIMIT_NOFILE, nullptr, &old) == 0);
  std::set<int> open;
  for (const auto& e : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd"))
    open.insert(std::stoi(e.path().filename().string()));
  rlim_t lowest_free = 0;
  while (open.count(static_cast<int>(lowest_free)))
    ++lowest_free;
  struct rlimit low {
    lowest_free, old.rlim_max
  };
  BOOST_REQUIRE(::prlimit(pid, RLIMIT_NOFILE, &low, nullptr) == 0);
  return old;
}

std::size_t open_descriptors(int pid) {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& e :
       std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd"))
    ++n;
  return n;
}

// The CPU time (user and system) `pid` has used, from /proc/<pid>/stat: utime and stime are fields 14 and 15,
// counted after the command in parentheses, which may hold spaces.
std::chrono::milliseconds cpu_time(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  const std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::istringstream fields(stat.substr(stat.rfind(')') + 1));
  std::string skipped;
  for (int field = 3; field < 14; ++field)
    fields >> skipped;
  long long utime = 0, stime = 0;
  fields >> utime >> stime;
  return std::chrono::milliseconds((utime + stime) * 1000 / ::sysconf(_SC_CLK_TCK));
}

// A loopback TCP connection to `port` (the kernel completes it into the listen backlog, accepted or not).
int connect_to(unsigned short port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  BOOST_REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  return fd;
}

}  // namespace

// ---- Jobs that cannot start

BOOST_AUTO_TEST_CASE(a_job_whose_program_is_missing_is_recorded_as_spawn_failed_and_the_agent_keeps_leading) {
  solo_leader s;
  auto& a = s.start(job("backup", "command: [\"/usr/local/bin/no-such-backup\"]"));
  auto line = await_finished(a, "backup", "spawn_failed");
  BOOST_TEST(line.find("no-such-backup") != std::string::npos, line);
  BOOST_TEST(line.find("No such file or directory") != std::string::npos, line);
  BOOST_TEST(count(a, {"event=job_finished", "job=backup ", "outcome=spawn_failed"}) >= 1u);
  s.check_recovered("backup", "spawn_failed");
  BOOST_TEST(count(a, {"event=job_finished", "job=backup ", "outcome=spawn_failed"}) >= 2u);  // every slot
}

BOOST_AUTO_TEST_CASE(a_job_whose_program_is_not_executable_is_recorded_as_spawn_failed) {
  solo_leader s;
  auto script = s.file("backup.sh");
  std::ofstream(script) << "#!/bin/sh\nexit 0\n";
  std::filesystem::permissions(script,
                               std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  auto& a = s.start(job("backup", "command: [\"" + script.string() + "\"]"));
  auto line = await_finished(a, "backup", "spawn_failed");
  BOOST_TEST(line.find("Permission denied") != std::string::npos, line);
  s.check_recovered("backup", "spawn_failed");
}

BOOST_AUTO_TEST_CASE(a_job_started_while_the_agent_is_out_of_descriptors_fails_and_the_agent_recovers) {
  solo_leader s;
  auto& a = s.start("", {}, "10s");
  BOOST_REQUIRE(!await_finished(a, "tick", "succeeded").empty());
  const auto old = run_out_of_descriptors(a.pid());
  // The sidecar is not asked anything meanwhile: it cannot accept a connection without a descriptor.
  std::vector<std::string> failed;
  eventually(
      [&] {
        return !(failed = a.log_lines({"event=job_finished", "outcome=spawn_failed"})).empty();
      },
      bound);
  BOOST_REQUIRE(::prlimit(a.pid(), RLIMIT_NOFILE, &old, nullptr) == 0);
  BOOST_REQUIRE(!failed.empty());
  BOOST_TEST(failed.front().find("Too many open files") != std::string::npos, failed.front());
  s.check_recovered("tick", "spawn_failed");
}

BOOST_AUTO_TEST_CASE(a_job_the_agent_cannot_fork_for_is_recorded_as_spawn_failed_and_http_jobs_go_on) {
  solo_leader s;
  // Every fork fails (a pids limit); the HTTP job needs none.
  auto& a = s.start(job("backup", "command: [\"/bin/true\"]") +
                        job("ping", "http: {method: GET, url: \"" + s.server.url() + "/healthz\"}"),
                    process_faults("fork-eagain"));
  auto line = await_finished(a, "backup", "spawn_failed");
  BOOST_TEST(line.find("Resource temporarily unavailable") != std::string::npos, line);
  s.check_recovered("backup", "spawn_failed", "ping");
}

BOOST_AUTO_TEST_CASE(a_job_whose_guard_cannot_arm_its_deadline_timer_is_spawn_failed_and_never_runs) {
  solo_leader s;
  // timerfd_create fails: no command may run without a guard that keeps the lease's deadline.
  const auto ran = s.file("ran");
  auto& a = s.start(job("backup", "shell: true", "    command: \"touch " + ran.string() + "\"\n") +
                        job("ping", "http: {method: GET, url: \"" + s.server.url() + "/healthz\"}"),
                    process_faults("timerfd-emfile"));
  auto line = await_finished(a, "backup", "spawn_failed");
  BOOST_TEST(
      line.find("guard: cannot arm its CLOCK_BOOTTIME timer: Too many open files") != std::string::npos,
      line);
  BOOST_TEST(!std::filesystem::exists(ran));
  s.check_recovered("backup", "spawn_failed", "ping");
}

// Issue 24: a guard whose timer could not be re-armed after a renew took the new deadline with no timer for
// it, so a stopped agent would have left the job running past the lease. Now it keeps the deadline its timer
// holds (timerfd_settime fails in every guard after its first call, injected by baton-faultproc) and stops
// the job there, though the agent renews all along; the run is recorded as stopped, with the reason.
BOOST_AUTO_TEST_CASE(a_job_whose_guard_cannot_rearm_its_timer_is_stopped_at_the_deadline_it_holds) {
  solo_leader s;
  // TTL 4 s: the run's first deadline is at most 3.6 s after it starts; the agent renews every 0.4-0.6 s, so
  // a loaded machine does not cost it the lease before then.
  auto& a = s.start(job("slow", "shell: true", "    command: \"exec sleep 60\"\n"),
                    process_faults("guard-rearm-einval"), "4s\n  renew_every: 500ms");
  std::vector<std::string> stopped;  // a stopped run is logged as job_stopped
  BOOST_REQUIRE_MESSAGE(
      eventually(
          [&] {
            return !(stopped = a.log_lines({"event=job_stopped", "job=slow ", "outcome=stopped"})).empty();
          },
          25s),  // 5x: a slot within 1 s, the deadline within 3.6 s of it
      "the job was not stopped within 25 s");
  const auto& line = stopped.front();
  BOOST_TEST_MESSAGE(line);
  BOOST_TEST(
      line.find("stopped by its guard at an earlier deadline of the lease: it could not re-arm its timer "
                "after a renew (Invalid argument)") != std::string::npos,
      line);
  s.check_recovered("slow", "stopped");
}

// ---- Jobs that do not end as they should

BOOST_AUTO_TEST_CASE(a_job_that_runs_past_its_timeout_is_stopped_with_its_group_and_recorded_as_timed_out) {
  solo_leader s;
  auto& a = s.start(job("slow", "shell: true",
                        "    command: \"echo $$ > " + s.file("pgid").string() +
                            "; sleep 30 & sleep 30\"\n    timeout: 1s\n    grace: 200ms\n"));
  BOOST_REQUIRE(!await_finished(a, "slow", "timed_out").empty());
  const int pgid = read_pid(s.file("pgid"));
  BOOST_REQUIRE(pgid > 0);
  s.check_recovered("slow", "timed_out");
  BOOST_TEST(live_processes_in_group(pgid).empty());
}

BOOST_AUTO_TEST_CASE(a_job_whose_group_cannot_be_killed_is_reported_and_keeps_its_slot_until_it_ends) {
  solo_leader s;
  // kill(2) refuses every signal to a process group, as it does once a process of the group changed its
  // credentials (a setuid program).
  auto& a = s.start(job("stuck", "shell: true",
                        "    command: \"echo $$ > " + s.file("pgid").string() +
                            "; exec sleep 6\"\n    timeout: 1s\n    grace: 200ms\n"),
                    process_faults("kill-eperm"));
  std::vector<std::string> failed;
  BOOST_TEST(eventually(
      [&] {
        return !(failed = a.log_lines({"event=job_kill_failed", "job=stuck"})).empty();
      },
      bound));
  const int pgid = read_pid(s.file("pgid"));
  if (!failed.empty())
    BOOST_TEST(failed.front().find("Operation not permitted") != std::string::npos, failed.front());
  auto line = await_finished(a, "stuck", "timed_out");
  BOOST_TEST(line.find("could not stop") != std::string::npos, line);
  BOOST_TEST(a.metric("baton_agent_job_kill_failures_total{job=\"stuck\"}") >= 1);
  // While the stray group lives, the job's slots are skipped rather than run beside it.
  BOOST_TEST(eventually(
      [&] {
        return count(a, {"event=job_skipped", "job=stuck", "reason=overlap"}) >= 1;
      },
      bound));
  BOOST_TEST(count(a, {"event=job_started", "job=stuck"}) == 1u);
  check_keeps_working(a, s.token);
  // Once it ends by itself, it is reaped and the job runs again.
  BOOST_TEST(eventually([&] { return count(a, {"event=job_group_ended", "job=stuck"}) >= 1; }, bound));
  BOOST_TEST(eventually([&] { return count(a, {"event=job_started", "job=stuck"}) >= 2; }, bound));
  check_stops_on_sigterm(a);
  if (pgid > 0) ::kill(-pgid, SIGKILL);  // whatever is left of the last run (the test's kill is not refused)
}

BOOST_AUTO_TEST_CASE(a_job_that_closes_its_output_early_still_ends_with_its_own_status) {
  solo_leader s;
  auto& a =
      s.start(job("quiet", "shell: true", "    command: \"echo before; exec >&- 2>&-; sleep 1; exit 3\"\n"));
  auto line = await_finished(a, "quiet", "failed");
  BOOST_TEST(line.find("status=3") != std::string::npos, line);
  BOOST_TEST(count(a, {"event=job_output", "job=quiet", "line=before"}) >= 1u);
  s.check_recovered("quiet", "failed");
}

// ---- HTTP jobs

BOOST_AUTO_TEST_CASE(an_http_job_whose_target_refuses_the_connection_fails_with_the_reason) {
  solo_leader s;
  auto& a = s.start(job("report", "http: {url: \"http://127.0.0.1:1/reports\"}"));
  auto line = await_finished(a, "report", "failed");
  BOOST_TEST(line.find("Connection refused") != std::string::npos, line);
  s.check_recovered("report", "failed");
}

BOOST_AUTO_TEST_CASE(an_http_job_whose_target_never_answers_times_out) {
  // A listener nobody accepts on: connections complete (the kernel's backlog), requests are never answered.
  int silent = ::socket(AF_INET, SOCK_STREAM, 0);
  BOOST_REQUIRE(silent >= 0);
  sockaddr_in at{};
  at.sin_family = AF_INET;
  at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  BOOST_REQUIRE(::bind(silent, reinterpret_cast<sockaddr*>(&at), sizeof at) == 0);
  BOOST_REQUIRE(::listen(silent, 64) == 0);
  socklen_t len = sizeof at;
  ::getsockname(silent, reinterpret_cast<sockaddr*>(&at), &len);
  solo_leader s;
  auto& a = s.start(
      job("report", "http: {url: \"http://127.0.0.1:" + std::to_string(ntohs(at.sin_port)) + "/reports\"}",
          "    timeout: 1s\n"));
  auto line = await_finished(a, "report", "timed_out");
  BOOST_TEST(line.find("no complete answer within 1000ms") != std::string::npos, line);
  s.check_recovered("report", "timed_out");
  ::close(silent);
}

// ---- The lock server

BOOST_AUTO_TEST_CASE(an_unreachable_lock_server_is_logged_at_once_and_then_at_a_bounded_rate) {
  temp_dir dir;
  auto cfg = write_config(
      dir, "agent.yaml",
      "server: http://127.0.0.1:1\nlisten: 127.0.0.1:0\nelection:\n  ttl: 4s\njobs:\n" + tick_job);
  agent_process a(cfg, "solo", dir.path() / "a.log");
  std::vector<std::string> lines;
  BOOST_TEST(
      eventually([&] { return !(lines = a.log_lines({"event=lock_server_unreachable"})).empty(); }, bound));
  if (!lines.empty()) {
    BOOST_TEST(lines.front().find("server=http://127.0.0.1:1") != std::string::npos, lines.front());
    BOOST_TEST(lines.front().find("Connection refused") != std::string::npos, lines.front());
  }
  // The SDK goes on retrying (several failed tries), but the log says it once per 30 s.
  BOOST_TEST(eventually([&] { return a.metric("baton_agent_lock_server_errors_total") >= 3; }, bound));
  BOOST_TEST(a.metric("baton_agent_lock_server_reachable") == 0);
  BOOST_TEST(count(a, {"event=lock_server_unreachable"}) == 1u);
  // Ready as a sidecar (its pod stays in service through a lock server outage); not ready when the probe
  // requires the lock server.
  BOOST_TEST(a.get("/readyz").status == 200);
  auto ready = a.get("/readyz?lock_server=required");
  BOOST_TEST(ready.status == 503);
  // /readyz says why: what the agent has seen of the lock server.
  BOOST_TEST_REQUIRE(ready.json.is_object(), ready.body);
  const auto* seen = ready.json.as_object().if_contains("lock_server");
  BOOST_TEST_REQUIRE((seen && seen->is_object()), ready.body);
  BOOST_TEST(seen->as_object().at("reachable").as_bool() == false);
  BOOST_TEST(seen->as_object().at("errors").to_number<std::int64_t>() >= 3);
  BOOST_TEST(std::string(seen->as_object().at("last_error").as_string()).find("Connection refused") !=
             std::string::npos);
  BOOST_TEST(seen->as_object().at("unreachable_since").is_string());
  BOOST_TEST(a.get("/healthz").status == 200);
  check_stops_on_sigterm(a);
}

BOOST_AUTO_TEST_CASE(a_lock_server_that_goes_away_and_comes_back_is_logged_both_ways) {
  temp_dir dir;
  batond_process server(dir.path());
  fault_proxy proxy(server.port());
  auto text = base_config(server, "2s", tick_job);
  text.replace(text.find(server.url()), server.url().size(),
               "http://127.0.0.1:" + std::to_string(proxy.port()));
  auto cfg = write_config(dir, "agent.yaml", text);
  agent_process a(cfg, "solo", dir.path() / "a.log");
  const auto first = await_leadership(a);
  BOOST_TEST(a.metric("baton_agent_lock_server_reachable") == 1);
  // The server goes away: every connection, open or new, is reset.
  proxy.set_refuse(true);
  proxy.reset_all();
  BOOST_TEST(eventually([&] { return count(a, {"event=lock_server_unreachable"}) >= 1; }, bound));
  BOOST_TEST(eventually([&] { return count(a, {"event=lost"}) >= 1; }, bound));
  // Still refused a while after the loss: the agent campaigns, fails, and the log stays at one line.
  std::this_thread::sleep_for(3s);
  BOOST_TEST(count(a, {"event=lock_server_unreachable"}) == 1u);
  BOOST_TEST(a.metric("baton_agent_lock_server_reachable") == 0);
  BOOST_TEST(a.metric("baton_agent_lock_server_errors_total") >= 3);
  proxy.set_refuse(false);
  BOOST_TEST(eventually([&] { return count(a, {"event=lock_server_reachable"}) == 1; }, bound));
  BOOST_TEST(eventually([&] { return leader_token(a) > first; }, bound));
  BOOST_TEST(a.metric("baton_agent_lock_server_reachable") == 1);
  check_stops_on_sigterm(a);
}

// ---- The sidecar

// With no descriptor left, accept fails at once for every connection waiting in the backlog; retried at once
// it spins a core. The sidecar backs off, keeps leading, and answers again once descriptors are back; and it
// holds at most 64 connections, so a flood of idle ones cannot take its descriptors.
BOOST_AUTO_TEST_CASE(a_sidecar_out_of_descriptors_backs_off_instead_of_spinning_and_keeps_leading) {
  solo_leader s;
  auto& a = s.start("");
  const auto baseline = open_descriptors(a.pid());
  const auto old = run_out_of_descriptors(a.pid());
  std::vector<int> waiting;
  for (int i = 0; i < 32; ++i)
    waiting.push_back(connect_to(a.port()));
  std::this_thread::sleep_for(500ms);
  const auto cpu_before = cpu_time(a.pid());
  const auto started = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(3s);
  const auto cpu = cpu_time(a.pid()) - cpu_before;
  const auto elapsed =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
  BOOST_REQUIRE(::prlimit(a.pid(), RLIMIT_NOFILE, &old, nullptr) == 0);
  BOOST_TEST_MESSAGE("out of descriptors: " << cpu.count() << " ms of CPU in " << elapsed.count() << " ms");
  // A spinning loop uses about one core; backing off, a few percent.
  BOOST_TEST(cpu.count() < elapsed.count() * 3 / 10, cpu.count()
                                                         << " ms of CPU in " << elapsed.count() << " ms");
  for (const int fd : waiting)
    ::close(fd);
  BOOST_TEST(eventually([&] { return a.get("/healthz", 2s).status == 200; }, bound));
  BOOST_TEST(leader_token(a) == s.token);

  std::vector<int> idle;
  for (int i = 0; i < 200; ++i)
    idle.push_back(connect_to(a.port()));
  std::this_thread::sleep_for(2s);
  const auto held = open_descriptors(a.pid());
  BOOST_TEST(held <= baseline + 64 + 16, held << " descriptors open, " << baseline << " before");
  for (const int fd : idle)
    ::close(fd);
  BOOST_TEST(eventually([&] { return a.get("/healthz", 2s).status == 200; }, bound));
  BOOST_TEST(leader_token(a) == s.token);
  check_stops_on_sigterm(a);
}

// ---- The agent itself dies

BOOST_AUTO_TEST_CASE(kill9_of_the_agent_leaves_no_process_of_a_running_job) {
  solo_leader s;
  const auto pgid_file = s.file("pgid");
  // sh dies with the agent (PR_SET_PDEATHSIG); its child sleep would be re-parented to init and run on.
  auto& a = s.start(job("long", "shell: true",
                        "    command: \"echo $$ > " + pgid_file.string() + "; sleep 30; echo late\"\n"));
  int pgid = 0;
  BOOST_REQUIRE(eventually(
      [&] { return (pgid = read_pid(pgid_file)) > 0 && live_processes_in_group(pgid).size() >= 2; }, bound));
  a.process().signal(SIGKILL);
  a.process().wait(bound);
  std::vector<int> left;
  const bool gone = eventually([&] { return (left = live_processes_in_group(pgid)).empty(); }, 5s);
  BOOST_TEST(gone, left.size() << " process(es) of the job's group still run");
  for (int pid : left)
    ::kill(pid, SIGKILL);
}

// ---- A job that outlives its lease (issue 24, defects 3 and 8)

namespace {

// A leading agent with a job, `stubborn`, that ignores SIGTERM and writes the time every 50 ms (overlap.hpp),
// started by hand; the election's TTL is 6 s, so SIGKILL must come by 5.7 s after the last renew was sent,
// 300 ms before the server can expire the lease. `server_url` is where the agent sends its requests.
struct stubborn_leader {
  temp_dir dir;
  batond_process server{dir.path()};
  std::unique_ptr<agent_process> agent;
  int pgid = 0;
  std::chrono::steady_clock::time_point run_asked;  // just before the run was started

  std::filesystem::path file(const std::string& name) const { return dir.path() / name; }

  void start(const std::string& server_url) {
    const auto cfg = write_config(
        dir, "agent.yaml",
        "server: " + server_url +
            "\nlisten: 127.0.0.1:0\nshutdown_grace: 1s\nelection:\n  key: test/leader\n  ttl: 6s\njobs:\n"
            "  - name: stubborn\n    schedule: \"0 0 1 1 *\"\n    shell: true\n    command: \"" +
            stamping_script(file("pgid"), file("stamps")) + "\"\n");
    agent = std::make_unique<agent_process>(cfg, "solo", file("a.log"));
    await_leadership(*agent);
    run_asked = std::chrono::steady_clock::now();
    BOOST_REQUIRE(http_client(agent->port(), 10s).post("/v1/jobs/stubborn/run", "").status == 202);
    BOOST_REQUIRE(eventually(
        [&] { return (pgid = read_pid(file("pgid"))) > 0 && last_stamp(file("stamps")) > 0; }, bound));
  }

  // Takes the election's lock straight from batond as soon as the server has expired the agent's lease, and
  // returns when that was (wall clock, as the job writes it); whether the job's group was gone by then goes
  // to `job_gone`.
  std::int64_t next_holder_starts(bool& job_gone) {
    auto c = server.client();
    std::int64_t at = 0;
    BOOST_REQUIRE(eventually(
        [&] {
          if (c.post("/v1/locks/test%2Fleader/acquire", acquire_body("next", 30'000)).status != 200)
            return false;
          at = wall_ns();
          job_gone = live_processes_in_group(pgid).empty();
          return true;
        },
        30s));
    return at;
  }

  // Once the job's group is gone, its last write against the moment the next holder got the lock.
  void check_last_write_before(std::int64_t next_started) {
    BOOST_TEST(eventually([&] { return live_processes_in_group(pgid).empty(); }, bound));
    check_written_before(file("stamps"), next_started);
  }

  ~stubborn_leader() {
    if (pgid > 0)
      for (int pid : live_processes_in_group(pgid))
        ::kill(pid, SIGKILL);
  }
};

}  // namespace

// Defect 3: the job's grace (5 s by default) ran on after the lease had expired on the server. The agent's
// renewals are cut off by a partition; SIGKILL must come before the next holder gets the lock.
BOOST_AUTO_TEST_CASE(a_job_ignoring_sigterm_is_dead_before_the_next_holder_gets_the_agents_lost_lease) {
  stubborn_leader s;
  fault_proxy proxy(s.server.port());
  s.start("http://127.0.0.1:" + std::to_string(proxy.port()));
  proxy.set_blackhole(true);
  bool gone = false;
  const auto next_started = s.next_holder_starts(gone);
  BOOST_TEST(gone, "the job still ran when the next holder got the lock");
  s.check_last_write_before(next_started);
  // Stopped as on any loss (the agent's SIGKILL and its guard's come at the same instant; either may be
  // first).
  BOOST_TEST(eventually(
      [&] {
        return !s.agent->log_lines({"event=job_stopped", "job=stubborn"}).empty();
      },
      bound));
  proxy.set_blackhole(false);
}

// Defect 8: a stopped agent (SIGSTOP) left its job running past the lease. The job's guard must stop it by
// the lease's deadline on its own.
BOOST_AUTO_TEST_CASE(a_stopped_agents_job_is_killed_before_its_lease_can_expire) {
  stubborn_leader s;
  s.start(s.server.url());
  bool gone = false;
  std::int64_t next_started = 0;
  std::chrono::steady_clock::duration before_stop{};
  {
    stopped_process stopped(s.agent->process());
    before_stop = std::chrono::steady_clock::now() - s.run_asked;
    next_started = s.next_holder_starts(gone);
    BOOST_TEST(gone, "the job still ran when the next holder got the lock");
    // Stopped well past the job's end: what the agent reaps then must not count the time it was stopped.
    std::this_thread::sleep_for(8s);
  }
  s.check_last_write_before(next_started);
  // Resumed, the agent finds its lease lost, and goes on.
  BOOST_TEST(eventually([&] { return !s.agent->log_lines({"event=lost"}).empty(); }, bound));
  BOOST_TEST(s.agent->get("/healthz", 5s).status == 200);
  // Issue 26, defect 1: the run is recorded as lost (never succeeded or a plain stop), with the duration it
  // really ran: at most the time until the agent stopped plus the lease's 6 s TTL, although the agent reaped
  // it more than 14 s after it was stopped.
  std::vector<std::string> lines;
  BOOST_REQUIRE(eventually(
      [&] {
        return !(lines = s.agent->log_lines({"job=stubborn", "outcome=lost"})).empty();
      },
      bound));
  const auto at = lines.front().find("duration_ms=");
  BOOST_REQUIRE(at != std::string::npos);
  const auto duration = std::chrono::milliseconds(std::stoll(lines.front().substr(at + 12)));
  const auto limit = std::chrono::duration_cast<std::chrono::milliseconds>(before_stop) + 7s;
  BOOST_TEST(duration.count() <= limit.count(), lines.front());
  BOOST_TEST(s.agent->log_lines({"job=stubborn", "outcome=succeeded"}).empty());
}

// A job's output is the operator's data: the log's per-event throttle (which bounds what a remote client can
// make a process write) does not drop it, however fast the job writes.
BOOST_AUTO_TEST_CASE(a_job_that_writes_fast_has_every_line_in_the_log) {
  solo_leader s;
  auto& a = s.start(job("chatty", "shell: true", "    command: \"seq 1 300\"\n"));
  await_finished(a, "chatty", "succeeded");
  BOOST_TEST(count(a, {"event=job_output", "job=chatty"}) >= 300u);
  BOOST_TEST(count(a, {"event=job_output", "job=chatty", "line=300"}) >= 1u);
  BOOST_TEST(count(a, {"event=job_output", "suppressed="}) == 0u);
}

// Issue 26, failure context and job keys: a command runs with its env, in its working_dir and (the agent
// being root) as its user; its stdout and stderr are logged apart, their ends kept with the run, and a
// failure's detail says how it ended and what it last wrote to stderr.
BOOST_AUTO_TEST_CASE(a_commands_env_directory_and_user_are_its_own_and_its_failure_says_what_happened) {
  solo_leader s;
  const bool root = ::geteuid() == 0;
  auto& a = s.start(job(
      "envy", "shell: true",
      "    command: \"echo $GREETING $(pwd) $(id -un) oom=$(cat /proc/self/oom_score_adj); echo oops >&2; "
      "exit 3\"\n"
      "    env:\n      GREETING: hello\n    working_dir: /tmp\n" +
          std::string(root ? "    user: nobody\n" : "")));
  const auto line = await_finished(a, "envy", "failed");
  BOOST_REQUIRE(!line.empty());
  BOOST_TEST(line.find("detail=\"exit status 3; stderr: oops\"") != std::string::npos, line);
  const std::string who = root ? "nobody" : "";
  BOOST_TEST(count(a, {"event=job_output", "job=envy", "stream=stdout", "hello /tmp"}) >= 1u, a.log());
  if (root) BOOST_TEST(count(a, {"event=job_output", "job=envy", "stream=stdout", "/tmp nobody"}) >= 1u);
  BOOST_TEST(count(a, {"event=job_output", "job=envy", "stream=stderr", "line=oops"}) >= 1u);
  // Out of memory, the kernel takes the job first, not the agent.
  BOOST_TEST(count(a, {"event=job_output", "job=envy", "oom=1000"}) >= 1u, a.log());
  const auto runs = a.get("/v1/jobs/envy").json.at("runs").as_array();
  BOOST_REQUIRE(!runs.empty());
  const auto& out = runs[0].at("output");
  BOOST_TEST(out.at("stderr").as_string() == "oops\n");
  BOOST_TEST(std::string(out.at("stdout").as_string()).starts_with("hello /tmp"));
  BOOST_TEST(!out.at("stdout_truncated").as_bool());
  s.check_recovered("envy", "failed");
}

BOOST_AUTO_TEST_CASE(a_job_whose_working_dir_is_missing_is_spawn_failed_with_the_reason) {
  solo_leader s;
  auto& a = s.start(job("lost", "command: [/bin/true]", "    working_dir: /nonexistent/dir\n"));
  const auto line = await_finished(a, "lost", "spawn_failed");
  BOOST_TEST(line.find("cannot enter working_dir") != std::string::npos, line);
  s.check_recovered("lost", "spawn_failed");
}

// Issue 26, notifications: a hook fires once per slot, on the slot's final outcome (not on an attempt a retry
// then fixed); a webhook that keeps failing is retried, then given up on with a line at error.
BOOST_AUTO_TEST_CASE(
    hooks_fire_once_per_slot_on_its_final_outcome_and_a_failing_webhook_is_retried_then_given_up) {
  solo_leader s;
  recording_server hooks(200, "{}");
  hooks.answer("/down", 500, "{}");
  const auto fired = s.file("fired");
  const auto tries = s.file("tries");
  const std::string command_hook =
      "    on_failure:\n      command: [/bin/sh, -c, 'echo \"$BATON_HOOK_EVENT $BATON_JOB " +
      std::string("$BATON_HOOK_JSON\" >> ") + fired.string() + "']\n";
  const std::string yearly =
      "  - name: %s\n    schedule: \"0 0 1 1 *\"\n    retries: 1\n    retry_backoff: 100ms\n";
  const auto named = [&](const std::string& name) {
    auto text = yearly;
    text.replace(text.find("%s"), 2, name);
    return text;
  };
  auto& a = s.start(named("flaky") + "    shell: true\n    command: \"echo x >> " + tries.string() +
                    "; test $BATON_ATTEMPT -ge 2\"\n" + command_hook +
                    "    on_success:\n      url: " + hooks.url() + "/ok\n" + named("broken") +
                    "    command: [/bin/false]\n" + command_hook + named("down") +
                    "    command: [/bin/false]\n    on_failure:\n      url: " + hooks.url() + "/down\n");
  const auto run = [&](const std::string& job) {
    return http_client(a.port(), 10s).post("/v1/jobs/" + job + "/run", "").status;
  };
  BOOST_REQUIRE(run("flaky") == 202);
  BOOST_REQUIRE(eventually([&] { return count(a, {"event=hook_delivered", "job=flaky"}) == 1u; }, bound));
  BOOST_REQUIRE(run("broken") == 202);
  BOOST_REQUIRE(eventually([&] { return count(a, {"event=hook_delivered", "job=broken"}) == 1u; }, bound));
  BOOST_REQUIRE(run("down") == 202);
  BOOST_REQUIRE(eventually([&] { return count(a, {"event=hook_given_up", "job=down"}) == 1u; }, bound));
  std::this_thread::sleep_for(500ms);  // nothing more comes
  // flaky failed once and then succeeded: on_success, once; its on_failure never.
  std::vector<std::string> ok, down;
  for (const auto& r : hooks.requests()) {
    if (r == "POST /ok") ok.push_back(r);
    if (r == "POST /down") down.push_back(r);
  }
  BOOST_TEST(ok.size() == 1u);
  // broken failed twice (one retry): on_failure, once, with the run's JSON.
  std::istringstream lines(read_file(fired));
  std::vector<std::string> got;
  for (std::string line; std::getline(lines, line);)
    got.push_back(line);
  BOOST_REQUIRE(got.size() == 1u);
  BOOST_TEST(got[0].starts_with("failure broken {"), got[0]);
  BOOST_TEST(got[0].find("\"outcome\":\"failed\"") != std::string::npos, got[0]);
  BOOST_TEST(got[0].find("\"attempt\":2") != std::string::npos, got[0]);
  // down's webhook answered 500 every time: four tries, each failure logged, then given up.
  BOOST_TEST(down.size() == 4u);
  BOOST_TEST(count(a, {"event=hook_failed", "job=down"}) == 3u);
  BOOST_TEST(count(a, {"event=hook_given_up", "job=down", "attempts=4"}) == 1u);
  s.check_recovered("broken", "failed");
}

// Issue 26: run-now can wait and report the outcome, the last retry's.
BOOST_AUTO_TEST_CASE(a_manual_run_asked_to_wait_answers_with_its_final_outcome_or_that_it_goes_on) {
  solo_leader s;
  auto& a = s.start(
      "  - name: broken\n    schedule: \"0 0 1 1 *\"\n    command: [/bin/false]\n    retries: 1\n"
      "    retry_backoff: 100ms\n  - name: slow\n    schedule: \"0 0 1 1 *\"\n    command: [/bin/sleep, "
      "\"5\"]\n");
  http_client c(a.port(), 30s);
  const auto done = c.post("/v1/jobs/broken/run?wait_s=20", "");
  BOOST_TEST(done.status == 200, done.body);
  BOOST_TEST(done.json.at("finished").as_bool());
  BOOST_TEST(done.json.at("run").at("outcome").as_string() == "failed");
  BOOST_TEST(done.json.at("run").at("attempt").to_number<int>() == 2);
  BOOST_TEST(done.json.at("run").at("detail").as_string() == "exit status 1");
  const auto going = c.post("/v1/jobs/slow/run?wait_s=1", "");
  BOOST_TEST(going.status == 202, going.body);
  BOOST_TEST(!going.json.at("finished").as_bool());
  BOOST_TEST(c.post("/v1/jobs/slow/run?wait_s=0", "").status == 409);  // out of range: no wait; still running
  s.check_recovered("broken", "failed");
}
