// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE conformance
#include <boost/test/unit_test.hpp>

#include "batond_fixture.hpp"
#include "etcd_cluster.hpp"
#include "test_pki.hpp"
#include "token_hash.hpp"

#include <signal.h>
#include <stdlib.h>

#include <algorithm>
#include <fstream>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <semaphore>
#include <sstream>
#include <thread>

using namespace baton::test;
using namespace std::chrono_literals;

namespace {

// Exit statuses documented in docs/cli.md.
constexpr int usage = 64;
constexpr int unavailable = 69;
constexpr int check_failed = 70;

// A run takes about 10 s on an idle machine (a broken server's failing checks wait out their bounds);
// generous for a loaded 2-core one.
constexpr auto run_bound = 240s;

struct result {
  int code = -1;
  std::vector<std::string> out;
  std::string err;
  std::string text() const {
    std::string t;
    for (auto& l : out)
      t += l + "\n";
    return t + err;
  }
  bool has_line(const std::string& prefix) const {
    return std::any_of(out.begin(), out.end(), [&](auto& l) { return l.rfind(prefix, 0) == 0; });
  }
};

result run_baton(std::vector<std::string> args) {
  temp_dir scratch;
  auto err_path = (scratch.path() / "stderr").string();
  args.insert(args.begin(), bin_path("baton"));
  child_process p(std::move(args), err_path);
  result r;
  // Read as it goes, so a full pipe never stalls baton; the end of output ends the loop.
  const auto until = std::chrono::steady_clock::now() + run_bound;
  try {
    while (std::chrono::steady_clock::now() < until)
      r.out.push_back(p.read_line(run_bound));
  } catch (const std::runtime_error&) {
  }
  r.code = p.wait(60s);
  std::ifstream in(err_path);
  std::stringstream s;
  s << in.rdbuf();
  r.err = s.str();
  return r;
}

// broken-lockd with one bug, on an ephemeral port.
struct broken_server {
  std::unique_ptr<child_process> proc;
  std::string url;
  explicit broken_server(const std::string& bug, std::vector<std::string> extra = {}) {
    std::vector<std::string> argv{bin_path("broken-lockd"), "--listen", "127.0.0.1:0", "--bug", bug};
    argv.insert(argv.end(), extra.begin(), extra.end());
    proc = std::make_unique<child_process>(std::move(argv));
    auto line = proc->read_line(30s);
    const std::string prefix = "broken-lockd listening on ";
    if (line.rfind(prefix, 0) != 0) throw std::runtime_error("unexpected first line: " + line);
    url = "http://" + line.substr(prefix.size());
  }
};

std::string quoted(const std::string& s) {
  std::string q = "'";
  for (char c : s)
    q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// A server that a shell script can kill -9 and start again on the same port: the script (restart.sh) kills
// the process named in its pidfile, waits until it is gone, and starts `argv` again in the background. The
// test starts it with the same script, so the server is never the test's child (it needs no reaping).
class restartable_server {
 public:
  // `argv_with_port` builds the server's command line for a port; the server is up once GET `health_path`
  // answers 200.
  template <typename F>
  explicit restartable_server(F argv_with_port, const std::string& health_path = "/healthz")
      : port_(ephemeral_port()) {
    const auto pidfile = (dir_.path() / "pid").string();
    std::ofstream script(script_path());
    script << "#!/bin/sh\n"
           << "if [ -f " << quoted(pidfile) << " ]; then\n"
           << "  pid=$(cat " << quoted(pidfile) << ")\n"
           << "  kill -9 \"$pid\" 2>/dev/null\n"
           // Gone, or a zombie (sockets closed already) that nobody has reaped yet; at most 5 s.
           << "  n=0\n"
           << "  while [ $n -lt 250 ] && [ -e /proc/$pid ] && [ \"$(cut -d' ' -f3 /proc/$pid/stat "
              "2>/dev/null)\" != Z ]; "
              "do sleep 0.02; n=$((n+1)); done\n"
           << "fi\n";
    for (const auto& a : argv_with_port(port_))
      script << quoted(a) << " ";
    script << ">>" << quoted((dir_.path() / "log").string()) << " 2>&1 </dev/null &\n"
           << "echo $! >" << quoted(pidfile) << "\n";
    script.close();
    auto started = run_to_end({"/bin/sh", script_path()}, (dir_.path() / "start.err").string(), 30s);
    if (started.code != 0) throw std::runtime_error("restart.sh failed: " + started.err);
    const auto until = std::chrono::steady_clock::now() + 30s;
    for (;;) {
      try {
        if (http_client(port_, 1s).get(health_path).status == 200) break;
      } catch (const std::exception&) {
      }
      if (std::chrono::steady_clock::now() > until)
        throw std::runtime_error("the server did not start: " + log());
      std::this_thread::sleep_for(50ms);
    }
  }
  ~restartable_server() {
    std::ifstream in(dir_.path() / "pid");
    int pid = 0;
    if (in >> pid && pid > 0) ::kill(pid, SIGKILL);
  }

  unsigned short port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::string restart_command() const { return "sh " + quoted(script_path()); }
  const std::filesystem::path& dir() const { return dir_.path(); }
  std::string log() const {
    std::ifstream in(dir_.path() / "log");
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

 private:
  std::string script_path() const { return (dir_.path() / "restart.sh").string(); }
  temp_dir dir_;
  unsigned short port_;
};

restartable_server restartable_batond(const temp_dir& data) {
  return restartable_server([&](unsigned short port) {
    return std::vector<std::string>{bin_path("batond"),
                                    "--listen",
                                    "127.0.0.1:" + std::to_string(port),
                                    "--data-dir",
                                    data.path().string(),
                                    "--log-level",
                                    "warn"};
  });
}

// The checks of the lease's guarantees, which conformance also makes through an etcd backend, and those only
// the wire shows, which it skips there.
const char* const lease_checks[] = {
    "concurrent acquires have one winner",
    "acquire while held is refused naming the holder",
    "same-owner re-acquire gets a larger token",
    "same-owner re-acquire sets a new expiry",
    "renew is refused for a wrong owner",
    "renew is refused for a wrong token",
    "renew is refused for an expired lease",
    "renew extends the lease past its first TTL",
    "a shorter renew or re-acquire does not shorten a lease",
    "release is conditional on owner and token",
    "a superseded token can neither renew nor release",
    "release is idempotent",
    "tokens increase across release and expiry",
    "expiry frees the lock on time",
    "a lease is held for its TTL from the acquire's sending",
    "a 1-hour lease is held",
    "long-poll answers within 250 ms of a release",
    "long-poll answers within 250 ms of an expiry",
    "long-poll with a stale token answers at once",
    "a lease's value is published, replaced and kept",
};
const char* const wire_checks[] = {
    "capabilities",
    "malformed JSON is 400 bad_request",
    "missing field is 400 bad_request",
    "ttl out of range is 400 bad_request",
    "unknown route is 404 not_found",
    "wrong method is 405 method_not_allowed",
    "body over 64 KiB is 413 body_too_large",
    "server still serves after bad inputs",
};
const char* const restart_checks[] = {
    "restart: a held lease keeps its owner and token",
    "restart: a released lock stays released",
    "restart: new tokens are larger than every token before",
};
// Run when the server advertises renew_batch, skipped otherwise; the last one in restart mode only.
const char* const batch_checks[] = {
    "renew batch: each entry is answered as a single renew",
    "renew batch: a superseded token is refused",
    "renew batch: a malformed batch is 400 and renews nothing",
};
const char* const batch_restart_check = "restart: a TTL raised by a batch renewal is kept";
// Run when the server advertises proclaim (through a backend: when the backend supports it), skipped
// otherwise; the bad value is the wire's alone.
const char* const proclaim_checks[] = {
    "proclaim replaces the value and keeps token and expiry",
    "proclaim is refused for a stale token, another owner or a free key",
    "a long-poll naming the value answers at a proclaim",
};
const char* const proclaim_wire_check = "proclaim with a bad value is 400 bad_request";
const char* const proclaim_restart_check = "restart: a proclaimed value is kept";
// Run when the server advertises lock_record (through a backend: when the backend keeps records).
const char* const record_checks[] = {
    "lock record: the holder writes it, versions count, the lease stays",
    "lock record: a write by another owner or an old token is refused, nothing changed",
    "lock record: it outlives release and expiry, and the old holder is refused",
    "lock record: a key without one reads as none",
};
const char* const record_restart_check = "restart: a lock record is kept";
// Run when the server advertises acquire_queue; over HTTP only (the SDK's etcd backend has no queued
// acquire).
const char* const queue_checks[] = {
    "queued acquire: waiters are granted the lock in arrival order",
    "queued acquire: one waiter is answered per hand-off",
    "queued acquire: a plain acquire does not jump the queue",
    "queued acquire: a waiter whose connection closes is skipped",
    "queued acquire: the wait passing is answered 409 held",
};
// Run when the server advertises list_locks and break_lease; over HTTP only (batond's routes).
const char* const operator_checks[] = {
    "list: held locks under a prefix, in key order, page by page",
    "break: the lease ends, its holder is lost, the next token is larger",
};
const char* const lock_delay_checks[] = {
    "lock-delay: an expired lease keeps its key for the delay, a release does not",
    "lock-delay: a delay over the server's bound is 400 naming it",
};
// Run when the server advertises semaphores; the listing's needs list_locks too and is over HTTP only.
const char* const semaphore_checks[] = {
    "semaphores: at most N permits, each in the lowest free slot",
    "semaphores: the same holder again keeps its slot with a larger token",
    "semaphores: another count while the key is held is permits_mismatch",
    "semaphores: a release names its permit by token",
    "semaphores: the listing shows each permit with its slot",
};
// The run whose restart command does not restart the server: that server also serves its queues last in,
// first out (the two faults touch different checks), which saves a run.
const char* const lifo_run = "queue-lifo+restart-that-does-not-restart";

// One run of conformance against broken-lockd: the bug, broken-lockd's extra arguments, and whether the run
// restarts it (then with a state file, through restartable_server).
struct broken_run {
  std::string bug;
  std::vector<std::string> extra;
  bool restart = false;
};

result run_against(const broken_run& b) {
  if (!b.restart) {
    broken_server server(b.bug, b.extra);
    return run_baton({"conformance", "--server", server.url});
  }
  temp_dir state;
  restartable_server server([&](unsigned short port) {
    std::vector<std::string> argv{bin_path("broken-lockd"),
                                  "--listen",
                                  "127.0.0.1:" + std::to_string(port),
                                  "--bug",
                                  b.bug,
                                  "--state-file",
                                  (state.path() / "state").string()};
    argv.insert(argv.end(), b.extra.begin(), b.extra.end());
    return argv;
  });
  return run_baton({"conformance", "--server", server.url(), "--restart-command", server.restart_command()});
}

// The runs against broken-lockd are independent and mostly wait out bounds, so they run in parallel (at most
// four at a time, leaving the timing checks room on a 2-core machine), started together by the first test
// that needs one; each test case then looks at its own.
const std::map<std::string, broken_run>& broken_runs() {
  static const std::map<std::string, broken_run> runs{
      // An honest server of the core alone, from before GET /v1/capabilities (version 1, no optional
      // features), checked without a restart command.
      {"v1-core", {"none", {"--core-only"}, false}},
      {"none+capabilities+restart",
       {"none",
        {"--capabilities",
         R"({"protocol_version":1,"features":["lease_values","renew_batch","acquire_queue","batch_renew"],)"
         R"("renew_batch_max":1000})"},
        true}},
      {"bad-capabilities",
       {"none", {"--capabilities", R"({"protocol_version":"1","features":["lease_values"]})"}, false}},
      {lifo_run,
       {"queue-lifo", {"--capabilities", R"({"protocol_version":1,"features":["acquire_queue"]})"}, false}},
      {"release-by-key", {"release-by-key", {}, false}},
      {"release-old-token", {"release-old-token", {}, false}},
      {"counter-restarts", {"counter-restarts", {}, false}},
      {"tokens-not-kept", {"tokens-not-kept", {}, true}},
      {"no-expiry", {"no-expiry", {}, false}},
      {"early-expiry-40ms", {"early-expiry-40ms", {}, false}},
      {"early-expiry-15ms", {"early-expiry-15ms", {}, false}},
      {"renew-no-extend", {"renew-no-extend", {}, false}},
      {"ttl-32bit-us", {"ttl-32bit-us", {}, false}},
      {"reacquire-keeps-expiry", {"reacquire-keeps-expiry", {}, false}},
      {"renew-shortens", {"renew-shortens", {}, false}},
      {"poll-ignores-token", {"poll-ignores-token", {}, false}},
      {"poll-every-5s", {"poll-every-5s", {}, false}},
      {"racy-acquire", {"racy-acquire", {}, false}},
      // Advertises two features it does not keep: values, and lock-delay (broken-lockd ignores
      // lock_delay_ms, as a server from before it would). One run catches both.
      {"no-value",
       {"no-value",
        {"--capabilities",
         R"({"protocol_version":1,"features":["lease_values","lock_delay"],"lock_delay_max_ms":60000})"},
        false}},
      {"batch-ignores-token",
       {"batch-ignores-token",
        {"--capabilities",
         R"({"protocol_version":1,"features":["lease_values","renew_batch"],"renew_batch_max":1000})"},
        false}},
  };
  return runs;
}

const result& broken_result(const std::string& name) {
  static std::map<std::string, std::shared_future<result>> started;
  static std::counting_semaphore<4> slots(4);
  static std::once_flag once;
  std::call_once(once, [] {
    for (const auto& [n, run] : broken_runs())
      started[n] = std::async(std::launch::async, [n = n, run = run] {
                     slots.acquire();
                     result r;
                     try {
                       if (n == lifo_run) {
                         broken_server server(run.bug, run.extra);
                         r = run_baton({"conformance", "--server", server.url, "--restart-command", "true"});
                       } else {
                         r = run_against(run);
                       }
                     } catch (const std::exception& e) {
                       r.err = std::string("could not run: ") + e.what();
                     }
                     slots.release();
                     return r;
                   }).share();
  });
  return started.at(name).get();
}

void expect_failure(const std::string& name, std::vector<std::string> failing) {
  const auto& r = broken_result(name);
  BOOST_TEST_MESSAGE(name << ":\n" << r.text());
  BOOST_CHECK_EQUAL(r.code, check_failed);
  for (const auto& check : failing)
    BOOST_CHECK_MESSAGE(r.has_line("FAIL  " + check + ": "), name << ": expected FAIL  " << check << "\n"
                                                                  << r.text());
  // The bad-input checks do not depend on the bug: the server is otherwise conformant.
  BOOST_CHECK_MESSAGE(r.has_line("PASS  malformed JSON is 400 bad_request"), r.text());
  BOOST_CHECK_MESSAGE(r.has_line("PASS  acquire while held is refused naming the holder"), r.text());
}

// What a run prints first: the line of its first check, or where it stopped. The run is then ended (the
// whole suite is the long cases' job); this is enough to see it reached the server and was served.
std::string first_line(std::vector<std::string> args) {
  temp_dir scratch;
  args.insert(args.begin(), bin_path("baton"));
  child_process p(std::move(args), (scratch.path() / "stderr").string());
  try {
    return p.read_line(60s);
  } catch (const std::runtime_error& e) {
    return std::string("no line: ") + e.what();
  }
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

constexpr const char* first_check = "PASS  concurrent acquires have one winner";

}  // namespace

BOOST_AUTO_TEST_CASE(batond_passes_every_check_across_a_kill_9) {
  temp_dir data;
  auto server = restartable_batond(data);
  auto r =
      run_baton({"conformance", "--server", server.url(), "--restart-command", server.restart_command()});
  BOOST_TEST_MESSAGE("batond:\n" << r.text() << "\nbatond's log:\n" << server.log());
  BOOST_CHECK_EQUAL(r.code, 0);
  std::vector<std::string> all_checks(std::begin(lease_checks), std::end(lease_checks));
  all_checks.insert(all_checks.end(), std::begin(wire_checks), std::end(wire_checks));
  for (const auto& name : all_checks) {
    // batond may or may not advertise its capabilities yet; either is conformant.
    if (name == "capabilities")
      BOOST_CHECK_MESSAGE(
          r.has_line("PASS  capabilities") || r.has_line("SKIP  capabilities: not advertised"), r.text());
    else
      BOOST_CHECK_MESSAGE(r.has_line("PASS  " + name), "expected PASS  " << name << "\n" << r.text());
  }
  for (const auto* name : restart_checks)
    BOOST_CHECK_MESSAGE(r.has_line(std::string("PASS  ") + name), "expected PASS  " << name << "\n"
                                                                                    << r.text());
  for (const auto* name : batch_checks)
    BOOST_CHECK_MESSAGE(r.has_line(std::string("PASS  ") + name), "expected PASS  " << name << "\n"
                                                                                    << r.text());
  BOOST_CHECK_MESSAGE(r.has_line(std::string("PASS  ") + batch_restart_check), r.text());
  for (const auto* name : proclaim_checks)
    BOOST_CHECK_MESSAGE(r.has_line(std::string("PASS  ") + name), "expected PASS  " << name << "\n"
                                                                                    << r.text());
  BOOST_CHECK_MESSAGE(r.has_line(std::string("PASS  ") + proclaim_wire_check), r.text());
  BOOST_CHECK_MESSAGE(r.has_line(std::string("PASS  ") + proclaim_restart_check), r.text());
  for (const auto* name : record_checks)
    BOOST_CHECK_MESSAGE(r.has_line(std::string("PASS  ") + name), "expected PASS  " << name << "\n"
                                                                                    << r.text());
  BOOST_CHECK_MESSAGE(r.has_line(std::string("PASS  ") + record_restart_check), r.text());
  for (const auto* name : queue_checks)
    BOOST_CHECK_MESSAGE(r.has_line(std::string("PASS  ") + name), "expected PASS  " << name << "\n"
                                                                                    << r.text());
  for (const auto* name : operator_checks)
    BOOST_CHECK_MESSAGE(r.has_line(std::string("PASS  ") + name), "expected PASS  " << name << "\n"
                                                                                    << r.text());
  for (const auto* name : lock_delay_checks)
    BOOST_CHECK_MESSAGE(r.has_line(std::string("PASS  ") + name), "expected PASS  " << name << "\n"
                                                                                    << r.text());
  for (const auto* name : semaphore_checks)
    BOOST_CHECK_MESSAGE(r.has_line(std::string("PASS  ") + name), "expected PASS  " << name << "\n"
                                                                                    << r.text());
  BOOST_CHECK(!r.has_line("FAIL"));
  BOOST_CHECK_MESSAGE(r.has_line("59 of 59 checks passed, 0 failed, 0 skipped"), r.text());
}

// A single etcd member that restart.sh kill -9s and starts again on the same ports and data directory.
restartable_server restartable_etcd(const temp_dir& data) {
  const auto peer = "http://127.0.0.1:" + std::to_string(ephemeral_port());
  return restartable_server(
      [&](unsigned short port) {
        const auto client = "http://127.0.0.1:" + std::to_string(port);
        return std::vector<std::string>{"/usr/bin/etcd",
                                        "--name",
                                        "m0",
                                        "--data-dir",
                                        (data.path() / "m0").string(),
                                        "--listen-client-urls",
                                        client,
                                        "--advertise-client-urls",
                                        client,
                                        "--listen-peer-urls",
                                        peer,
                                        "--initial-advertise-peer-urls",
                                        peer,
                                        "--initial-cluster",
                                        "m0=" + peer};
      },
      "/health");
}

// Run before the runs against broken-lockd start, so the machine is quiet: about 20 s on an idle one.
BOOST_AUTO_TEST_CASE(etcd_backend_passes_every_lease_check_across_a_kill_9) {
  temp_dir data;
  auto etcd = restartable_etcd(data);
  const auto url = "etcd://127.0.0.1:" + std::to_string(etcd.port());
  const auto started = std::chrono::steady_clock::now();
  auto r = run_baton({"conformance", "--server", url, "--restart-command", etcd.restart_command()});
  const auto log = etcd.log();
  BOOST_TEST_MESSAGE("etcd (" << (std::chrono::steady_clock::now() - started) / 1s << " s):\n"
                              << r.text() << "\nthe end of etcd's log:\n"
                              << log.substr(log.size() > 4000 ? log.size() - 4000 : 0));
  BOOST_CHECK_EQUAL(r.code, 0);
  for (const auto* name : lease_checks)
    BOOST_CHECK_MESSAGE(r.has_line(std::string("PASS  ") + name), "expected PASS  " << name << "\n"
                                                                                    << r.text());
  for (const auto* name : restart_checks)
    BOOST_CHECK_MESSAGE(r.has_line(std::string("PASS  ") + name), "expected PASS  " << name << "\n"
                                                                                    << r.text());
  // Skipped, never passed: statuses and bodies are not visible through a backend.
  for (const auto* name : wire_checks)
    BOOST_CHECK_MESSAGE(r.has_line(std::string("SKIP  ") + name + ": not applicable to an etcd backend"),
                        r.text());
  BOOST_CHECK_MESSAGE(r.has_line("PASS  expiry frees the lock on time (freed "), r.text());
  // The batch through the backend's renew_batch: answers per entry are checked, a malformed body and the
  // batch's restart check are the HTTP protocol's and skipped.
  BOOST_CHECK_MESSAGE(r.has_line(std::string("PASS  ") + batch_checks[0]), r.text());
  BOOST_CHECK_MESSAGE(r.has_line(std::string("PASS  ") + batch_checks[1]), r.text());
  BOOST_CHECK_MESSAGE(
      r.has_line(std::string("SKIP  ") + batch_checks[2] + ": not applicable to an etcd backend"), r.text());
  BOOST_CHECK_MESSAGE(
      r.has_line(std::string("SKIP  ") + batch_restart_check + ": not applicable to an etcd backend"),
      r.text());
  // Proclaim through the backend (a txn under the key's own etcd lease), kept through the restart.
  for (const auto* name : proclaim_checks)
    BOOST_CHECK_MESSAGE(r.has_line(std::string("PASS  ") + name), "expected PASS  " << name << "\n"
                                                                                    << r.text());
  BOOST_CHECK_MESSAGE(r.has_line(std::string("PASS  ") + proclaim_restart_check), r.text());
  BOOST_CHECK_MESSAGE(
      r.has_line(std::string("SKIP  ") + proclaim_wire_check + ": not applicable to an etcd backend"),
      r.text());
  // The lock's record through the backend (its own key beside the locks' prefix), kept through the restart.
  for (const auto* name : record_checks)
    BOOST_CHECK_MESSAGE(r.has_line(std::string("PASS  ") + name), "expected PASS  " << name << "\n"
                                                                                    << r.text());
  BOOST_CHECK_MESSAGE(r.has_line(std::string("PASS  ") + record_restart_check), r.text());
  for (const auto* name : queue_checks)
    BOOST_CHECK_MESSAGE(
        r.has_line(std::string("SKIP  ") + name +
                   ": not applicable to an etcd backend: these checks read the HTTP queued acquire's "
                   "requests; on etcd the SDK waits in etcd's own Mutex line"),
        r.text());
  for (const auto* name : operator_checks)
    BOOST_CHECK_MESSAGE(
        r.has_line(std::string("SKIP  ") + name +
                   ": not applicable to an etcd backend: the listing and the break are batond's "
                   "routes; the etcd backend's are checked by its own tests"),
        r.text());
  // The etcd backend refuses a lock-delay (docs/design.md, "Lock-delay on etcd"): skipped, saying so.
  BOOST_CHECK_MESSAGE(r.has_line(std::string("SKIP  ") + lock_delay_checks[0] +
                                 ": lock-delay: invalid configuration (lock-delay is not supported by this "
                                 "backend (docs/protocol.md, \"Lock-delay\"))"),
                      r.text());
  // Semaphores through baton::backend::acquire_with: etcd keeps them; the listing is batond's route.
  for (int i = 0; i < 4; ++i)
    BOOST_CHECK_MESSAGE(r.has_line(std::string("PASS  ") + semaphore_checks[i]), r.text());
  BOOST_CHECK_MESSAGE(r.has_line("38 of 59 checks passed, 0 failed, 21 skipped against " + url), r.text());
}

BOOST_AUTO_TEST_CASE(without_restart_command_the_restart_checks_are_skipped_not_passed) {
  const auto& r = broken_result("v1-core");
  BOOST_CHECK_MESSAGE(r.code == 0, r.text());
  for (const auto* name : restart_checks)
    BOOST_CHECK_MESSAGE(r.has_line(std::string("SKIP  ") + name + ": no --restart-command"), r.text());
  // Those of optional features too: the missing command is said first.
  for (const auto* name : {batch_restart_check, proclaim_restart_check, record_restart_check})
    BOOST_CHECK_MESSAGE(r.has_line(std::string("SKIP  ") + name + ": no --restart-command"), r.text());
}

// docs/protocol.md, "Versions and features": a server without GET /v1/capabilities is version 1 with no
// optional features, so a server that follows the core alone is conformant. Each optional feature's checks
// are skipped as not advertised, never failed (this server keeps no values) nor passed, and the summary says
// why. Shares the run of the test above: no time of its own.
BOOST_AUTO_TEST_CASE(a_version_1_server_without_capabilities_passes_with_the_optional_checks_skipped) {
  const auto& r = broken_result("v1-core");
  BOOST_CHECK_MESSAGE(r.code == 0, r.text());
  BOOST_CHECK_MESSAGE(!r.has_line("FAIL"), r.text());
  const std::string value_check = "a lease's value is published, replaced and kept";
  std::vector<std::string> core(std::begin(lease_checks), std::end(lease_checks));
  core.insert(core.end(), std::begin(wire_checks), std::end(wire_checks));
  for (const auto& name : core)
    if (name != value_check && name != "capabilities")
      BOOST_CHECK_MESSAGE(r.has_line("PASS  " + name), "expected PASS  " << name << "\n" << r.text());
  const auto not_advertised = [&](const std::string& name, const std::string& feature) {
    BOOST_CHECK_MESSAGE(
        r.has_line("SKIP  " + name + ": not advertised: " + feature +
                   " (GET /v1/capabilities is 404: protocol version 1, no optional features)"),
        "expected SKIP  " << name << ": not advertised: " << feature << "\n"
                          << r.text());
  };
  not_advertised(value_check, "lease_values");
  BOOST_CHECK_MESSAGE(r.has_line("SKIP  capabilities: not advertised"), r.text());
  for (const auto* name : batch_checks)
    not_advertised(name, "renew_batch");
  for (const auto* name : proclaim_checks)
    not_advertised(name, "proclaim");
  not_advertised(proclaim_wire_check, "proclaim");
  for (const auto* name : record_checks)
    not_advertised(name, "lock_record");
  for (const auto* name : queue_checks)
    not_advertised(name, "acquire_queue");
  not_advertised(operator_checks[0], "list_locks");
  not_advertised(operator_checks[1], "break_lease");
  for (const auto* name : lock_delay_checks)
    not_advertised(name, "lock_delay");
  for (const auto* name : semaphore_checks)
    not_advertised(name, "semaphores");
  BOOST_CHECK_MESSAGE(
      r.has_line("skipped: 27 not advertised (lease_values, capabilities, renew_batch, "
                 "proclaim, lock_record, acquire_queue, list_locks, break_lease, lock_delay, semaphores), "
                 "6 no --restart-command"),
      r.text());
  BOOST_CHECK_MESSAGE(r.out.size() >= 2 &&
                          r.out.back().rfind("26 of 59 checks passed, 0 failed, 33 skipped against ", 0) == 0,
                      r.text());
}

BOOST_AUTO_TEST_CASE(broken_lockd_without_a_bug_passes_with_capabilities_and_a_restart) {
  const auto& r = broken_result("none+capabilities+restart");
  BOOST_CHECK_MESSAGE(r.code == 0, r.text());
  // lease_values is exercised by its own check; a feature this baton does not know is named, not failed.
  BOOST_CHECK_MESSAGE(
      r.has_line(
          "PASS  capabilities (protocol_version 1; checked: lease_values, renew_batch, acquire_queue; not "
          "known to this baton, not checked: batch_renew)"),
      r.text());
  for (const auto* name : batch_checks)
    BOOST_CHECK_MESSAGE(r.has_line(std::string("PASS  ") + name), "expected PASS  " << name << "\n"
                                                                                    << r.text());
  BOOST_CHECK_MESSAGE(r.has_line(std::string("PASS  ") + batch_restart_check), r.text());
  BOOST_CHECK_MESSAGE(
      r.has_line(std::string("SKIP  ") + proclaim_restart_check +
                 ": not advertised: proclaim is not among the features of GET /v1/capabilities"),
      r.text());
  BOOST_CHECK_MESSAGE(
      r.has_line(std::string("SKIP  ") + record_restart_check + ": not advertised: lock_record"), r.text());
  // Its queue (a server that is not batond) passes the queued-acquire checks.
  for (const auto* name : queue_checks)
    BOOST_CHECK_MESSAGE(r.has_line(std::string("PASS  ") + name), "expected PASS  " << name << "\n"
                                                                                    << r.text());
  BOOST_CHECK_MESSAGE(r.has_line("40 of 59 checks passed, 0 failed, 19 skipped"), r.text());
}

BOOST_AUTO_TEST_CASE(malformed_capabilities_are_caught) {
  expect_failure("bad-capabilities", {"capabilities"});
}

BOOST_AUTO_TEST_CASE(a_restart_command_that_does_not_restart_fails_the_restart_checks) {
  const auto& r = broken_result(lifo_run);
  BOOST_CHECK_EQUAL(r.code, check_failed);
  for (const auto* name : restart_checks)
    BOOST_CHECK_MESSAGE(r.has_line(std::string("FAIL  ") + name + ": restart: the server was not restarted"),
                        r.text());
}

// docs/protocol.md, "queued acquire": first come, first served. A server that serves its latest waiter first
// fails the order check, and only it: the others hold with one waiter at a time or do not judge the order.
BOOST_AUTO_TEST_CASE(a_queue_served_last_in_first_out_is_caught) {
  expect_failure(lifo_run, {queue_checks[0]});
  const auto& r = broken_result(lifo_run);
  BOOST_CHECK_MESSAGE(r.has_line(std::string("FAIL  ") + queue_checks[0] +
                                 ": the lock went to waiter-3, waiter-2, waiter-1, in that order"),
                      r.text());
  for (const auto* name : queue_checks)
    if (name != queue_checks[0])
      BOOST_CHECK_MESSAGE(r.has_line(std::string("PASS  ") + name), "expected PASS  " << name << "\n"
                                                                                      << r.text());
}

BOOST_AUTO_TEST_CASE(release_by_key_is_caught) {
  expect_failure("release-by-key", {"release is conditional on owner and token"});
}

BOOST_AUTO_TEST_CASE(release_with_a_superseded_token_is_caught) {
  expect_failure("release-old-token", {"a superseded token can neither renew nor release"});
}

BOOST_AUTO_TEST_CASE(counter_restarts_is_caught) {
  expect_failure("counter-restarts", {"tokens increase across release and expiry"});
}

BOOST_AUTO_TEST_CASE(token_counter_not_kept_across_a_restart_is_caught) {
  expect_failure("tokens-not-kept", {"restart: new tokens are larger than every token before"});
  const auto& r = broken_result("tokens-not-kept");
  BOOST_CHECK_MESSAGE(r.has_line("PASS  restart: a held lease keeps its owner and token"), r.text());
  BOOST_CHECK_MESSAGE(r.has_line("PASS  restart: a released lock stays released"), r.text());
}

BOOST_AUTO_TEST_CASE(no_expiry_is_caught) {
  expect_failure("no-expiry", {"expiry frees the lock on time", "renew is refused for an expired lease",
                               "long-poll answers within 250 ms of an expiry"});
}

BOOST_AUTO_TEST_CASE(expiry_40_ms_early_is_caught) {
  expect_failure("early-expiry-40ms", {"a lease is held for its TTL from the acquire's sending"});
}

BOOST_AUTO_TEST_CASE(expiry_15_ms_early_is_caught) {
  expect_failure("early-expiry-15ms", {"a lease is held for its TTL from the acquire's sending"});
}

BOOST_AUTO_TEST_CASE(renew_that_does_not_extend_is_caught) {
  expect_failure("renew-no-extend", {"renew extends the lease past its first TTL"});
}

BOOST_AUTO_TEST_CASE(a_ttl_that_wraps_past_35_minutes_is_caught) {
  expect_failure("ttl-32bit-us", {"a 1-hour lease is held"});
}

BOOST_AUTO_TEST_CASE(reacquire_keeping_the_old_expiry_is_caught) {
  expect_failure("reacquire-keeps-expiry", {"same-owner re-acquire sets a new expiry"});
}

BOOST_AUTO_TEST_CASE(a_renew_that_shortens_a_lease_is_caught) {
  expect_failure("renew-shortens", {"a shorter renew or re-acquire does not shorten a lease"});
}

BOOST_AUTO_TEST_CASE(long_poll_ignoring_its_token_is_caught) {
  expect_failure("poll-ignores-token", {"long-poll with a stale token answers at once"});
}

BOOST_AUTO_TEST_CASE(long_poll_by_a_5_s_polling_loop_is_caught) {
  expect_failure("poll-every-5s", {"long-poll answers within 250 ms of a release",
                                   "long-poll answers within 250 ms of an expiry"});
}

BOOST_AUTO_TEST_CASE(racy_acquire_is_caught) {
  expect_failure("racy-acquire", {"concurrent acquires have one winner"});
}

BOOST_AUTO_TEST_CASE(a_server_advertising_values_it_does_not_keep_is_caught) {
  expect_failure("no-value", {"a lease's value is published, replaced and kept"});
}

BOOST_AUTO_TEST_CASE(a_server_advertising_a_lock_delay_it_does_not_keep_is_caught) {
  expect_failure("no-value", {lock_delay_checks[0], lock_delay_checks[1]});
  BOOST_CHECK_MESSAGE(
      broken_result("no-value").has_line(std::string("FAIL  ") + lock_delay_checks[0] + ": acquire by b "),
      broken_result("no-value").text());
}

BOOST_AUTO_TEST_CASE(a_batch_renewal_that_ignores_tokens_is_caught) {
  expect_failure("batch-ignores-token", {"renew batch: a superseded token is refused",
                                         "renew batch: each entry is answered as a single renew"});
  // The single renew is right: only the batch is broken.
  BOOST_CHECK_MESSAGE(
      broken_result("batch-ignores-token").has_line("PASS  a superseded token can neither renew nor release"),
      broken_result("batch-ignores-token").text());
}

BOOST_AUTO_TEST_CASE(unreachable_server_is_69) {
  // A port from a server that has gone: nothing listens there any more.
  std::string url;
  {
    broken_server gone("none");
    url = gone.url;
  }
  auto r = run_baton({"conformance", "--server", url});
  BOOST_CHECK_EQUAL(r.code, unavailable);
  BOOST_CHECK(r.out.empty());
}

BOOST_AUTO_TEST_CASE(unreachable_etcd_is_69) {
  auto r = run_baton({"conformance", "--server", "etcd://127.0.0.1:" + std::to_string(ephemeral_port())});
  BOOST_CHECK_EQUAL(r.code, unavailable);
  BOOST_CHECK(r.out.empty());
}

BOOST_AUTO_TEST_CASE(conformance_takes_no_key) {
  auto r = run_baton({"conformance", "some-key", "--server", "http://127.0.0.1:1"});
  BOOST_CHECK_EQUAL(r.code, usage);
}

BOOST_AUTO_TEST_CASE(a_batond_that_requires_tokens_is_checked_with_token_file_and_refused_clearly_without) {
  temp_dir data, scratch;
  const auto tokens = scratch.path() / "tokens";
  std::ofstream(tokens) << hash_of("conformance-token") << " checker rw:conformance/\n"
                        << hash_of("elsewhere-token") << " elsewhere rw:jobs/\n";
  const auto good = scratch.path() / "good", other = scratch.path() / "other";
  std::ofstream(good) << "conformance-token\n";
  std::ofstream(other) << "elsewhere-token\n";
  batond_process server(data.path(), {"--tokens-file", tokens.string()});

  auto none = run_baton({"conformance", "--server", server.url()});
  BOOST_CHECK_EQUAL(none.code, 78);
  BOOST_CHECK(none.out.empty());
  BOOST_TEST(contains(none.err, "requires a bearer token (401"), none.err);
  BOOST_TEST(contains(none.err, "--token-file"), none.err);

  auto scoped = run_baton({"conformance", "--server", server.url(), "--token-file", other.string()});
  BOOST_CHECK_EQUAL(scoped.code, 78);
  BOOST_TEST(contains(scoped.err, "may not use keys under conformance/ (403"), scoped.err);

  BOOST_TEST(first_line({"conformance", "--server", server.url(), "--token-file", good.string()}) ==
             first_check);
}

BOOST_AUTO_TEST_CASE(an_https_batond_is_checked_with_ca_file_and_refused_clearly_without) {
  const auto& pki = test_pki::shared();
  temp_dir data;
  batond_process server(data.path(), pki.batond_args());
  const auto url = "https://127.0.0.1:" + std::to_string(server.port());

  // Without --ca-file the system store decides, and it does not know the test CA.
  auto untrusted = run_baton({"conformance", "--server", url});
  BOOST_CHECK_EQUAL(untrusted.code, unavailable);
  BOOST_CHECK(untrusted.out.empty());
  BOOST_TEST(contains(untrusted.err, "is not trusted"), untrusted.err);

  auto missing = run_baton({"conformance", "--server", url, "--ca-file", "/nonexistent.pem"});
  BOOST_CHECK_EQUAL(missing.code, usage);
  BOOST_TEST(contains(missing.err, "/nonexistent.pem"), missing.err);

  BOOST_TEST(first_line({"conformance", "--server", url, "--ca-file", pki.ca()}) == first_check);
}
