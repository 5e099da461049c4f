// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE lease_clock
#include <boost/test/unit_test.hpp>

// A lease's local deadline must be kept on CLOCK_BOOTTIME, which counts the time a host spends suspended
// (baton/lease_state.hpp). On a host that never suspended CLOCK_BOOTTIME and CLOCK_MONOTONIC read the same,
// so comparing readings cannot tell a regression to steady_clock from the right clock. This program defines
// clock_gettime itself, which every call in the process then reaches (the program's own definition comes
// before libc's, for the SDK's code and for libstdc++'s steady_clock alike), and records which clock each
// call reads.

#include "baton/lease_state.hpp"

#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <vector>

namespace {

bool recording = false;
std::vector<clockid_t> clocks_read;  // while recording; the tests run on one thread

}  // namespace

extern "C" int clock_gettime(clockid_t id, timespec* ts) noexcept {
  if (recording) clocks_read.push_back(id);
  return static_cast<int>(::syscall(SYS_clock_gettime, id, ts));
}

namespace {

// The clocks `f` reads, in order.
template <class F>
std::vector<clockid_t> clocks_read_by(F f) {
  clocks_read.clear();
  recording = true;
  f();
  recording = false;
  return clocks_read;
}

}  // namespace

BOOST_AUTO_TEST_CASE(lease_deadlines_run_on_the_clock_that_counts_suspend_time) {
  const auto read = clocks_read_by([] { (void)baton::lease_clock::now(); });
  BOOST_TEST(read == std::vector<clockid_t>{CLOCK_BOOTTIME});
}

// The check above can fail: steady_clock reads another clock, and the replacement sees it.
BOOST_AUTO_TEST_CASE(the_replacement_sees_a_read_of_the_clock_that_stops_in_a_suspend) {
  const auto read = clocks_read_by([] { (void)std::chrono::steady_clock::now(); });
  BOOST_TEST(read == std::vector<clockid_t>{CLOCK_MONOTONIC});
}

BOOST_AUTO_TEST_CASE(lease_clock_reads_the_boot_clock_and_is_never_behind_the_monotonic_one) {
  timespec boot{}, mono{};
  const auto before = baton::lease_clock::now();
  ::clock_gettime(CLOCK_BOOTTIME, &boot);
  ::clock_gettime(CLOCK_MONOTONIC, &mono);
  const auto after = baton::lease_clock::now();
  using std::chrono::nanoseconds, std::chrono::seconds;
  const auto boot_ns = seconds(boot.tv_sec) + nanoseconds(boot.tv_nsec);
  BOOST_TEST((before.time_since_epoch() <= boot_ns && boot_ns <= after.time_since_epoch()));
  // CLOCK_BOOTTIME = CLOCK_MONOTONIC + time suspended: never behind it.
  BOOST_TEST((boot_ns >= seconds(mono.tv_sec) + nanoseconds(mono.tv_nsec) - std::chrono::milliseconds(1)));
}
