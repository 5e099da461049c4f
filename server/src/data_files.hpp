// SPDX-License-Identifier: Apache-2.0
#pragma once
// The files of batond's data directory, as the journal, its compactor and `batond repair` read and write
// them: log and snapshot names, replaying a log's whole batches, finding where acknowledged data resumes
// after damage, and installing a snapshot durably. Pure but for the storage they are given.

#include "lock_table.hpp"
#include "storage.hpp"
#include "wal_record.hpp"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace baton::server {

/// A log holds a record that does not decode, and it is not a torn tail: valid records follow it, or it is
/// not the last log. Records after it were acknowledged, so replay cannot stop there; batond refuses to
/// start and keeps the file as it is (`batond repair` may then cut it).
struct journal_damaged : std::runtime_error {
  journal_damaged(std::filesystem::path f, std::uint64_t at, std::string why);
  std::filesystem::path file;
  std::uint64_t offset;
};

/// Applies one log record to the table during recovery (pure; exposed for tests).
void replay_record(lock_table& table, const wal_record& r, time_point now);

namespace data_files {

inline constexpr const char* snapshot_name = "snapshot";
inline constexpr const char* snapshot_tmp_name = "snapshot.tmp";

/// Throws std::runtime_error("<what>: <strerror(err)>").
[[noreturn]] void fail(const std::string& what, int err);

/// "wal-<generation as 16 hex digits>.log".
std::string wal_name(std::uint64_t generation);

/// The logs in the directory, oldest first: (generation, name).
std::vector<std::pair<std::uint64_t, std::string>> list_logs(storage& fs);

/// The whole file; throws std::runtime_error naming it when it cannot be read.
std::string read_all(storage& fs, const std::string& name);

/// Reads the snapshot, if any, into `table`; returns its generation (0 without one). A snapshot is only
/// ever installed by rename after fsync, so any defect in it is real damage: throws journal_damaged.
std::uint64_t load_snapshot(storage& fs, lock_table& table, time_point now, std::uint64_t& entries);

/// Checks that the logs form one unbroken run starting at the snapshot's generation. Logs older than the
/// snapshot are covered by it and dropped from the list (added to `covered` when given: the caller deletes
/// them). Throws std::runtime_error at a gap.
void check_log_sequence(storage& fs, std::uint64_t snapshot_generation,
                        std::vector<std::pair<std::uint64_t, std::string>>& logs,
                        std::vector<std::string>* covered);

/// What replaying the front of a log found.
struct log_scan {
  std::size_t valid = 0;  // bytes of whole batches (and bare records) from the start
  bool framed = false;    // a batch frame was among them: from there on, only whole batches count
};

/// Replays whole units (batches, or bare records of a log written before frames) from the front of `data`;
/// `valid` is how many bytes they span (the rest, if any, starts with a unit that does not decode).
/// `records` counts the records replayed, frames not included.
log_scan replay_valid_prefix(std::string_view data, lock_table& table, time_point now,
                             std::uint64_t& records);

/// The first offset at or after `from` where a whole valid unit starts that could only be there if the
/// damaged stretch before it was acknowledged. In a framed log that is a whole batch: the records inside an
/// incomplete last batch decode too, but none of them was acknowledged. Before frames, any record.
std::optional<std::size_t> next_acknowledged(std::string_view data, std::size_t from, bool framed);

/// A batch written outside group commit: its frame, then `records` (encoded, `count` of them; none: the
/// empty frame that starts a log's framed part).
std::string framed_batch(std::string_view records = {}, std::size_t count = 0);

/// The guard batch written after a batch that holds a record write (wal_record.hpp).
std::string guard_batch();

/// The most grants a stretch of `bytes` lost bytes can have held: each took a record of at least
/// min_record_bytes.
std::uint64_t grants_bound(std::uint64_t bytes);

/// The snapshot of a table: its leases, then its records (an entry each, counted by the end record).
/// Encoded straight from the table: at a million leases a copy of its entries first would cost as much
/// memory again as the table's strings.
std::string encode_snapshot(std::uint64_t generation, const lock_table& table);

/// Writes `data` to a new file `name` and fsyncs it (its name is not durable yet). Throws.
void write_durably(storage& fs, const std::string& name, const std::string& data);

/// Renames `from` to `to` and fsyncs the directory. Throws.
void rename_durably(storage& fs, const std::string& from, const std::string& to);

}  // namespace data_files
}  // namespace baton::server
