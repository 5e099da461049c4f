// SPDX-License-Identifier: Apache-2.0
#pragma once
// The metrics every Baton daemon exports about itself, in the Prometheus text format: baton_build_info and
// the standard process_* series (process_cpu_seconds_total, process_resident_memory_bytes, process_open_fds,
// process_start_time_seconds) read from Linux's /proc. Parsing is pure and tested on fixed text; only
// process_metrics_text() reads /proc.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace baton {

/// What /proc says about a process; a value that could not be read is nullopt and its series is left out.
struct process_sample {
  std::optional<double> cpu_seconds;            // user + system time
  std::optional<std::uint64_t> resident_bytes;  // resident set size
  std::optional<std::uint64_t> open_fds;
  std::optional<double> start_time_seconds;  // since the epoch
};

/// utime + stime of a /proc/<pid>/stat line, in seconds. The command name (field 2) is in parentheses and
/// may hold spaces and ')', so fields are counted from the last ')'. nullopt for a line that does not parse.
std::optional<double> cpu_seconds_from_stat(std::string_view stat, long ticks_per_second);
/// Start time (field 22, clock ticks after boot) of a /proc/<pid>/stat line, as seconds since the epoch,
/// given the boot time `boot_time_seconds` (`btime` of /proc/stat).
std::optional<double> start_time_from_stat(std::string_view stat, long ticks_per_second,
                                           std::uint64_t boot_time_seconds);
/// The `btime` line of /proc/stat.
std::optional<std::uint64_t> boot_time_from_proc_stat(std::string_view proc_stat);
/// Resident pages (field 2) of /proc/<pid>/statm, in bytes.
std::optional<std::uint64_t> resident_bytes_from_statm(std::string_view statm, long page_size);

/// The process_* series of `sample`, with HELP and TYPE lines.
std::string render_process_metrics(const process_sample& sample);
/// `baton_build_info{version="...",commit="..."} 1` with HELP and TYPE lines.
std::string render_build_info(std::string_view version, std::string_view commit);

/// This program's version and the commit it was built from ("unknown" outside a git checkout), as CMake
/// found them when the build was configured.
std::string_view build_version();
std::string_view build_commit();

/// Reads this process's sample from /proc/self (nothing throws: what cannot be read is left out).
process_sample read_process_sample();

/// render_build_info() of this build, then render_process_metrics() of read_process_sample(): what batond's
/// and baton-agent's /metrics end with. Thread-safe.
std::string process_metrics_text();

}  // namespace baton
