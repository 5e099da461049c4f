#pragma once
// The durable store of batond: a write-ahead log with group commit, snapshots and compaction.
//
// Appends go to an in-memory batch; one writer thread writes each batch with a single write(2) and
// fdatasync(2), then completes every waiter whose record the batch covered. Concurrent requests therefore
// share one fsync. When the log grows past `compact_bytes`, the writer takes a snapshot of the lock table
// (through the snapshot source, atomically with a cut of the log), writes it with write-fsync-rename and
// starts a new log generation.
//
// Files in the data directory:
//   LOCK                     flock()ed while a batond owns the directory
//   snapshot                 the lock table at the start of generation G (absent before the first compaction)
//   wal-<G as 16 hex>.log    records since that snapshot
//
// Any write or fsync failure poisons the journal: nothing more is acknowledged until a restart recovers
// from what is on disk. After a failed fsync the kernel may have dropped the dirty pages, so retrying
// would risk acknowledging data that is not stored.

#include "lock_table.hpp"
#include "metrics.hpp"
#include "wal_record.hpp"

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/system_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/post.hpp>
#include <boost/system/error_code.hpp>

#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>

namespace baton::server {

struct journal_options {
  std::filesystem::path dir;
  /// Compact once the current log file is larger than this.
  std::uint64_t compact_bytes = 64ull << 20;
};

struct recovery_stats {
  std::uint64_t generation = 0;
  std::uint64_t snapshot_entries = 0;
  std::uint64_t records = 0;
  std::uint64_t torn_bytes = 0;  // bytes of an incomplete last record, cut off
  std::uint64_t restored_leases = 0;
  std::uint64_t last_token = 0;
};

/// Applies one log record to the table during recovery (pure; exposed for tests).
void replay_record(lock_table& table, const wal_record& r, time_point now);

class journal {
 public:
  using handler_type = boost::asio::any_completion_handler<void(boost::system::error_code)>;
  /// Called by the writer thread to compact: must, atomically with respect to appends, call `mark_cut()`
  /// and return the table's snapshot and last issued token.
  using snapshot_source = std::function<std::pair<std::uint64_t, std::vector<snapshot_entry>>()>;

  journal(journal_options options, server_metrics* metrics = nullptr);
  ~journal();
  journal(const journal&) = delete;
  journal& operator=(const journal&) = delete;

  /// Locks the data directory, recovers `table` from it (leases restored as valid for their TTL from
  /// `now`) and opens the log for appending. Throws std::runtime_error with a readable message.
  recovery_stats open(lock_table& table, time_point now);

  /// Starts the writer thread.
  void start(snapshot_source source);

  /// Queues a record; returns its log sequence number. Thread-safe. Callers that need the order of records
  /// to match the order of their effects call it while holding the lock that serialises those effects.
  std::uint64_t append(record_type type, std::uint64_t token, std::uint64_t ttl_ms, std::string_view key,
                       std::string_view owner = {}, std::string_view client = {});

  /// Marks the current end of the queued records as the end of the generation being compacted.
  void mark_cut();

  std::uint64_t last_appended() const;
  std::uint64_t durable() const;
  bool failed() const;

  /// Completes with no error once record `lsn` (and all before it) is on disk, or with an error if the
  /// journal failed. The handler runs on its associated executor. Thread-safe.
  template <class CompletionToken>
  auto async_wait_durable(std::uint64_t lsn, CompletionToken&& token) {
    return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code)>(
        [this, lsn](auto handler) {
          boost::asio::any_io_executor ex =
              boost::asio::get_associated_executor(handler, boost::asio::system_executor());
          enqueue_waiter(lsn, waiter{std::move(ex), handler_type(std::move(handler))});
        },
        token);
  }

  /// Writes everything queued, stops the writer thread and fails any remaining waiter. Idempotent.
  void stop();

  /// The error that poisoned the journal, as text (empty when healthy).
  std::string failure_message() const;

 private:
  struct waiter {
    boost::asio::any_io_executor executor;
    handler_type handler;
  };
  void enqueue_waiter(std::uint64_t lsn, waiter w);
  void run();
  bool write_batch(const std::string& batch, std::uint64_t up_to_lsn, std::size_t records);
  void compact();
  static void complete_waiters(std::vector<waiter>& ready, boost::system::error_code ec);
  void poison(const std::string& what, int err);
  std::filesystem::path wal_path(std::uint64_t generation) const;

  journal_options options_;
  server_metrics* metrics_;
  snapshot_source snapshot_source_;

  int lock_fd_ = -1;
  int wal_fd_ = -1;
  std::uint64_t generation_ = 0;
  std::uint64_t file_size_ = 0;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::string pending_;
  std::size_t pending_records_ = 0;
  std::size_t cut_offset_ = 0;
  std::uint64_t cut_lsn_ = 0;
  bool cut_marked_ = false;
  std::uint64_t last_lsn_ = 0;
  std::uint64_t durable_lsn_ = 0;
  bool stopping_ = false;
  bool failed_ = false;
  std::string failure_;
  std::multimap<std::uint64_t, waiter> waiters_;
  std::thread writer_;
};

}  // namespace baton::server
