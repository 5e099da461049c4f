// SPDX-License-Identifier: Apache-2.0
#pragma once
// The history checker of the chaos run (docs/reliability.md): reads the events that workers, fenced-store
// and the runner recorded, all stamped with the host's CLOCK_MONOTONIC in microseconds, and verifies the
// five safety properties, and batond's answer to storage faults. Pure: no files, no clock; chaos-check is
// its command-line front end.
//
// Server-side times are never logged by the server; they are bounded from the client's side instead. A
// request sent at s and answered at r was decided by the server at some instant in [s, r], and the server
// decides expiry on the same CLOCK_MONOTONIC. So a lease granted (or renewed) by a request sent at s with
// TTL t is valid by the server's clock at least until s + t, and it is certainly valid from the moment its
// grant was received. Every check uses only such certain facts: a reported violation is a real one.
// Property 6 is the exception: how batond met a storage fault is observed by the runner and recorded as a
// fact (`server_exit`: the exit status it saw, the one expected, 200s from /healthz after the failure).

#include <boost/json/object.hpp>

#include <cstdint>
#include <istream>
#include <map>
#include <string>
#include <vector>

namespace baton::chaos {

/// One recorded event. `t` is CLOCK_MONOTONIC in µs; `sent` (when present) is when the request behind the
/// event left the client. Unset numbers are 0. `raw` keeps every field for printing.
struct event {
  std::int64_t t = 0;
  std::string src;  // worker id, "store" or "runner"
  std::string ev;   // acquire_req, acquire_granted, acquire_refused, renewed, lost, write_start, released,
                    // replaced (baton-sim: the server replaced the lease by a grant to its owner), ...
  std::string key;
  std::uint64_t token = 0;
  std::int64_t sent = 0;
  std::int64_t ttl_ms = 0;
  std::uint64_t holder_token = 0;  // acquire_refused: the holder the server named
  bool accepted = false;           // store_write
  std::string outcome;             // released
  std::string kind;                // fault
  boost::json::object raw;
};

/// Reads JSON lines. Blank lines are skipped; a malformed line throws std::invalid_argument naming it,
/// except a malformed *last* line (a process killed mid-write), which is skipped.
std::vector<event> parse_events(std::istream& in, const std::string& name);

/// Violation kinds, one or two per property:
///   1 token_not_increasing, token_granted_twice   2 stale_write_accepted, fresh_write_rejected
///   3 overlapping_leases, etcd_revoked_live_lease (an overlap while or just after an etcd leader stood
///     still, its disk stalled or its process paused, whose first holder was told its key was gone: etcd
///     3.4's early revocation, a defect of the server)
///   4 write_after_loss   5 lost_acquire, lost_release
///   6 wedged_on_storage_failure, damaged_log_accepted (from the runner's `server_exit` events)
///   7 too_many_holders, slot_beyond_count: a key of N permits had more than N holders certainly valid at
///     one instant (etcd_revoked_live_lease when one of them was revoked early as in 3), or a permit in a
///     slot past N - 1 (permits are recorded as `key#slot`, each slot a lock of
///     its own to properties 1-5, with fields `base`, `permits` and `slot`: docs/reliability.md)
struct violation {
  std::string kind;
  std::string message;
  std::vector<std::size_t> events;  // indices into the checked history, the evidence
};

struct check_result {
  std::vector<violation> violations;
  std::size_t ops = 0;                        // acquire attempts + write chunks + releases
  std::size_t leases = 0;                     // acquires granted
  std::size_t losses = 0;                     // leases the SDK reported lost
  std::size_t writes_accepted = 0;            // by the store
  std::size_t writes_rejected = 0;            // by the store: stale tokens the fence stopped
  std::size_t permits_granted = 0;            // acquires granted of keys of several permits
  std::size_t most_permit_holders = 0;        // the most holders of one such key certainly valid at once
  std::map<std::string, std::size_t> faults;  // injected faults by kind
  std::size_t faults_total() const;
};

/// Sorts `events` by time (stable: events of one source keep their order) and checks them.
check_result check_history(std::vector<event>& events);

/// One violation with the events of the same key around its evidence, for people.
std::string describe(const violation& v, const std::vector<event>& events);

/// `leases=N lost=N writes_accepted=N writes_rejected=N`, then `permits_granted=N most_holders_at_once=N`
/// when the workload had semaphores: what the faults did to the workload.
std::string workload_line(const check_result& r);

/// `ops=N faults=N (kind=n ...) violations=N seed=S`.
std::string summary_line(const check_result& r, const std::string& seed);

}  // namespace baton::chaos
