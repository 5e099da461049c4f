// SPDX-License-Identifier: Apache-2.0
#include "command_line.hpp"

#include "config_settings.hpp"

#include "baton/common/stop_schedule.hpp"
#include "baton/config.hpp"

#include <boost/program_options.hpp>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <sstream>

#include <sys/stat.h>
#include <unistd.h>

namespace baton::agent {
namespace {

namespace po = boost::program_options;

constexpr unsigned help_width = 110;

const char* const synopsis =
    R"(usage: baton-agent --config FILE [--server URL] [--identity ID] [--listen ADDR:PORT]
                   [--election-key KEY] [--log-level debug|info|warn|error] [--log-format logfmt|json]
                   [--ca-file FILE] [--cert FILE --key FILE] [--etcd-password-file FILE]
       baton-agent --check-config FILE [flags as above]
       baton-agent --next-runs N --config FILE [--from TIME]
       baton-agent run-now NAME --config FILE [--listen ADDR:PORT]
       baton-agent --help | --version

Elects one leader among the replicas that run it, through a Baton lock server, and runs cron jobs on that
leader with the lease's fencing token. A flag wins over the file's key of the same name. SIGTERM or SIGINT
stops the agent (running jobs get shutdown_grace, then the lease is released); SIGHUP reads the file
again and applies it, keeping the lease, unless it fails or changes a key only a restart applies.
run-now asks the agent running with FILE (at its listen address) to run job NAME now.
Exit status: 0 stopped, 1 failed while running, 2 bad configuration, flag or listen address.
run-now: 0 started, 1 refused or no answer, 2 bad command line or file, 3 that agent does not lead.
See docs/agent.md.

)";

po::options_description options() {
  po::options_description d("flags", help_width, help_width / 2);
  auto add = d.add_options();
  add("config", po::value<std::string>()->value_name("FILE"),
      "the configuration file (YAML); required to run");
  add("check-config", po::value<std::string>()->value_name("FILE"),
      "validate FILE with the flags given, print `FILE: ok (N jobs)` and exit 0, or the error and exit 2; "
      "warn about programs not found on this machine");
  add("next-runs", po::value<std::string>()->value_name("N"),
      "print each job's next N slots (1-1000) in its time zone and in UTC, and exit; needs --config");
  add("from", po::value<std::string>()->value_name("TIME"),
      "with --next-runs: count from TIME (RFC 3339, e.g. 2026-03-28T00:00:00Z) instead of now");
  // The flags that override a key of the file (config_settings.hpp).
  for (const auto& s : string_settings()) {
    if (s.flag.empty()) continue;
    const auto meaning = std::string(s.meaning) + " (file: " + std::string(s.key) + ")";
    add(std::string(s.flag).c_str(), po::value<std::string>()->value_name(std::string(s.value_name)),
        meaning.c_str());
  }
  add("help,h", "print this help and exit");
  add("version", "print the version and exit");
  return d;
}

std::string quoted(std::string_view s) {
  return "\"" + std::string(s) + "\"";
}

unsigned count_value(const std::string& text) {
  unsigned n = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc{} || end != text.data() + text.size() || n < 1 || n > command_line::max_next_runs)
    throw usage_error("--next-runs: expected a number from 1 to " +
                      std::to_string(command_line::max_next_runs) + ", got " + quoted(text));
  return n;
}

std::chrono::sys_seconds time_value(const std::string& text) {
  // RFC 3339 with whole seconds: `Z` or a numeric offset.
  std::chrono::sys_seconds t;
  for (const char* format : {"%Y-%m-%dT%H:%M:%SZ", "%Y-%m-%dT%H:%M:%S%Ez"}) {
    std::istringstream in(text);
    in >> date::parse(format, t);
    if (!in.fail() && in.peek() == std::char_traits<char>::eof()) return t;
  }
  throw usage_error(
      "--from: expected an RFC 3339 time such as 2026-03-28T00:00:00Z or 2026-03-28T02:00:00+02:00, got " +
      quoted(text));
}

// Why execve could not run the file at `path`, or empty when it could; `missing` tells a file that is not
// there (execvp then goes on to the next PATH directory) from one that cannot be run.
std::string not_runnable(const std::string& path, bool& missing) {
  struct stat st {};
  missing = false;
  if (::stat(path.c_str(), &st) != 0) {
    missing = errno == ENOENT || errno == ENOTDIR;
    return std::strerror(errno);
  }
  if (!S_ISREG(st.st_mode)) return "not a regular file";
  if (::access(path.c_str(), X_OK) != 0) return "not executable by this user";
  return {};
}

}  // namespace

