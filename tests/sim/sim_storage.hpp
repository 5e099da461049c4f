// SPDX-License-Identifier: Apache-2.0
#pragma once
// The simulated file system under batond's journal (server/src/storage.hpp): one data directory whose
// files and names each have two states, what the running process sees (the page cache) and what the disk
// holds. A file's contents reach the disk at its fdatasync or fsync; a name (created, renamed, linked,
// removed) at the directory's fsync. A kill -9 loses neither: the page cache outlives the process. A power
// cut keeps what reached the disk, and when asked, some of the rest: any subset of a file's unsynced
// sectors (the disk orders nothing before a sync), and the name changes since the last directory fsync up
// to one of them (a journalling file system commits them in order, but only a directory fsync says when).
//
// Faults are armed by the simulation and hit the journal's next call of their kind: an errno from a write,
// an fdatasync or a directory fsync, or the process dying at its n-th call from now (a write it dies in
// leaves a prefix in the page cache). A dead process's calls fail with EIO and change nothing; the
// simulation then kills it. Armed faults die with the process.

#include "scheduler.hpp"
#include "storage.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <filesystem>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace baton::sim {

class sim_storage : public server::storage {
 public:
  sim_storage(rng& r, std::filesystem::path name) : rng_(r), name_(std::move(name)) {}

  // ---- storage -------------------------------------------------------------------------------------
  const std::filesystem::path& path() const override { return name_; }
  void take(bool) override {
    if (int err = call())
      throw std::runtime_error("take " + name_.string() + ": errno " + std::to_string(err));
  }
  int sync_parents() override { return call(); }

  int list(std::vector<std::string>& names) override {
    if (int err = call()) return err;
    for (const auto& [name, ino] : names_)
      names.push_back(name);
    return 0;
  }
  int read(const std::string& name, std::string& out) override {
    if (int err = call()) return err;
    auto it = names_.find(name);
    if (it == names_.end()) return ENOENT;
    out = inodes_.at(it->second).cached;
    return 0;
  }

  int open(const std::string& name, bool truncate) override {
    if (int err = call()) return -err;
    auto it = names_.find(name);
    if (it == names_.end()) {
      const auto ino = next_inode_++;
      inodes_[ino];
      it = names_.emplace(name, ino).first;
      changed(dir_op{dir_op::bind, name, ino});
    }
    if (truncate) inodes_.at(it->second).cached.clear();
    handles_[next_handle_] = it->second;
    return next_handle_++;
  }
  int write(int handle, std::string_view data) override {
    if (int err = std::exchange(write_error_, 0)) return err;
    const bool dies = dies_now();
    if (dead_ && !dies) return EIO;
    auto& f = file(handle);
    if (dies) {
      // The process dies inside this write: part of it may already be in the page cache.
      f.cached.append(data.substr(0, rng_.below(data.size() + 1)));
      return EIO;
    }
    f.cached.append(data);
    return 0;
  }
  int sync_data(int handle) override {
    if (int err = std::exchange(sync_error_, 0)) return err;
    if (int err = call()) return err;
    sync_file(file(handle));
    return 0;
  }
  int sync(int handle) override { return sync_data(handle); }
  void close(int handle) override { handles_.erase(handle); }

  int truncate(const std::string& name, std::uint64_t size) override {
    if (int err = call()) return err;
    auto it = names_.find(name);
    if (it == names_.end()) return ENOENT;
    auto& f = inodes_.at(it->second);
    if (size < f.cached.size()) f.cached.resize(size);
    return 0;
  }
  int rename(const std::string& from, const std::string& to) override {
    if (int err = call()) return err;
    auto it = names_.find(from);
    if (it == names_.end()) return ENOENT;
    const auto ino = it->second;
    names_.erase(it);
    names_[to] = ino;
    changed(dir_op{dir_op::unbind, from, 0});
    changed(dir_op{dir_op::bind, to, ino});
    return 0;
  }
  int link(const std::string& from, const std::string& to) override {
    if (int err = call()) return err;
    auto it = names_.find(from);
    if (it == names_.end()) return ENOENT;
    if (names_.contains(to)) return EEXIST;
    names_[to] = it->second;
    changed(dir_op{dir_op::bind, to, it->second});
    return 0;
  }
  int remove(const std::string& name) override {
    if (int err = call()) return err;
    if (names_.erase(name) == 0) return ENOENT;
    changed(dir_op{dir_op::unbind, name, 0});
    return 0;
  }
  int sync_dir() override {
    if (int err = std::exchange(dir_sync_error_, 0)) return err;
    if (int err = call()) return err;
    if (skipping_start_sync_ && starting_ && !changed_in_start_) return 0;  // the planted defect
    if (!lying_sync_) {
      disk_names_ = names_;
      unsynced_.clear();
    }
    return 0;
  }

  // ---- faults --------------------------------------------------------------------------------------
  void fail_next_write(int err) { write_error_ = err; }
  void fail_next_sync(int err) { sync_error_ = err; }
  void fail_next_dir_sync(int err) { dir_sync_error_ = err; }
  /// The process dies at its `n`-th call from now (n >= 1).
  void die_at_call(std::uint64_t n) { die_in_ = n; }
  bool dead() const { return dead_; }
  /// A disk that acknowledges syncs and keeps nothing (the `fsync-lies` bug switch).
  void lie_on_sync(bool on) { lying_sync_ = on; }
  /// The `start-skips-dir-sync` bug switch: a start that created or removed no log leaves the directory
  /// unsynced, as batond did before every start fsynced it (issue 24's first defect).
  void skip_start_dir_sync(bool on) { skipping_start_sync_ = on; }
  /// Around journal::open: what the planted defect calls a start.
  void start_begins() {
    starting_ = true;
    changed_in_start_ = false;
  }
  void start_ends() { starting_ = false; }

