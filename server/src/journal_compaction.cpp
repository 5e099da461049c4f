// SPDX-License-Identifier: Apache-2.0
// The journal's compaction: a cut starts a new log once the current one has grown past compact_bytes, and the
// compactor rebuilds the table from the complete files into a snapshot that replaces them.
#include "journal.hpp"

#include "baton/common/log.hpp"

#include <malloc.h>

#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>

namespace baton::server {
using namespace data_files;

std::uint64_t journal::compactions() const {
  std::lock_guard lk(mu_);
  return compactions_;
}

bool journal::cut() {
  {
    std::lock_guard lk(mu_);
    if (compacting_) return true;  // the previous cut is still being compacted; this log just grows
  }
  // Everything written so far to the current log is durable (write_batch fsynced it): it is complete, and
  // the compactor may read it while appends go to the next generation.
  std::uint64_t next = generation_ + 1;
  const auto path = wal_path(next);
  int fd = fs_->open(wal_name(next), /*truncate=*/true);
  if (fd < 0) {
    poison("open " + path + ": " + std::strerror(-fd));
    return false;
  }
  // The new log starts with an empty frame, durable before any batch follows it, so that its first batch
  // torn by a power cut reads as a framed one.
  const std::string marker = framed_batch();
  int err = fs_->write(fd, marker);
  if (err == 0) err = fs_->sync_data(fd);
  if (err != 0) {
    fs_->close(fd);
    poison("write " + path + ": " + std::strerror(err));
    return false;
  }
  if ((err = fs_->sync_dir()) != 0) {
    fs_->close(fd);
    poison("fsync directory " + fs_->path().string() + ": " + std::strerror(err));
    return false;
  }
  fs_->close(wal_fd_);
  wal_fd_ = fd;
  generation_ = next;
  file_size_ = marker.size();
  if (metrics_) metrics_->wal_bytes.store(file_size_, std::memory_order_relaxed);
  {
    std::lock_guard lk(mu_);
    compacting_ = true;
    compact_up_to_ = next;
  }
  compact_cv_.notify_one();
  return true;
}

void journal::run_compactor() {
  for (;;) {
    {
      std::unique_lock lk(mu_);
      compact_cv_.wait(lk, [&] { return compact_up_to_ != 0 || writer_done_ || failed_; });
      if (compact_up_to_ == 0 || failed_) return;
    }
    if (!compact_waiting()) return;
  }
}

bool journal::compact_now() {
  {
    std::lock_guard lk(mu_);
    if (failed_) return false;
    if (compact_up_to_ == 0) return true;
  }
  return compact_waiting();
}

bool journal::compaction_due() const {
  std::lock_guard lk(mu_);
  return compact_up_to_ != 0;
}

bool journal::compact_waiting() {
  std::uint64_t up_to;
  {
    std::lock_guard lk(mu_);
    up_to = std::exchange(compact_up_to_, 0);
  }
  try {
    compact(up_to);
  } catch (const std::exception& e) {
    poison(std::string("compaction: ") + e.what());
    return false;
  }
#ifdef __GLIBC__
  // The compaction rebuilt a whole table, and its snapshot, on this thread: freed now, but glibc keeps
  // the memory in this thread's arena. Filling batond with two million leases (one compaction on the way)
  // left 281 B of RSS per lease where a million (none yet) measured 181 (docs/benchmarks.md, "A million
  // held leases"). Give it back to the system.
  ::malloc_trim(0);
#endif
  std::lock_guard lk(mu_);
  compacting_ = false;
  ++compactions_;
  return true;
}

void journal::compact(std::uint64_t up_to_generation) {
  auto started = clock::now();
  // Rebuild the table as of the cut from the files alone: they are complete and no longer written.
  lock_table table;
  std::uint64_t entries = 0, records = 0;
  const time_point now{};  // expiry instants do not matter here, only tokens and restore TTLs
  std::uint64_t from = load_snapshot(*fs_, table, now, entries);
  for (std::uint64_t g = from; g < up_to_generation; ++g) {
    std::string data = read_all(*fs_, wal_name(g));
    if (replay_valid_prefix(data, table, now, records).valid != data.size())
      throw std::runtime_error(wal_path(g) + " no longer decodes after it was written and fsynced");
  }
  std::string data = encode_snapshot(up_to_generation, table);
  write_durably(*fs_, snapshot_tmp_name, data);
  rename_durably(*fs_, snapshot_tmp_name, snapshot_name);
  for (std::uint64_t g = from; g < up_to_generation; ++g)
    fs_->remove(wal_name(g));
  log::info("wal_compacted",
            {{"generation", up_to_generation},
             {"entries", table.size()},
             {"records", records},
             {"snapshot_bytes", data.size()},
             {"ms", std::chrono::duration_cast<milliseconds>(clock::now() - started).count()}});
}

}  // namespace baton::server
