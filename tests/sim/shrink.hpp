// SPDX-License-Identifier: Apache-2.0
#pragma once
// Shrinking a failing seed (docs/reliability.md, "Deterministic simulation"): the same seed, run again
// shorter (an earlier end) and with fewer faults (ordinals left out), as long as the same kind of violation
// still shows. The result is a run of its own, replayed exactly by the options it names.

#include "simulation.hpp"

#include <string>

namespace baton::sim {

struct shrunk {
  options o;     // the failing seed's options, with `stop` and `skip_faults` set
  run_result r;  // its run
  int runs = 0;  // runs tried while shrinking
  std::string kind;
};

/// The kind of the first violation ("held_after_expiry"), or "" when the run passed.
std::string first_violation_kind(const run_result& r);

/// Shrinks `o`'s failing run `r` (it must have a violation). At most `max_runs` runs are tried.
shrunk shrink(const options& o, const run_result& r, int max_runs = 400);

/// `skip_faults` as the command line takes it: "3,5-9,12".
std::string format_ordinals(const std::set<std::uint64_t>& s);
/// The reverse; false on a malformed list.
bool parse_ordinals(const std::string& text, std::set<std::uint64_t>& out);

}  // namespace baton::sim
