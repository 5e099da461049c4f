// SPDX-License-Identifier: Apache-2.0
#pragma once
// The job state of an agent group, kept where every replica can read it and only the leader can write it: the
// record of the election's lock (docs/protocol.md, "record"), written under the leader's lease with its
// token, so a deposed leader's late write is refused. Per job: the latest slot a leader decided (started,
// skipped or counted missed), its last runs with where they ran, the last success and the failures in a row;
// for the group: which jobs are suspended. In per-job mode each job's lock keeps the same record for its one
// job.
//
// Pure: JSON in and out, no I/O. The runtime reads it at election (scheduler::on_elected's `decided`), writes
// a slot's decision before the slot's run starts (so run_once never repeats a slot that ran), and each run's
// outcome when it ends. docs/design.md, "The group's state is the election lock's record".

#include "job_history.hpp"
#include "scheduler.hpp"

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>

namespace baton::agent {

struct job_group_state {
  /// The latest slot a leader decided.
  std::optional<sys_seconds> decided;
  std::deque<run_record> runs;  // newest first
  std::optional<std::chrono::system_clock::time_point> last_success;
  /// Slots in a row whose final outcome was a failure (failed, timed_out, spawn_failed).
  std::uint64_t consecutive_failures = 0;
};

struct group_state {
  /// The jobs suspended for the group; empty until the API suspended or resumed one (the file decides then).
  std::optional<std::set<std::string>> suspended;
  std::map<std::string, job_group_state> jobs;
  /// The leadership that wrote it.
  std::string leader;
  std::uint64_t token = 0;
  /// That leadership was handed over on purpose (shutdown, resign): the slots it left undecided came due
  /// while leadership changed hands (scheduler::on_elected's `handover`).
  bool handover = false;
};

/// The record's text: a JSON object. When it would pass `max_bytes`, the oldest runs are dropped (across
/// jobs, one at a time, a job's latest run last) until it fits; decisions and suspension are never dropped.
std::string encode(const group_state& s, std::size_t max_bytes);
/// Reads encode()'s text; empty with `error` set for text that is not such a record (a record written by
/// something else: the caller starts from no state and says so).
std::optional<group_state> decode(std::string_view text, std::string& error);

/// A run as GET /v1/jobs shows it and the record keeps it.
boost::json::object run_json(const run_record& r);
std::optional<run_record> run_from_json(const boost::json::value& v);

/// A slot decided (a run starts for it, or it was skipped or counted): `decided` moves to it (never back).
void decide(group_state& s, const std::string& job, sys_seconds slot);
/// A run (an attempt) ended: kept newest first, at most `keep` per job.
void add_run(group_state& s, const std::string& job, run_record run, std::size_t keep);
/// A slot's last attempt ended at `ended` with `outcome`: the last success and the failures in a row follow
/// it (stopped, lost and replaced leave them).
void finish_slot(group_state& s, const std::string& job, run_outcome outcome,
                 std::chrono::system_clock::time_point ended);
/// Every job's decided slot, for scheduler::on_elected.
std::map<std::string, sys_seconds> decided_slots(const group_state& s);

/// RFC 3339 in UTC with milliseconds: 2026-11-30T03:00:00.250Z.
std::string rfc3339_ms(std::chrono::system_clock::time_point t);

}  // namespace baton::agent
