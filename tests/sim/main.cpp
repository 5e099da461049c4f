// SPDX-License-Identifier: Apache-2.0
// baton-sim: the deterministic simulation's command line (docs/reliability.md, "Deterministic simulation").
//   baton-sim --seed S [--trace] [--history FILE]   one seed; --trace prints its whole history, or, when
//                                                    the seed fails, that of its shrunk run (--no-shrink:
//                                                    the whole failing run's)
//   --stop-ms MS --skip-faults LIST                  a shortened run, as shrinking names it
//   baton-sim --seeds N [--first S]                  seeds S .. S+N-1, with seeds per minute
//   --bug NAME --expect-violation                    succeed only if some seed finds the planted defect
// Exit status: 0 when every seed passed (or, with --expect-violation, when one failed), 1 otherwise, 2 for
// a usage error.

#include "shrink.hpp"
#include "simulation.hpp"

#include "baton/common/log.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>

namespace {

int usage(const char* why) {
  std::fprintf(
      stderr,
      "baton-sim: %s\n"
      "usage: baton-sim [--seed S | --seeds N [--first S]] [--trace] [--history FILE]\n"
      "                 [--bug none|skip-fence|work-after-loss|fsync-lies|stays-down|zero-margin|\n"
      "                        renew-before-durable|release-by-key|cut-damaged-record|\n"
      "                        ignore-batch-frames|shorten-lease|start-skips-dir-sync|\n"
      "                        queue-deadline-from-answer|permit-past-count]\n"
      "                 [--expect-violation]\n"
      "                 [--duration-ms MS] [--clients N] [--keys N] [--semaphores N] [--drift PERCENT]\n"
      "                 [--changing-counts] [--margin-ms MS]\n"
      "                 [--no-faults]\n"
      "                 [--stop-ms MS] [--skip-faults LIST] [--no-shrink]\n",
      why);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  namespace sim = baton::sim;
  sim::options o;
  std::uint64_t first = 1, count = 1;
  bool trace = false, expect_violation = false, no_shrink = false;
  std::string history_file, bug_name = "none";
  std::string passed_on;  // the options a replay command repeats
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
      return argv[++i];
    };
    try {
      const bool repeated = a == "--bug" || a == "--duration-ms" || a == "--clients" || a == "--keys" ||
                            a == "--semaphores" || a == "--drift" || a == "--margin-ms" ||
                            a == "--no-faults" || a == "--changing-counts";
      const bool flag = a == "--no-faults" || a == "--changing-counts";
      if (repeated) passed_on += " " + a + (flag || i + 1 >= argc ? "" : " " + std::string(argv[i + 1]));
      if (a == "--seed") {
        first = std::stoull(value());
        count = 1;
      } else if (a == "--seeds") {
        count = std::stoull(value());
      } else if (a == "--first") {
        first = std::stoull(value());
      } else if (a == "--trace") {
        trace = true;
      } else if (a == "--history") {
        history_file = value();
      } else if (a == "--bug") {
        bug_name = value();
      } else if (a == "--expect-violation") {
        expect_violation = true;
      } else if (a == "--duration-ms") {
        o.duration = std::chrono::milliseconds(std::stoll(value()));
      } else if (a == "--clients") {
        o.clients = std::stoi(value());
      } else if (a == "--keys") {
        o.keys = std::stoi(value());
      } else if (a == "--semaphores") {
        o.semaphore_keys = std::stoi(value());
      } else if (a == "--changing-counts") {
        o.changing_counts = true;
      } else if (a == "--drift") {
        o.drift = std::stod(value()) / 100;
      } else if (a == "--margin-ms") {
        o.margin = std::chrono::milliseconds(std::stoll(value()));
      } else if (a == "--no-faults") {
        o.faults = false;
      } else if (a == "--stop-ms") {
        o.stop = std::chrono::milliseconds(std::stoll(value()));
      } else if (a == "--skip-faults") {
        if (!sim::parse_ordinals(value(), o.skip_faults))
          return usage("--skip-faults takes a list like 3,5-9");
      } else if (a == "--no-shrink") {
        no_shrink = true;
      } else {
        return usage(("unknown option " + a).c_str());
      }
    } catch (const std::exception& e) {
      return usage(e.what());
    }
  }
  if (!sim::parse_bug(bug_name, o.bug_switch)) return usage(("unknown bug " + bug_name).c_str());
  if (o.clients < 1 || o.keys < 1 || count < 1) return usage("clients, keys and seeds must be positive");
  if (o.semaphore_keys < 0) return usage("--semaphores must be 0 or more");
  if (!(o.drift >= 0 && o.drift < 0.5)) return usage("--drift must be from 0 to 50 (percent)");
  if (o.margin.count() < 0 || o.margin >= std::chrono::milliseconds(2'000))
    return usage("--margin-ms must be from 0 (the default, TTL/10) to below the TTL, 2000");
  if (o.duration < o.quiet_period * 2) o.quiet_period = o.duration / 4;

  // batond's own warnings (a torn tail cut at recovery) are expected here by the thousand; the history
  // records what happened.
  baton::log::set_level(baton::log::level::error);

  const auto started = std::chrono::steady_clock::now();
  std::uint64_t ran = 0, failed = 0, ops = 0, steps = 0, faults = 0, cuts = 0, compactions = 0, waits = 0,
                woken = 0, refused = 0, cancelled = 0;
  for (std::uint64_t seed = first; seed < first + count; ++seed) {
    o.seed = seed;
    ++ran;
    auto r = sim::run(o);
    std::string replay;  // what a shrunk run adds to the seed's replay command
    // A failing seed replayed for its trace is shrunk first: the trace is the shortest failing run found.
    if (trace && count == 1 && !no_shrink && !r.violations.empty() && o.stop.count() == 0 &&
        o.skip_faults.empty()) {
      const auto full_events = r.history.size();
      auto s = sim::shrink(o, r);
      const auto stop = static_cast<long long>(s.o.stop.count() ? s.o.stop.count() : s.o.duration.count());
      std::fprintf(
          stderr,
          "shrunk seed %llu in %d runs: %s still shows with the run stopped at %lld ms and %zu of %llu "
          "faults left out; %zu events of %zu\nreplay: baton-sim --seed %llu%s --stop-ms %lld%s%s --trace\n",
          static_cast<unsigned long long>(seed), s.runs, s.kind.c_str(), stop, s.o.skip_faults.size(),
          static_cast<unsigned long long>(s.r.fault_points), s.r.history.size(), full_events,
          static_cast<unsigned long long>(seed), passed_on.c_str(), stop,
          s.o.skip_faults.empty() ? "" : " --skip-faults ", sim::format_ordinals(s.o.skip_faults).c_str());
      r = std::move(s.r);
      replay = " --stop-ms " + std::to_string(stop) +
               (s.o.skip_faults.empty() ? "" : " --skip-faults " + sim::format_ordinals(s.o.skip_faults));
    }
    ops += r.ops;
    steps += r.steps;
    faults += r.faults;
    cuts += r.cuts;
    compactions += r.compactions;
    waits += r.waits;
    woken += r.waits_woken;
    refused += r.waits_refused;
    cancelled += r.waits_cancelled;
    if (trace)
      for (const auto& line : r.history)
        std::cout << line << "\n";
    if (!history_file.empty()) {
      std::ofstream f(history_file);
      for (const auto& line : r.history)
        f << line << "\n";
    }
    if (!r.violations.empty()) {
      ++failed;
      std::cout << "seed " << seed << ": " << r.violations.size() << " violation(s)\n";
      for (const auto& v : r.violations)
        std::cout << v;
      std::cout << "replay: baton-sim --seed " << seed << passed_on << replay << " --trace\n";
      if (expect_violation) break;
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  // With --trace, stdout is the history alone (two runs of a seed compare byte for byte).
  std::fprintf(trace ? stderr : stdout,
               "seeds=%llu failed=%llu ops=%llu steps=%llu faults=%llu cuts=%llu compactions=%llu waits=%llu "
               "waits_woken=%llu waits_refused=%llu "
               "waits_cancelled=%llu seconds=%.1f "
               "seeds_per_minute=%.0f ops_per_second=%.0f bug=%s\n",
               static_cast<unsigned long long>(ran), static_cast<unsigned long long>(failed),
               static_cast<unsigned long long>(ops), static_cast<unsigned long long>(steps),
               static_cast<unsigned long long>(faults), static_cast<unsigned long long>(cuts),
               static_cast<unsigned long long>(compactions), static_cast<unsigned long long>(waits),
               static_cast<unsigned long long>(woken), static_cast<unsigned long long>(refused),
               static_cast<unsigned long long>(cancelled), secs,
               secs > 0 ? static_cast<double>(ran) * 60 / secs : 0.0,
               secs > 0 ? static_cast<double>(ops) / secs : 0.0, bug_name.c_str());
  if (expect_violation) return failed ? 0 : 1;
  return failed ? 1 : 0;
}
