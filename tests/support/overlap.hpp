// SPDX-License-Identifier: Apache-2.0
#pragma once
// Test helper: measuring whether a command under a lease still ran after the next holder got the lock. The
// command appends the wall clock time to a file while it runs; the test notes when the next holder's acquire
// was answered, and compares once the command's group is gone.

#include "process.hpp"

#include <boost/test/unit_test.hpp>

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace baton::test {

/// Shell text that ignores SIGTERM (as a command busy shutting down gracefully would go on), writes its pid
/// (its process group's id, as the leader of the group) into `pid_file`, then appends the wall clock time in
/// nanoseconds to `stamps` every 50 ms until it is killed. No double quotes, so it fits in a YAML string.
inline std::string stamping_script(const std::filesystem::path& pid_file,
                                   const std::filesystem::path& stamps) {
  return "trap '' TERM; echo $$ > " + pid_file.string() + ".tmp && mv " + pid_file.string() + ".tmp " +
         pid_file.string() + "; while :; do date +%s%N >> " + stamps.string() + "; sleep 0.05; done";
}

/// The latest time written to `stamps`, in nanoseconds since the epoch (0 when none).
inline std::int64_t last_stamp(const std::filesystem::path& stamps) {
  std::ifstream in(stamps);
  std::int64_t latest = 0;
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && std::all_of(line.begin(), line.end(), [](char c) { return c >= '0' && c <= '9'; }))
      latest = std::max<std::int64_t>(latest, std::stoll(line));
  return latest;
}

/// The wall clock now, as stamping_script() writes it.
inline std::int64_t wall_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// Checks that nothing in `stamps` was written after `next_started` (wall_ns()), once the writer is gone.
inline void check_written_before(const std::filesystem::path& stamps, std::int64_t next_started) {
  const auto wrote = last_stamp(stamps);
  BOOST_TEST_MESSAGE("last write " << (next_started - wrote) / 1'000'000 << " ms before the next holder");
  BOOST_TEST(wrote <= next_started, "the first holder's command wrote "
                                        << (wrote - next_started) / 1'000'000
                                        << " ms after the next holder got the lock");
}

/// SIGSTOP now, SIGCONT on the way out, so a failed assertion never leaves a stopped process behind.
struct stopped_process {
  explicit stopped_process(child_process& p) : process(p) { process.signal(SIGSTOP); }
  ~stopped_process() { process.signal(SIGCONT); }
  stopped_process(const stopped_process&) = delete;
  stopped_process& operator=(const stopped_process&) = delete;
  child_process& process;
};

}  // namespace baton::test