command_line parse_command_line(const std::vector<std::string>& all_args) {
  // `run-now NAME` is a command word and its argument; the flags follow as for the other commands.
  std::vector<std::string> args = all_args;
  std::optional<std::string> run_now_job;
  if (!args.empty() && args.front() == "run-now") {
    if (args.size() < 2 || args[1].starts_with("-"))
      throw usage_error("run-now needs the job's NAME: baton-agent run-now NAME --config FILE");
    run_now_job = args[1];
    args.erase(args.begin(), args.begin() + 2);
  }
  po::variables_map vm;
  // Arguments that are not flags are collected to be refused by name.
  auto all = options();
  all.add_options()("stray", po::value<std::vector<std::string>>());
  po::positional_options_description stray;
  stray.add("stray", -1);
  try {
    po::store(po::command_line_parser(args)
                  .options(all)
                  .positional(stray)
                  .style(po::command_line_style::unix_style ^ po::command_line_style::allow_guessing)
                  .run(),
              vm);
    po::notify(vm);
  } catch (const po::error& e) {
    // program_options quotes the offending argument, which may be a server URL with its password.
    throw usage_error(baton::without_credentials(e.what()) + " (see baton-agent --help)");
  }
  if (vm.count("stray"))
    throw usage_error("unexpected argument " +
                      quoted(baton::without_credentials(vm["stray"].as<std::vector<std::string>>().front())) +
                      ": every value follows its flag (see baton-agent --help)");
  command_line out;
  if (vm.count("help")) {
    out.what = command_line::action::help;
    return out;
  }
  if (vm.count("version")) {
    out.what = command_line::action::version;
    return out;
  }
  for (const auto& s : string_settings()) {
    const auto flag = std::string(s.flag);
    if (!flag.empty() && vm.count(flag)) out.overrides[flag] = vm[flag].as<std::string>();
  }
  const auto given = [&](const char* name) { return vm.count(name) > 0; };
  const auto value = [&](const char* name) {
    return given(name) ? vm[name].as<std::string>() : std::string();
  };

  if (given("check-config")) {
    if (run_now_job) throw usage_error("--check-config and run-now are two commands: give one");
    if (given("config"))
      throw usage_error("--check-config FILE checks FILE: leave out --config, or use --next-runs with it");
    if (given("next-runs")) throw usage_error("--next-runs and --check-config are two commands: give one");
    out.what = command_line::action::check_config;
    out.config_path = value("check-config");
    if (out.config_path.empty()) throw usage_error("--check-config needs a FILE");
  } else {
    out.config_path = value("config");
    if (out.config_path.empty()) throw usage_error("--config FILE is required (see baton-agent --help)");
    if (run_now_job) {
      if (given("next-runs")) throw usage_error("--next-runs and run-now are two commands: give one");
      out.what = command_line::action::run_now;
      out.job = *run_now_job;
    } else if (given("next-runs")) {
      out.what = command_line::action::next_runs;
      out.next_runs = count_value(value("next-runs"));
    }
  }
  if (given("from")) {
    if (out.what != command_line::action::next_runs) throw usage_error("--from goes with --next-runs");
    out.from = time_value(value("from"));
  }
  return out;
}

std::string help_text() {
  std::ostringstream out;
  out << synopsis << options();
  return out.str();
}

std::string program_problem(const std::string& program, const char* path_env) {
  bool missing = false;
  if (program.find('/') != std::string::npos) {
    const auto why = not_runnable(program, missing);
    return why.empty() ? why : quoted(program) + ": " + why;
  }
  // execvp's search: each directory of PATH in turn (an empty one is the working directory); with no PATH,
  // the C library's default. A file found that cannot be run is named, though execvp looks further.
  const std::string path = path_env ? path_env : "/bin:/usr/bin";
  std::string first_problem;
  for (std::size_t start = 0;;) {
    const auto end = std::min(path.find(':', start), path.size());
    const auto dir = path.substr(start, end - start);
    const auto candidate = (dir.empty() ? std::string(".") : dir) + "/" + program;
    const auto why = not_runnable(candidate, missing);
    if (why.empty()) return {};
    if (!missing && first_problem.empty()) first_problem = quoted(candidate) + ": " + why;
    if (end == path.size()) break;
    start = end + 1;
  }
  if (!first_problem.empty()) return first_problem;
  return quoted(program) + " is not found in PATH (" + path + ")";
}

