// SPDX-License-Identifier: Apache-2.0
// baton-faultfs (tests/faultfs) on its own: each mode, applied to small shell commands run with the library
// preloaded (dash, printf, sync and mv call write, fsync, fdatasync and renameat2 through libc like batond).
#define BOOST_TEST_MODULE faultfs
#include <boost/test/unit_test.hpp>

#include "batond_fixture.hpp"
#include "storage_faults.hpp"
#include "wal_file.hpp"

#include <chrono>
#include <filesystem>
#include <thread>

using namespace baton::test;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

// A data directory with the injector on it, and a directory beside it that is never faulted.
struct fixture {
  temp_dir root;
  fs::path data = root.path() / "data";
  fs::path other = root.path() / "other";
  storage_faults faults{data};

  fixture() { fs::create_directories(other); }

  // Runs `script` under /bin/sh with the library preloaded; its exit status (-1: did not end in 30 s).
  int sh(const std::string& script) {
    child_process p({"/bin/sh", "-c", script}, (root.path() / "sh.err").string(), faults.environment());
    return p.wait(30s);
  }
  std::string err() { return file_bytes(root.path() / "sh.err"); }
};

}  // namespace

BOOST_FIXTURE_TEST_CASE(none_lets_everything_through, fixture) {
  BOOST_TEST(sh("printf x > " + (data / "f").string() + " && sync " + (data / "f").string()) == 0);
  BOOST_TEST(file_bytes(data / "f") == "x");
}

BOOST_FIXTURE_TEST_CASE(enospc_fails_writes_under_the_directory_only, fixture) {
  faults.set("enospc");
  BOOST_TEST(sh("printf x > " + (data / "f").string()) != 0);
  BOOST_TEST(err().find("failed with ENOSPC") != std::string::npos);
  BOOST_TEST(file_bytes(data / "f").empty());
  BOOST_TEST(sh("printf x > " + (other / "f").string()) == 0);
  BOOST_TEST(file_bytes(other / "f") == "x");
}

BOOST_FIXTURE_TEST_CASE(eio_write_fails_writes_and_lets_syncs_through, fixture) {
  BOOST_TEST(sh("printf x > " + (data / "f").string()) == 0);
  faults.set("eio-write");
  BOOST_TEST(sh("printf y >> " + (data / "f").string()) != 0);
  BOOST_TEST(sh("sync " + (data / "f").string()) == 0);
  BOOST_TEST(file_bytes(data / "f") == "x");
}

BOOST_FIXTURE_TEST_CASE(eio_fsync_fails_fsync_and_fdatasync_after_a_successful_write, fixture) {
  faults.set("eio-fsync");
  const auto f = (data / "f").string();
  BOOST_TEST(sh("printf x > " + f) == 0);
  BOOST_TEST(sh("sync " + f) != 0);     // fsync
  BOOST_TEST(sh("sync -d " + f) != 0);  // fdatasync
  BOOST_TEST(sh("printf x > " + (other / "f").string() + " && sync " + (other / "f").string()) == 0);
  BOOST_TEST(file_bytes(data / "f") == "x");
}

BOOST_FIXTURE_TEST_CASE(once_fails_the_first_matching_call_only, fixture) {
  faults.set("enospc once");
  BOOST_TEST(sh("printf a > " + (data / "a").string() + "; printf b > " + (data / "b").string()) == 0);
  BOOST_TEST(file_bytes(data / "a").empty());
  BOOST_TEST(file_bytes(data / "b") == "b");
}

BOOST_FIXTURE_TEST_CASE(eio_rename_fails_renames_into_the_directory, fixture) {
  BOOST_TEST(sh("printf x > " + (data / "a").string()) == 0);
  faults.set("eio-rename");
  BOOST_TEST(sh("mv " + (data / "a").string() + " " + (data / "b").string()) != 0);
  BOOST_TEST(fs::exists(data / "a"));
  BOOST_TEST(!fs::exists(data / "b"));
}

BOOST_FIXTURE_TEST_CASE(kill_before_rename_dies_with_the_snapshot_not_in_place, fixture) {
  BOOST_TEST(sh("printf x > " + (data / "snapshot.tmp").string()) == 0);
  faults.set("kill-before-rename");
  // Relative to the working directory, as renameat resolves it.
  BOOST_TEST(sh("cd " + data.string() + " && mv snapshot.tmp snapshot") == 128 + 9);
  BOOST_TEST(fs::exists(data / "snapshot.tmp"));
  BOOST_TEST(!fs::exists(data / "snapshot"));
  // Other names are renamed as usual.
  BOOST_TEST(sh("mv " + (data / "snapshot.tmp").string() + " " + (data / "other").string()) == 0);
}

BOOST_FIXTURE_TEST_CASE(kill_after_rename_dies_with_the_snapshot_in_place, fixture) {
  BOOST_TEST(sh("printf x > " + (data / "snapshot.tmp").string()) == 0);
  faults.set("kill-after-rename");
  BOOST_TEST(sh("mv " + (data / "snapshot.tmp").string() + " " + (data / "snapshot").string()) == 128 + 9);
  BOOST_TEST(!fs::exists(data / "snapshot.tmp"));
  BOOST_TEST(file_bytes(data / "snapshot") == "x");
}

BOOST_FIXTURE_TEST_CASE(a_stall_holds_writes_until_the_mode_changes, fixture) {
  faults.set("stall");
  child_process p({"/bin/sh", "-c", "printf x > " + (data / "f").string() + " && echo written"},
                  (root.path() / "sh.err").string(), faults.environment());
  std::this_thread::sleep_for(500ms);
  BOOST_TEST(p.running());
  BOOST_TEST(file_bytes(data / "f").empty());
  faults.set("none");
  BOOST_TEST(p.read_line(30s) == "written");
  BOOST_TEST(p.wait(30s) == 0);
  BOOST_TEST(file_bytes(data / "f") == "x");
}

BOOST_FIXTURE_TEST_CASE(an_unknown_mode_is_reported_and_injects_nothing, fixture) {
  faults.set("eio-everything");
  BOOST_TEST(sh("printf x > " + (data / "f").string()) == 0);
  BOOST_TEST(err().find("unknown mode 'eio-everything'") != std::string::npos);
}
