// SPDX-License-Identifier: Apache-2.0
#pragma once
// The simulated disk under batond's journal: appends stay in a volatile cache until synced; a crash keeps
// the synced bytes and, when asked, a torn prefix of what was written after them. Faults are armed by the
// simulation before the journal's next flush (ENOSPC on write, EIO on sync, a crash inside a write).

#include "journal.hpp"
#include "scheduler.hpp"

#include <algorithm>
#include <cerrno>
#include <string>
#include <string_view>

namespace baton::sim {

class sim_disk : public server::log_device {
 public:
  explicit sim_disk(rng& r) : rng_(r) {}

  int write(std::string_view data) override {
    if (write_error_) return std::exchange(write_error_, 0);
    if (tear_write_) {
      // The process dies inside this write: part of it may reach the platter, none of it synced.
      tear_write_ = false;
      torn_ = true;
      cache_.append(data.substr(0, rng_.below(data.size() + 1)));
      return EIO;
    }
    cache_.append(data);
    return 0;
  }

  int sync() override {
    if (sync_error_) return std::exchange(sync_error_, 0);
    if (!lying_sync_) durable_ += cache_;
    cache_.clear();
    return 0;
  }

  void fail_next_write(int err) { write_error_ = err; }
  void fail_next_sync(int err) { sync_error_ = err; }
  void tear_next_write() { tear_write_ = true; }
  /// A disk that acknowledges syncs and keeps nothing (the `fsync-lies` bug switch).
  void lie_on_sync(bool on) { lying_sync_ = on; }
  /// True once a write was torn by a crash inside it.
  bool torn() const { return torn_; }

  /// What survives a crash: the synced bytes, plus (when `keep_torn`) some of the unsynced ones: half the
  /// time a prefix, otherwise any subset of their 512-byte sectors (a power cut: the disk orders nothing
  /// before a sync), zeros in place of a lost sector, up to the last kept one.
  std::string crash(bool keep_torn) {
    std::string kept = durable_;
    if (keep_torn && rng_.below(2) == 0) {
      kept += cache_.substr(0, rng_.below(cache_.size() + 1));
    } else if (keep_torn) {
      constexpr std::size_t sector = 512;
      std::size_t end = kept.size();
      for (std::size_t at = 0; at < cache_.size();) {
        // Sectors are aligned to the file's offsets: the first may be the rest of the last synced one.
        const std::size_t n = std::min(cache_.size() - at, sector - (durable_.size() + at) % sector);
        if (rng_.below(2) == 0) {
          kept.resize(durable_.size() + at, '\0');
          kept.append(cache_, at, n);
          end = kept.size();
        }
        at += n;
      }
      kept.resize(end);
    }
    cache_.clear();
    torn_ = false;
    return kept;
  }

  /// What syncs have made durable so far.
  const std::string& synced() const { return durable_; }

  /// The log as recovery left it (after a restart).
  void reset(std::string contents) {
    durable_ = std::move(contents);
    cache_.clear();
  }

 private:
  rng& rng_;
  std::string durable_;
  std::string cache_;
  int write_error_ = 0;
  int sync_error_ = 0;
  bool tear_write_ = false;
  bool torn_ = false;
  bool lying_sync_ = false;
};

}  // namespace baton::sim
