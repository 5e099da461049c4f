#define BOOST_TEST_MODULE conformance
#include <boost/test/unit_test.hpp>

#include "batond_fixture.hpp"

#include <stdlib.h>

#include <algorithm>
#include <fstream>
#include <memory>
#include <sstream>

using namespace baton::test;
using namespace std::chrono_literals;

namespace {

// Exit statuses documented in docs/cli.md.
constexpr int usage = 64;
constexpr int unavailable = 69;
constexpr int check_failed = 70;

// A run takes seconds on an idle machine (a broken server's failing checks wait out their bounds);
// generous for a loaded 2-core one.
constexpr auto run_bound = 240s;

struct result {
  int code = -1;
  std::vector<std::string> out;
  std::string err;
  std::string text() const {
    std::string t;
    for (auto& l : out) t += l + "\n";
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
    while (std::chrono::steady_clock::now() < until) r.out.push_back(p.read_line(run_bound));
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
  explicit broken_server(const std::string& bug) {
    proc = std::make_unique<child_process>(
        std::vector<std::string>{bin_path("broken-lockd"), "--listen", "127.0.0.1:0", "--bug", bug});
    auto line = proc->read_line(30s);
    const std::string prefix = "broken-lockd listening on ";
    if (line.rfind(prefix, 0) != 0) throw std::runtime_error("unexpected first line: " + line);
    url = "http://" + line.substr(prefix.size());
  }
};

const char* const all_checks[] = {
    "concurrent acquires have one winner",
    "acquire while held is refused naming the holder",
    "same-owner re-acquire gets a larger token",
    "renew is refused for a wrong owner",
    "renew is refused for a wrong token",
    "renew is refused for an expired lease",
    "release is conditional on owner and token",
    "release is idempotent",
    "tokens increase across release and expiry",
    "expiry frees the lock on time",
    "long-poll wakes on release",
    "long-poll wakes on expiry",
    "a lease's value is published, replaced and kept",
    "malformed JSON is 400 bad_request",
    "missing field is 400 bad_request",
    "ttl out of range is 400 bad_request",
    "unknown route is 404 not_found",
    "wrong method is 405 method_not_allowed",
    "body over 64 KiB is 413 body_too_large",
    "server still serves after bad inputs",
};

void expect_only_failure(const std::string& bug, std::vector<std::string> failing) {
  broken_server server(bug);
  auto r = run_baton({"conformance", "--server", server.url});
  BOOST_TEST_MESSAGE("--bug " << bug << ":\n" << r.text());
  BOOST_CHECK_EQUAL(r.code, check_failed);
  for (const auto* name : all_checks) {
    const bool should_fail = std::find(failing.begin(), failing.end(), name) != failing.end();
    if (should_fail)
      BOOST_CHECK_MESSAGE(r.has_line(std::string("FAIL  ") + name + ": "), bug << ": expected FAIL  " << name);
  }
  // The bad-input checks do not depend on the bug: the server is otherwise conformant.
  BOOST_CHECK_MESSAGE(r.has_line("PASS  malformed JSON is 400 bad_request"), r.text());
  BOOST_CHECK_MESSAGE(r.has_line("PASS  acquire while held is refused naming the holder"), r.text());
}

}  // namespace

BOOST_AUTO_TEST_CASE(batond_passes_every_check) {
  temp_dir data;
  batond_process server(data.path());
  auto r = run_baton({"conformance", "--server", server.url()});
  BOOST_TEST_MESSAGE("batond:\n" << r.text());
  BOOST_CHECK_EQUAL(r.code, 0);
  for (const auto* name : all_checks)
    BOOST_CHECK_MESSAGE(r.has_line(std::string("PASS  ") + name), "expected PASS  " << name << "\n" << r.text());
  BOOST_CHECK(!r.has_line("FAIL"));
  BOOST_CHECK_MESSAGE(r.has_line("20 of 20 checks passed"), r.text());
}

BOOST_AUTO_TEST_CASE(broken_lockd_without_a_bug_passes) {
  broken_server server("none");
  auto r = run_baton({"conformance", "--server", server.url});
  BOOST_CHECK_MESSAGE(r.code == 0, r.text());
}

BOOST_AUTO_TEST_CASE(release_by_key_is_caught) {
  expect_only_failure("release-by-key", {"release is conditional on owner and token"});
}

BOOST_AUTO_TEST_CASE(counter_restarts_is_caught) {
  expect_only_failure("counter-restarts", {"tokens increase across release and expiry"});
}

BOOST_AUTO_TEST_CASE(no_expiry_is_caught) {
  expect_only_failure("no-expiry", {"expiry frees the lock on time", "renew is refused for an expired lease",
                                    "long-poll wakes on expiry"});
}

BOOST_AUTO_TEST_CASE(racy_acquire_is_caught) {
  expect_only_failure("racy-acquire", {"concurrent acquires have one winner"});
}

BOOST_AUTO_TEST_CASE(a_server_without_values_is_caught) {
  expect_only_failure("no-value", {"a lease's value is published, replaced and kept"});
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

BOOST_AUTO_TEST_CASE(conformance_takes_no_key) {
  auto r = run_baton({"conformance", "some-key", "--server", "http://127.0.0.1:1"});
  BOOST_CHECK_EQUAL(r.code, usage);
}
