#define BOOST_TEST_MODULE examples
#include <boost/test/unit_test.hpp>

// The SDK examples run as users run them: real processes against a real batond and fenced-store.

#include "batond_fixture.hpp"

#include <signal.h>

#include <thread>

using namespace baton::test;
using namespace std::chrono_literals;

namespace {

std::string start_store(std::unique_ptr<child_process>& store) {
  store = std::make_unique<child_process>(std::vector<std::string>{bin_path("fenced-store"), "--listen", "127.0.0.1:0"});
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

BOOST_AUTO_TEST_CASE(long_job_finishes_under_a_valid_lease) {
  temp_dir dir;
  batond_process server(dir.path());
  child_process job({bin_path("baton-example-long-job"), "--server", server.url(), "--steps", "3", "--step-ms", "50"});
  BOOST_TEST(job.wait(120s) == 0);
  BOOST_TEST(server.client().get("/v1/locks/long-job").status == 404);  // released at the end
}

BOOST_AUTO_TEST_CASE(long_job_stops_when_the_lock_server_freezes) {
  temp_dir dir;
  batond_process server(dir.path());
  child_process job({bin_path("baton-example-long-job"), "--server", server.url(), "--ttl-ms", "2000", "--steps",
                     "100000", "--step-ms", "100"});
  BOOST_REQUIRE(job.read_line(60s).find("acquired") != std::string::npos);
  server.process().signal(SIGSTOP);
  int status = job.wait(120s);
  server.process().signal(SIGCONT);
  BOOST_TEST(status == 3);  // lease lost: the job was cancelled and stopped
}
