// SPDX-License-Identifier: Apache-2.0
// The journal's life: its storage, the writer and compactor threads it starts and stops. What each part does
// is in a file of its own: journal_recovery.cpp (open: replay and repair of the tail),
// journal_group_commit.cpp (appends, batches, durable answers), journal_compaction.cpp (cuts and snapshots).
#include "journal.hpp"
#include "journal_completion_queue.hpp"

#include <utility>

namespace baton::server {
using namespace data_files;

journal::journal(journal_options options, server_metrics* metrics)
    : options_(std::move(options)),
      metrics_(metrics),
      own_fs_(options_.fs ? nullptr : make_posix_storage(options_.dir)),
      fs_(options_.fs ? options_.fs : own_fs_.get()) {}

journal::~journal() {
  stop();
  if (wal_fd_ >= 0) fs_->close(wal_fd_);
}

std::string journal::wal_path(std::uint64_t generation) const {
  return (fs_->path() / wal_name(generation)).string();
}

void journal::start() {
  writer_ = std::thread([this] { run_writer(); });
  compactor_ = std::thread([this] { run_compactor(); });
}

void journal::stop() {
  {
    std::lock_guard lk(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (writer_.joinable()) writer_.join();
  end_writing();  // also when the writer never started
  if (compactor_.joinable()) compactor_.join();
}

}  // namespace baton::server