  // ---- crashes -------------------------------------------------------------------------------------
  /// The process is gone (kill -9, or its own exit): its handles and armed faults go with it; the page
  /// cache stays.
  void kill() {
    handles_.clear();
    dead_ = false;
    die_in_ = 0;
    write_error_ = sync_error_ = dir_sync_error_ = 0;
    starting_ = false;
  }

  /// The machine loses power (the process, if any, dies with it): the disk keeps what was synced and, when
  /// `keep_some`, a random part of the rest (above).
  void power_cut(bool keep_some) {
    kill();
    names_ = disk_names_;
    if (keep_some) {
      const auto kept = rng_.below(unsynced_.size() + 1);
      for (std::size_t i = 0; i < kept; ++i)
        apply(unsynced_[i], names_);
    }
    unsynced_.clear();
    disk_names_ = names_;
    for (auto& [ino, f] : inodes_) {
      std::string kept = f.durable;
      if (keep_some && f.cached.size() > f.durable.size() && f.cached.starts_with(f.durable))
        keep_sectors(f, kept);
      f.cached = f.durable = std::move(kept);
    }
    std::erase_if(inodes_, [&](const auto& e) {
      return std::none_of(names_.begin(), names_.end(), [&](const auto& n) { return n.second == e.first; });
    });
  }

  // ---- inspection (the bitflip fault) --------------------------------------------------------------
  /// The file `name` as the page cache has it; empty when there is none.
  std::string contents(const std::string& name) const {
    auto it = names_.find(name);
    return it == names_.end() ? std::string() : inodes_.at(it->second).cached;
  }
  /// Replaces an existing file's contents on the disk and in the cache (damage made while batond is down).
  void overwrite(const std::string& name, std::string data) {
    auto& f = inodes_.at(names_.at(name));
    f.cached = f.durable = std::move(data);
  }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& [name, ino] : names_)
      out.push_back(name);
    return out;
  }

 private:
  struct inode {
    std::string cached;   // what the process reads
    std::string durable;  // what the disk holds
  };
  struct dir_op {
    enum kind_t { bind, unbind } kind;
    std::string name;
    std::uint64_t ino;
  };

  static void apply(const dir_op& op, std::map<std::string, std::uint64_t>& names) {
    if (op.kind == dir_op::bind)
      names[op.name] = op.ino;
    else
      names.erase(op.name);
  }

  // Every call but a write: EIO once the process is dead (or dies at this one).
  int call() {
    if (dies_now() || dead_) return EIO;
    return 0;
  }
  bool dies_now() {
    if (dead_ || die_in_ == 0 || --die_in_ != 0) return false;
    dead_ = true;
    return true;
  }

  void changed(dir_op op) {
    if (starting_ && op.name.rfind("wal-", 0) == 0) changed_in_start_ = true;
    unsynced_.push_back(std::move(op));
  }

  inode& file(int handle) { return inodes_.at(handles_.at(handle)); }

  void sync_file(inode& f) {
    if (!lying_sync_) f.durable = f.cached;
  }

  // A power cut keeps any subset of the unsynced sectors half the time, a prefix of them otherwise; zeros
  // in place of a lost sector, up to the last kept one. Sectors are aligned to the file's offsets: the
  // first may be the rest of the last synced one.
  void keep_sectors(const inode& f, std::string& kept) {
    const std::string_view extra = std::string_view(f.cached).substr(f.durable.size());
    if (rng_.below(2) == 0) {
      kept.append(extra.substr(0, rng_.below(extra.size() + 1)));
      return;
    }
    constexpr std::size_t sector = 512;
    std::size_t end = kept.size();
    for (std::size_t at = 0; at < extra.size();) {
      const std::size_t n = std::min(extra.size() - at, sector - (f.durable.size() + at) % sector);
      if (rng_.below(2) == 0) {
        kept.resize(f.durable.size() + at, '\0');
        kept.append(extra.substr(at, n));
        end = kept.size();
      }
      at += n;
    }
    kept.resize(end);
  }

  rng& rng_;
  std::filesystem::path name_;
  std::map<std::uint64_t, inode> inodes_;
  std::map<std::string, std::uint64_t> names_;       // the directory as the process sees it
  std::map<std::string, std::uint64_t> disk_names_;  // as of the last directory fsync
  std::vector<dir_op> unsynced_;                     // name changes since then, in order
  std::map<int, std::uint64_t> handles_;
  std::uint64_t next_inode_ = 1;
  int next_handle_ = 3;
  int write_error_ = 0;
  int sync_error_ = 0;
  int dir_sync_error_ = 0;
  std::uint64_t die_in_ = 0;
  bool dead_ = false;
  bool lying_sync_ = false;
  bool skipping_start_sync_ = false;
  bool starting_ = false;
  bool changed_in_start_ = false;
};

}  // namespace baton::sim
