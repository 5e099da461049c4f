// SPDX-License-Identifier: Apache-2.0
// chaos-check: verifies a chaos run's recorded history (docs/reliability.md).
//
//   chaos-check [--seed S] [--expect-violation KIND] [--known-violation KIND]... [--max-shown N] FILE...
//
// Prints each violation with the events around it (at most --max-shown, default 20, in full), then the
// summary line `ops=N faults=N (by kind) violations=N seed=S`. Exit 0 when there is no violation, 1 when
// there is one, 2 on bad input. With --expect-violation (the checker's self-test) the exit is 0 exactly when
// at least one violation of KIND was found. --known-violation KIND: violations of KIND, a defect of the
// server under test that Baton cannot prevent, are shown and counted as all others but do not fail the run.

#include "history.hpp"

#include <cstdio>
#include <fstream>
#include <iostream>
#include <set>

int main(int argc, char** argv) {
  using namespace baton::chaos;
  std::string seed = "unknown", expect;
  std::size_t max_shown = 20;
  std::vector<std::string> files;
  std::set<std::string> known;
  try {
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i];
      if ((a == "--seed" || a == "--expect-violation" || a == "--known-violation" || a == "--max-shown") &&
          i + 1 >= argc)
        throw std::invalid_argument("missing value for " + a);
      if (a == "--seed")
        seed = argv[++i];
      else if (a == "--expect-violation")
        expect = argv[++i];
      else if (a == "--known-violation")
        known.insert(argv[++i]);
      else if (a == "--max-shown")
        max_shown = std::stoul(argv[++i]);
      else if (a.starts_with("--"))
        throw std::invalid_argument("unknown option " + a);
      else
        files.push_back(a);
    }
    if (files.empty()) throw std::invalid_argument("no history files given");
    std::vector<event> events;
    for (const auto& f : files) {
      std::ifstream in(f);
      if (!in) throw std::invalid_argument("cannot open " + f);
      auto part = parse_events(in, f);
      events.insert(events.end(), std::make_move_iterator(part.begin()), std::make_move_iterator(part.end()));
    }
    auto result = check_history(events);
    std::map<std::string, std::size_t> by_kind;
    for (std::size_t i = 0; i < result.violations.size(); ++i) {
      ++by_kind[result.violations[i].kind];
      if (i < max_shown) std::cout << describe(result.violations[i], events);
    }
    if (result.violations.size() > max_shown)
      std::cout << "... " << result.violations.size() - max_shown << " more violations not shown\n";
    std::size_t unknown = 0;
    for (const auto& [kind, n] : by_kind) {
      std::cout << "violations of " << kind << ": " << n
                << (known.count(kind) ? " (known defect of the server under test: does not fail the run)"
                                      : "")
                << "\n";
      if (!known.count(kind)) unknown += n;
    }
    std::cout << workload_line(result) << "\n" << summary_line(result, seed) << std::endl;
    if (!expect.empty()) {
      if (by_kind.count(expect)) {
        std::cout << "expected violation " << expect << " found: the checker catches it" << std::endl;
        return 0;
      }
      std::cout << "expected violation " << expect << " NOT found" << std::endl;
      return 1;
    }
    return unknown == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "chaos-check: %s\n", e.what());
    return 2;
  }
}
