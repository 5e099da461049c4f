// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE examples
#include <boost/test/unit_test.hpp>

// The SDK examples run as users run them: real processes against a real batond and fenced-store.

#include "batond_fixture.hpp"

#include <signal.h>

#include <algorithm>
#include <thread>

using namespace baton::test;
using namespace std::chrono_literals;

namespace {

std::string start_store(std::unique_ptr<child_process>& store) {
  store = std::make_unique<child_process>(
      std::vector<std::string>{bin_path("fenced-store"), "--listen", "127.0.0.1:0"});
  auto line = store->read_line(30s);
  const std::string prefix = "fenced-store listening on ";
  BOOST_REQUIRE(line.rfind(prefix, 0) == 0);
  return "http://" + line.substr(prefix.size());
}

}  // namespace

BOOST_AUTO_TEST_CASE(stale_owner_write_after_a_new_token_is_rejected_by_the_fenced_store) {
  temp_dir dir;
  batond_process server(dir.path());
  std::unique_ptr<child_process> store;
  auto store_url = start_store(store);
  child_process example({bin_path("baton-example-timeline"), "--server", server.url(), "--store", store_url});
  // The example checks each step itself (stale write rejected, stale release refused) and exits 0 only then.
  BOOST_TEST(example.wait(120s) == 0);
}

BOOST_AUTO_TEST_CASE(the_api_example_runs_every_step_without_a_server) {
  // with_lock, the completion-token forms, cancellation and shutdown on baton::testing::memory_backend; it
  // checks each step itself and exits 0 only when all behaved.
  child_process example({bin_path("baton-example-api")});
  BOOST_TEST(example.wait(120s) == 0);
}

BOOST_AUTO_TEST_CASE(long_job_finishes_under_a_valid_lease) {
  temp_dir dir;
  batond_process server(dir.path());
  child_process job(
      {bin_path("baton-example-long-job"), "--server", server.url(), "--steps", "3", "--step-ms", "50"});
  BOOST_TEST(job.wait(120s) == 0);
  BOOST_TEST(server.client().get("/v1/locks/long-job").status == 404);  // released at the end
}

BOOST_AUTO_TEST_CASE(long_job_stops_when_the_lock_server_freezes) {
  temp_dir dir;
  batond_process server(dir.path());
  child_process job({bin_path("baton-example-long-job"), "--server", server.url(), "--ttl-ms", "2000",
                     "--steps", "100000", "--step-ms", "100"});
  BOOST_REQUIRE(job.read_line(60s).find("acquired") != std::string::npos);
  server.process().signal(SIGSTOP);
  int status = job.wait(120s);
  server.process().signal(SIGCONT);
  BOOST_TEST(status == 3);  // lease lost: the job was cancelled and stopped
}

BOOST_AUTO_TEST_CASE(election_the_follower_sees_the_leaders_address_and_is_elected_when_it_resigns) {
  temp_dir dir;
  batond_process server(dir.path());
  child_process a({bin_path("baton-example-election"), "--server", server.url(), "--address", "10.0.0.1:80",
                   "--lead-ms", "1500"});
  while (a.read_line(60s).rfind("elected", 0) != 0) {
  }
  child_process b({bin_path("baton-example-election"), "--server", server.url(), "--address", "10.0.0.2:80",
                   "--lead-ms", "100"});
  BOOST_TEST(b.read_line(60s).find("leader 10.0.0.1:80") == 0u);
  std::vector<std::string> lines;
  for (std::string line; line.find("resigned") == std::string::npos;)
    lines.push_back(line = b.read_line(60s));
  BOOST_TEST(a.wait(60s) == 0);
  BOOST_TEST(b.wait(60s) == 0);
  // b saw a step down, saw itself lead with its own address, and then led.
  auto at = [&](const std::string& prefix) {
    return std::find_if(lines.begin(), lines.end(), [&](auto& l) { return l.rfind(prefix, 0) == 0; }) -
           lines.begin();
  };
  BOOST_TEST(at("leader 10.0.0.2:80") < at("resigned"));
  BOOST_TEST(at("elected") < at("resigned"));
  BOOST_TEST(server.client().get("/v1/locks/services%2Fexample").status == 404);
}

// `--help` prints the flags and exits 0 without connecting anywhere: no server runs here, and an example
// that tried to reach its default server would block or fail instead.
BOOST_AUTO_TEST_CASE(every_example_prints_its_flags_on_help_and_exits_without_a_server) {
  temp_dir scratch;
  const std::vector<std::pair<std::string, std::vector<std::string>>> examples{
      {"baton-example-timeline", {"--server", "--store"}},
      {"baton-example-long-job", {"--server", "--key", "--ttl-ms", "--steps", "--step-ms"}},
      {"baton-example-election", {"--server", "--key", "--address", "--lead-ms"}},
      {"baton-example-api", {}},
      {"fenced-store", {"--listen", "--threads"}},
  };
  for (const auto& [name, flags] : examples) {
    BOOST_TEST_CONTEXT(name) {
      auto r = run_to_end({bin_path(name), "--help"}, (scratch.path() / (name + ".err")).string(), 10s);
      BOOST_TEST(r.code == 0);
      BOOST_TEST(r.out.find("usage: ") == 0u, r.out);
      BOOST_TEST(r.out.find("--help") != std::string::npos, r.out);
      for (const auto& flag : flags)
        BOOST_TEST(r.out.find(flag) != std::string::npos, flag);
    }
  }
  // An unknown flag is a usage error (exit 2), not a run against the default server.
  auto typo = run_to_end({bin_path("baton-example-long-job"), "--sever", "http://127.0.0.1:1"},
                         (scratch.path() / "typo.err").string(), 10s);
  BOOST_TEST(typo.code == 2);
  BOOST_TEST(typo.err.find("unknown flag --sever") != std::string::npos, typo.err);
}
