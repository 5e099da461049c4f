// SPDX-License-Identifier: Apache-2.0
#pragma once
// The file-system calls batond's journal makes in its data directory, and nothing else: files named by
// their leaf name, appended to and never overwritten in place, made durable by fdatasync, fsync and a
// directory fsync (a new, renamed or removed name lasts a power cut only once its directory was fsynced).
//
// batond uses posix_storage. The deterministic simulation (tests/sim) supplies a file system of its own,
// with a page cache a kill -9 keeps and a power cut loses, so that it runs the journal's real recovery,
// cuts and compaction against the faults a disk really has.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace baton::server {

class storage {
 public:
  virtual ~storage() = default;

  /// The data directory, for messages.
  virtual const std::filesystem::path& path() const = 0;

  /// Takes the data directory for this process: creates it when `create` (each new directory made
  /// durable in its parent) and locks it so that no second server uses it. Throws std::runtime_error
  /// with a readable message (missing directory, another batond holds it, a call failed). Once taken, the
  /// directory stays this storage's until it is destroyed; taking it again does nothing.
  virtual void take(bool create) = 0;

  /// Makes the data directory's own name durable in its parent, and the parent's in its own up to the
  /// root (above the parent, a directory that cannot be opened or fsynced is passed over). 0 or an errno.
  virtual int sync_parents() = 0;

  /// The names in the directory. 0 or an errno.
  virtual int list(std::vector<std::string>& names) = 0;
  /// The whole contents of `name`. 0, ENOENT when there is no such file, or another errno.
  virtual int read(const std::string& name, std::string& out) = 0;

  /// Opens `name` for appending, creating it when missing and emptying it when `truncate`. Returns a
  /// handle (>= 0) or minus an errno.
  virtual int open(const std::string& name, bool truncate) = 0;
  /// Appends all of `data`. 0 or an errno (the file may then hold a prefix of it).
  virtual int write(int handle, std::string_view data) = 0;
  /// fdatasync: the file's contents (and the size reading them needs) are durable. 0 or an errno.
  virtual int sync_data(int handle) = 0;
  /// fsync: the contents and every attribute, its size included. 0 or an errno.
  virtual int sync(int handle) = 0;
  virtual void close(int handle) = 0;

  /// Cuts `name` to `size` bytes (durable once the file is fsynced). 0 or an errno.
  virtual int truncate(const std::string& name, std::uint64_t size) = 0;
  /// Each of these changes a name: durable once sync_dir() returned 0. 0 or an errno.
  virtual int rename(const std::string& from, const std::string& to) = 0;
  virtual int link(const std::string& from, const std::string& to) = 0;
  virtual int remove(const std::string& name) = 0;  // ENOENT when there is no such name
  /// fsync of the directory: every name change before it is durable. 0 or an errno.
  virtual int sync_dir() = 0;
};

/// The data directory `dir` on the real file system (open(2), fdatasync(2), flock(2) on `dir/LOCK`).
std::unique_ptr<storage> make_posix_storage(std::filesystem::path dir);

}  // namespace baton::server
