// SPDX-License-Identifier: Apache-2.0
// The simulated file system's model of a disk (sim_storage.hpp): what a kill -9 and a power cut keep.
#define BOOST_TEST_MODULE sim_storage
#include <boost/test/unit_test.hpp>

#include "sim_storage.hpp"

#include <cerrno>

using baton::sim::rng;
using baton::sim::sim_storage;

namespace {

std::string read(sim_storage& fs, const std::string& name) {
  std::string out;
  BOOST_TEST_REQUIRE(fs.read(name, out) == 0);
  return out;
}

bool exists(sim_storage& fs, const std::string& name) {
  std::string out;
  return fs.read(name, out) == 0;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_kill_keeps_the_page_cache_and_a_power_cut_keeps_only_what_was_synced) {
  rng r(1);
  sim_storage fs(r, "data");
  int a = fs.open("a", false);
  BOOST_TEST(fs.write(a, "synced") == 0);
  BOOST_TEST(fs.sync_data(a) == 0);
  BOOST_TEST(fs.sync_dir() == 0);
  BOOST_TEST(fs.write(a, "+cached") == 0);
  int b = fs.open("b", false);
  BOOST_TEST(fs.write(b, "b") == 0);
  BOOST_TEST(fs.sync_data(b) == 0);  // its contents are durable, its name is not

  fs.kill();
  BOOST_TEST(read(fs, "a") == "synced+cached");
  BOOST_TEST(read(fs, "b") == "b");

  fs.power_cut(/*keep_some=*/false);
  BOOST_TEST(read(fs, "a") == "synced");
  BOOST_TEST(!exists(fs, "b"));
}

BOOST_AUTO_TEST_CASE(a_name_change_lasts_a_power_cut_once_the_directory_is_synced) {
  rng r(2);
  sim_storage fs(r, "data");
  int t = fs.open("tmp", true);
  BOOST_TEST(fs.write(t, "new") == 0);
  BOOST_TEST(fs.sync(t) == 0);
  BOOST_TEST(fs.rename("tmp", "snapshot") == 0);
  fs.power_cut(false);
  BOOST_TEST(!exists(fs, "snapshot"));
  BOOST_TEST(!exists(fs, "tmp"));  // its creation was never synced either

  t = fs.open("tmp", true);
  BOOST_TEST(fs.write(t, "new") == 0);
  BOOST_TEST(fs.sync(t) == 0);
  BOOST_TEST(fs.rename("tmp", "snapshot") == 0);
  BOOST_TEST(fs.sync_dir() == 0);
  BOOST_TEST(fs.remove("snapshot") == 0);  // not synced: comes back
  fs.power_cut(false);
  BOOST_TEST(read(fs, "snapshot") == "new");
  BOOST_TEST(!exists(fs, "tmp"));
}

BOOST_AUTO_TEST_CASE(a_power_cut_that_keeps_some_keeps_a_prefix_of_the_name_changes_and_whole_sectors) {
  // Over many seeds: every kept set of names is a prefix of the changes made, and every kept file is the
  // synced part followed by sectors of what was written (zeros where one was lost).
  int kept_some = 0, kept_none = 0;
  for (std::uint64_t seed = 1; seed <= 200; ++seed) {
    rng r(seed);
    sim_storage fs(r, "data");
    int a = fs.open("a", false);
    BOOST_TEST(fs.write(a, std::string(100, 's')) == 0);
    BOOST_TEST(fs.sync_data(a) == 0);
    BOOST_TEST(fs.sync_dir() == 0);
    const std::string tail(2000, 'x');
    BOOST_TEST(fs.write(a, tail) == 0);
    fs.close(fs.open("n1", false));
    fs.close(fs.open("n2", false));
    fs.close(fs.open("n3", false));
    fs.power_cut(/*keep_some=*/true);
    const bool n1 = exists(fs, "n1"), n2 = exists(fs, "n2"), n3 = exists(fs, "n3");
    BOOST_TEST((n1 || !n2));
    BOOST_TEST((n2 || !n3));
    const auto got = read(fs, "a");
    BOOST_TEST_REQUIRE(got.size() >= 100u);
    BOOST_TEST(got.substr(0, 100) == std::string(100, 's'));
    for (std::size_t i = 100; i < got.size(); ++i)
      BOOST_TEST_REQUIRE((got[i] == 'x' || got[i] == '\0'));
    (got.size() > 100 ? kept_some : kept_none)++;
  }
  BOOST_TEST(kept_some > 0);
  BOOST_TEST(kept_none > 0);
}

BOOST_AUTO_TEST_CASE(a_process_that_dies_inside_a_call_changes_nothing_after_it) {
  rng r(3);
  sim_storage fs(r, "data");
  int a = fs.open("a", false);
  fs.die_at_call(2);  // the write is call 1, the sync call 2
  BOOST_TEST(fs.write(a, "abc") == 0);
  BOOST_TEST(fs.sync_data(a) == EIO);
  BOOST_TEST(fs.dead());
  BOOST_TEST(fs.rename("a", "b") == EIO);
  fs.kill();
  BOOST_TEST(read(fs, "a") == "abc");
  BOOST_TEST(!exists(fs, "b"));
  fs.power_cut(false);
  BOOST_TEST(!exists(fs, "a"));
}

BOOST_AUTO_TEST_CASE(the_planted_defect_drops_only_a_start_s_directory_sync_when_the_start_changed_no_log) {
  rng r(4);
  sim_storage fs(r, "data");
  fs.skip_start_dir_sync(true);
  fs.close(fs.open("wal-0000000000000001.log", false));
  fs.start_begins();  // a start that finds the log and creates none
  BOOST_TEST(fs.sync_dir() == 0);
  fs.start_ends();
  fs.power_cut(false);
  BOOST_TEST(!exists(fs, "wal-0000000000000001.log"));

  fs.close(fs.open("wal-0000000000000001.log", false));
  BOOST_TEST(fs.sync_dir() == 0);  // outside a start: synced
  fs.power_cut(false);
  BOOST_TEST(exists(fs, "wal-0000000000000001.log"));
}