std::vector<std::string> program_warnings(const agent_config& config, std::string_view file,
                                          const char* path_env) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < config.jobs.size(); ++i) {
    const auto& job = config.jobs[i];
    if (job.command.empty()) continue;  // an http job
    const auto problem = program_problem(job.shell ? "/bin/sh" : job.command.front(), path_env);
    if (problem.empty()) continue;
    const auto key = "jobs[" + std::to_string(i) + "].command" + (job.shell ? "" : "[0]");
    out.push_back(config_error(std::string(file), job.command_at.line, job.command_at.column, key,
                               problem + "; its runs would end as spawn_failed on this machine")
                      .what());
  }
  return out;
}

std::vector<std::string> grace_warnings(const agent_config& config, std::string_view file) {
  std::vector<std::string> out;
  const auto margin = config.election.effective_safety_margin();
  const auto left = std::chrono::floor<std::chrono::milliseconds>(borrowed_time(margin));
  for (std::size_t i = 0; i < config.jobs.size(); ++i) {
    const auto& job = config.jobs[i];
    // The default is cut without a word (docs/agent.md says so); a grace written in the file is worth one.
    if (job.command.empty() || job.grace_at.line == 0 || grace_fits(job.grace, margin)) continue;
    out.push_back(config_error(std::string(file), job.grace_at.line, job.grace_at.column,
                               "jobs[" + std::to_string(i) + "].grace",
                               std::to_string(job.grace.count()) + "ms is longer than a lost lease leaves: " +
                                   "after a loss SIGKILL comes " + std::to_string(left.count()) +
                                   "ms after SIGTERM (half the election's safety margin of " +
                                   std::to_string(margin.count()) +
                                   "ms), before the server can expire the lease; a longer election.ttl or "
                                   "election.safety_margin leaves more")
                      .what());
  }
  return out;
}

std::vector<std::string> fencing_warnings(const agent_config& config, std::string_view file) {
  std::vector<std::string> out;
  // Leader jobs are fenced with the election's token. A per-job job's token comes from its own lock, and all
  // locks share one counter: a resource that two jobs with different locks write would take the newer token
  // of one and refuse the other's older one from then on. Only HTTP targets can be compared here.
  const auto lock_of = [&](const job_config& j) {
    return j.mode == agent_mode::leader ? config.election_key : "jobs/" + j.name;
  };
  for (std::size_t i = 0; i < config.jobs.size(); ++i)
    for (std::size_t j = 0; j < i; ++j) {
      const auto& a = config.jobs[j];
      const auto& b = config.jobs[i];
      if (!a.http || !b.http || a.http->url != b.http->url || lock_of(a) == lock_of(b)) continue;
      out.push_back(std::string(file) + ": jobs[" + std::to_string(i) + "].http.url: jobs " + quoted(a.name) +
                    " and " + quoted(b.name) + " both send to " + quoted(without_credentials(b.http->url)) +
                    " with the fencing tokens of different locks (" + lock_of(a) + ", " + lock_of(b) +
                    "); a resource that fences on them would refuse one job's older token after the other's "
                    "write: fence one resource with one lock (leader jobs, or one job)");
    }
  return out;
}

std::string next_runs_text(const agent_config& config, std::chrono::sys_seconds from, unsigned count) {
  std::ostringstream out;
  if (config.jobs.empty()) out << "no jobs\n";
  for (const auto& job : config.jobs) {
    out << job.name << ": " << quoted(job.sched.text()) << " in " << job.timezone << "\n";
    auto slot = job.sched.next_fire(from, job.tz);
    if (!slot) out << "  no slot after " << date::format("%FT%TZ", from) << "\n";
    for (unsigned i = 0; i < count && slot; ++i, slot = job.sched.next_fire(*slot, job.tz)) {
      if (job.tz)
        out << "  " << date::format("%F %T %Z %Ez", date::make_zoned(job.tz, *slot));
      else
        out << "  " << date::format("%F %T UTC +00:00", *slot);
      out << "  " << date::format("%FT%TZ", *slot) << "\n";
    }
  }
  return out.str();
}

}  // namespace baton::agent
