// SPDX-License-Identifier: Apache-2.0
#pragma once
// baton-agent's command line: which of its commands to run (the agent itself, --check-config, --next-runs,
// --help, --version) with which flags, and what the two one-shot commands print. Parsing is pure, so every
// accepted and refused command line is unit-tested without starting a process (tests/unit/agent).

#include "config.hpp"

#include <chrono>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace baton::agent {

/// A command line that cannot be used. what() is one line naming the flag
/// (`--next-runs: expected a number from 1 to 1000, got "x"`).
struct usage_error : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

struct command_line {
  enum class action {
    run,           // --config FILE: run the agent
    check_config,  // --check-config FILE: validate FILE (with the override flags), print a summary
    next_runs,     // --next-runs N --config FILE: print each job's next N slots
    help,          // --help, -h
    version,       // --version
    run_now,       // run-now NAME --config FILE: ask the running agent to run job NAME now
  };
  action what = action::run;
  /// --config's FILE, or --check-config's.
  std::string config_path;
  /// The flags that override the file, as apply_overrides() takes them: name without dashes → value. An
  /// empty value is kept (apply_overrides() treats it as a flag not given).
  std::map<std::string, std::string> overrides;
  /// --next-runs N: slots per job, 1 to max_next_runs.
  unsigned next_runs = 0;
  /// --from TIME: the instant --next-runs counts from; empty: now.
  std::optional<std::chrono::sys_seconds> from;
  /// run-now's NAME.
  std::string job;

  static constexpr unsigned max_next_runs = 1000;
};

/// Parses `args` (argv without the program name) with Boost.Program_options: `--flag VALUE` and
/// `--flag=VALUE` both work, a flag given twice, an unknown flag or a stray argument is an error. --help and
/// --version win over everything else that parses. Throws usage_error. Pure; thread-safe.
command_line parse_command_line(const std::vector<std::string>& args);

/// The text --help prints: the synopsis and every flag with its meaning.
std::string help_text();

/// --check-config's warnings about this machine: for each command job, the program it would start (argv[0],
/// or /bin/sh with `shell: true`) when it cannot be found or run here. A name without a slash is looked up
/// in `path_env` ($PATH; execvp's default /bin:/usr/bin when null) as execvp does. Each warning is one line,
/// `FILE:LINE:COLUMN: jobs[i].command[0]: reason`. Warnings only: the file may be checked on another machine
/// than the one it is meant for. Reads the file system; thread-safe.
std::vector<std::string> program_warnings(const agent_config& config, std::string_view file,
                                          const char* path_env);

/// Warnings about grace periods a lost lease cuts short: for each command job whose `grace`, written in the
/// file, is longer than what the election lease leaves after a loss (baton::borrowed_time: half its safety
/// margin), one line `FILE:LINE:COLUMN: jobs[i].grace: reason`. After a loss SIGKILL comes that soon after
/// SIGTERM, before the server can expire the lease; the whole grace still applies to a stop under a lease
/// that is held (timeout, shutdown, replace). Pure; thread-safe.
std::vector<std::string> grace_warnings(const agent_config& config, std::string_view file);
/// --check-config's warnings about fencing: jobs whose HTTP targets are the same URL and whose tokens come
/// from different locks (two per-job jobs, or a per-job job and a leader job), which share one counter
/// (docs/agent.md, "Which token fences what").
std::vector<std::string> fencing_warnings(const agent_config& config, std::string_view file);

/// Why execvp could not start `program` here, or empty when it could: not found (in `path_env` for a bare
/// name), not a regular file, or not executable by this user.
std::string program_problem(const std::string& program, const char* path_env);

/// --next-runs: each job's name, schedule and time zone, then its next `count` slots strictly after `from`,
/// one per line as local time with zone abbreviation and offset, and the same instant in UTC:
///   nightly: "30 2 * * *" in Europe/Berlin
///     2026-03-29 03:00:00 CEST +02:00  2026-03-29T01:00:00Z
/// A job with no further slot says so. Pure apart from the tz database; thread-safe.
std::string next_runs_text(const agent_config& config, std::chrono::sys_seconds from, unsigned count);

}  // namespace baton::agent
