// SPDX-License-Identifier: Apache-2.0
// journal::open: recovery. Replays the snapshot and the logs into the table, tells a torn tail (cut) from
// damage to acknowledged data (refused), and makes everything replayed durable before the first answer.
#include "journal.hpp"
#include "planted_defects.hpp"

#include "baton/common/log.hpp"

#include <string>
#include <utility>
#include <vector>

namespace baton::server {
using namespace data_files;

recovery_stats journal::open(lock_table& table, time_point now) {
  fs_->take(/*create=*/true);
  fs_->remove(snapshot_tmp_name);  // a compaction cut short by a crash

  recovery_stats stats;
  stats.generation = load_snapshot(*fs_, table, now, stats.snapshot_entries);

  auto logs = list_logs(*fs_);
  std::vector<std::string> covered;
  check_log_sequence(*fs_, stats.generation, logs, &covered);
  for (const auto& name : covered)
    fs_->remove(name);  // a crash between snapshot install and their removal

  bool last_framed = false, floor_raised = false;
  for (std::size_t i = 0; i < logs.size(); ++i) {
    const auto& name = logs[i].second;
    const auto path = fs_->path() / name;
    std::string data = read_all(*fs_, name);
    const auto scan = replay_valid_prefix(data, table, now, stats.records);
    const std::size_t valid = scan.valid;
    bool last = i + 1 == logs.size();
    if (valid < data.size()) {
      // Only the last batch of the last log may be incomplete: it was never acknowledged (answers wait for
      // its fdatasync), so cutting it loses nothing a client was told, even when a power cut kept some of
      // its sectors and lost others. Anything else (a bad record in an older, complete log, or a whole
      // batch after the bad one) is damage to acknowledged data.
      if (!last) throw journal_damaged(path, valid, "a record does not decode in a complete log");
      if (auto next = next_acknowledged(data, valid + 1, scan.framed && !BATON_PLANTED(ignore_batch_frames));
          next && !BATON_PLANTED(cut_at_damaged_record))
        throw journal_damaged(
            path, valid, "a record does not decode and a valid one follows at byte " + std::to_string(*next));
      stats.torn_bytes = data.size() - valid;
      // Damage to the last batch reads the same as a torn write, so the cut part may have been an
      // acknowledged batch that the disk lost: no token it could have held is issued again.
      table.observe_token(table.last_token() + grants_bound(stats.torn_bytes));
      floor_raised = true;
      log::warn("wal_torn_tail", {{"file", path.string()}, {"offset", valid}, {"bytes", stats.torn_bytes}});
      if (int err = fs_->truncate(name, valid)) fail("truncate " + path.string(), err);
    }
    if (last) {
      generation_ = logs[i].first;
      file_size_ = valid;
      last_framed = scan.framed;
    }
  }
  stats.log_files = logs.size();

  bool existed = !logs.empty();
  if (!existed) generation_ = stats.generation;
  const auto path = wal_path(generation_);
  wal_fd_ = fs_->open(wal_name(generation_), /*truncate=*/false);
  if (wal_fd_ < 0) fail("open " + path, -std::exchange(wal_fd_, -1));
  // A log that holds no frame yet (new, or written before frames) gets one first, so that a batch torn by
  // a power cut is always read as a framed one: an empty one, or the batch of the token floor. The floor
  // a cut tail raised is logged before any answer, or a second restart before the next grant would go back
  // to the counter the cut left and could issue a token the lost bytes held.
  if (!last_framed || floor_raised) {
    std::string floor;
    if (floor_raised) encode_record(record_type::token_floor, table.last_token(), 0, {}, {}, floor);
    const std::string head = framed_batch(floor, floor_raised ? 1 : 0);
    if (int err = write_log(head)) fail("write " + path, err);
    file_size_ += head.size();
  }
  // Everything replayed becomes durable before the first answer that depends on it: the last log's bytes
  // (a batch written before a failed fdatasync is still in the page cache, and was just replayed), the
  // truncation of its torn tail, and every name in the directory (a log created just before a crash or a
  // failed directory fsync, the snapshot's rename, the removal of covered logs), then the directory's own
  // name in its parents.
  if (int err = fs_->sync(wal_fd_)) fail("fsync " + path, err);  // fsync: the truncation's size too
  if (int err = fs_->sync_dir()) fail("fsync directory " + fs_->path().string(), err);
  if (int err = fs_->sync_parents()) fail("fsync the parents of " + fs_->path().string(), err);

  stats.restored_leases = table.size();
  stats.last_token = table.last_token();
  if (metrics_) {
    metrics_->wal_bytes.store(file_size_, std::memory_order_relaxed);
    metrics_->last_token.store(stats.last_token, std::memory_order_relaxed);
  }
  return stats;
}

}  // namespace baton::server
