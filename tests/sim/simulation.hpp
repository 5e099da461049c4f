// SPDX-License-Identifier: Apache-2.0
#pragma once
// One seeded run of the deterministic simulation (docs/reliability.md, "Deterministic simulation"):
// batond's lock_service, lock table and journal over a simulated disk, SDK clients driving the real
// lease_fsm over a simulated network, and fenced resources, all on one virtual clock. The run records a
// history in the chaos run's format, which tests/chaos/history.cpp checks.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

namespace baton::sim {

/// Defects the simulation can switch on, to show the checker catches them: the first five in its own
/// actors, the next five in batond's real code as the simulation builds it (server/src/planted_defects.hpp),
/// the next in the simulated file system under it (sim_storage.hpp), the last in its clients again.
enum class bug {
  none,
  skip_fence,            // the resource accepts any token
  work_after_loss,       // a client keeps writing after its SDK declared the lease lost
  fsync_lies,            // the disk acknowledges syncs and keeps nothing synced across a crash
  stays_down,            // batond, down when the faults are healed, is never started again (liveness)
  zero_margin,           // the clients' lease_fsm keeps no safety margin: its deadline is sent + ttl
  renew_before_durable,  // lock_service answers a renew before the records its lease rests on are durable
  release_by_key,        // lock_service releases a key whoever holds it
  cut_damaged_record,    // journal::open cuts a log at a damaged record with valid ones after it
  ignore_batch_frames,   // journal::open takes a torn last batch's surviving records for acknowledged ones
  shorten_lease,         // lock_table lets a renew or a same-owner re-acquire move a lease's expiry earlier
  start_skips_dir_sync,  // a start that created or removed no log does not fsync the data directory
  queue_deadline_from_answer,  // a queued grant's lease is counted from its answer's arrival, not its send
  permit_past_count,           // lock_table grants a full key of N permits an (N+1)th permit
};
bool parse_bug(const std::string& name, bug& out);

struct options {
  std::uint64_t seed = 1;
  int clients = 5;
  int keys = 3;
  // Keys of permits (counting semaphores), each of 2 to 4 permits, beside the `keys` locks (0: none). Their
  // holders are checked per slot as locks are, and no more than N at once per key.
  int semaphore_keys = 0;
  // Each acquisition of a key of permits draws its own count (2 to 5) and, half the time, a lock-delay
  // (50 to 300 ms): a key's count changes whenever it is idle, and a count changes at the end of a slot's
  // delay, across crashes and compactions (docs/design.md, "Semaphores").
  bool changing_counts = false;
  std::chrono::milliseconds duration{60'000};  // virtual time; the last quiet_period of it has no faults
  std::chrono::milliseconds quiet_period{15'000};
  bool faults = true;
  // Each process's clock runs at a rate drawn from [1 - drift, 1 + drift] of true time, from its own
  // origin (docs/design.md, "The local deadline is counted from the send time").
  double drift = 0.01;
  // The clients' lease_fsm safety margin (0: the SDK's default, TTL/10).
  std::chrono::milliseconds margin{0};
  bug bug_switch = bug::none;
  // A shortened run (shrink.hpp): it ends at `stop` (0: at `duration`; liveness is checked only on a whole
  // run), and the faults whose ordinals are in `skip_faults` are not injected.
  std::chrono::milliseconds stop{0};
  std::set<std::uint64_t> skip_faults;
};

struct run_result {
  std::vector<std::string> history;     // one JSON object per line, in the order recorded
  std::vector<std::string> violations;  // described, with the events around the evidence
  std::uint64_t ops = 0;                // acquires, writes and releases attempted
  std::uint64_t steps = 0;              // scheduler events run
  std::uint64_t faults = 0;
  std::uint64_t cuts = 0;         // logs batond's journal cut (each followed by a compaction, unless a crash)
  std::uint64_t compactions = 0;  // snapshots installed
  std::uint64_t fault_points = 0;     // faults drawn, injected or skipped: the ordinals skip_faults names
  std::uint64_t waits = 0;            // long-polls answered
  std::uint64_t waits_woken = 0;      // of them, answered with a change (a new holder, or none)
  std::uint64_t waits_refused = 0;    // refused at a waiter limit (503 too_many_waiters)
  std::uint64_t waits_cancelled = 0;  // cancelled by batond when the client's connection closed
};

run_result run(const options& o);

}  // namespace baton::sim
