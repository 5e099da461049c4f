// SPDX-License-Identifier: Apache-2.0
#pragma once
// The durable store of batond: a write-ahead log with group commit, snapshots and background compaction.
//
// Appends go to an in-memory batch; one writer thread writes each batch with a single write(2) and
// fdatasync(2), then completes every waiter whose record the batch covered. Concurrent requests therefore
// share one fsync.
//
// Compaction never touches the lock table or the service's mutex. When the current log grows past
// `compact_bytes`, the writer thread *cuts* it between two batches: it creates the next generation's log
// and appends there from then on. A separate compactor thread then rebuilds the table as of the cut from
// the files alone (the last snapshot plus the complete, fsynced logs before the cut), writes it as the new
// snapshot (write, fsync, rename, fsync the directory) and deletes the logs it covers. Group commit goes on
// meanwhile; a crash at any point leaves either the old snapshot with every log after it, or the new one.
//
// Files in the data directory:
//   LOCK                     flock()ed while a batond owns the directory
//   snapshot                 the lock table at the start of generation S (absent before the first compaction)
//   wal-<G as 16 hex>.log    records of generation G; recovery replays every G >= S in order
//   snapshot.tmp             a snapshot being written (removed at start-up)
//   wal-<G>.log.damaged      a damaged log kept by `batond repair` as evidence (never read)
//
// Any write, fsync or rename failure poisons the journal: nothing more is acknowledged, waiters fail, and
// the failure callback runs once so the server can stop (fail-stop, docs/design.md). After a failed fsync
// the kernel may have dropped the dirty pages, so retrying would risk acknowledging data that is not stored.

#include "data_files.hpp"
#include "lock_table.hpp"
#include "metrics.hpp"
#include "storage.hpp"
#include "wal_record.hpp"

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/system_executor.hpp>
#include <boost/system/error_code.hpp>

#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace baton::server {

/// Bounds of `compact_bytes` (and of batond's --compact-bytes).
inline constexpr std::uint64_t min_compact_bytes = 4096;
inline constexpr std::uint64_t max_compact_bytes = 1ull << 40;

struct journal_options {
  std::filesystem::path dir;
  /// Cut the current log (and compact in the background) once it is larger than this.
  std::uint64_t compact_bytes = 64ull << 20;
  /// Null (batond): the data directory `dir` on the real file system. Otherwise every file the journal
  /// reads or writes is in this storage (the deterministic simulation's file system); `dir` only names it.
  storage* fs = nullptr;
};

struct recovery_stats {
  std::uint64_t generation = 0;  // of the snapshot (0: none)
  std::uint64_t snapshot_entries = 0;
  std::uint64_t log_files = 0;
  std::uint64_t records = 0;
  std::uint64_t torn_bytes = 0;  // bytes of an incomplete last write, cut off the last log
  std::uint64_t restored_leases = 0;
  std::uint64_t last_token = 0;
};

class journal {
 public:
  using handler_type = boost::asio::any_completion_handler<void(boost::system::error_code)>;

  journal(journal_options options, server_metrics* metrics = nullptr);
  ~journal();
  journal(const journal&) = delete;
  journal& operator=(const journal&) = delete;

  /// Locks the data directory, recovers `table` from it (leases restored as valid for their TTL from
  /// `now`) and opens the log for appending. Throws journal_damaged for a damaged log, std::runtime_error
  /// with a readable message for anything else.
  recovery_stats open(lock_table& table, time_point now);

  /// Called once, from the writer or compactor thread, when the journal fails (the text says what failed).
  /// Set it before start().
  void on_failure(std::function<void(const std::string&)> callback) { on_failure_ = std::move(callback); }

  /// Starts the writer and compactor threads.
  void start();

  /// Without start(): writes what is queued as one batch (one write, one sync) on the calling thread,
  /// completes the waiters it covers and cuts the log when it has grown past `compact_bytes`, as the writer
  /// thread does. A single-threaded driver (the simulation) decides when the disk acts. Returns false once
  /// the journal has failed.
  bool flush();

  /// Without start(): runs the compaction a cut left waiting (if any) on the calling thread, as the
  /// compactor thread does. Returns false once the journal has failed.
  bool compact_now();
  /// True when a cut is waiting for its compaction.
  bool compaction_due() const;

  /// Queues a record; returns its log sequence number. Thread-safe. Callers that need the order of records
  /// to match the order of their effects call it while holding the lock that serialises those effects.
  std::uint64_t append(record_type type, std::uint64_t token, std::uint64_t ttl_ms, std::string_view key,
                       std::string_view owner = {}, std::string_view client = {},
                       std::string_view value = {});
  /// A record for append_together.
  struct entry {
    record_type type;
    std::uint64_t token;
    std::uint64_t ttl_ms;
    std::string_view key;
    std::string_view owner{};
    std::string_view client{};
    std::string_view value{};
  };
  /// Queues `first` and `second` under one hold of the lock, so the writer takes them into the same batch,
  /// which a crash keeps whole or not at all (wal_record.hpp, batch frames): for two records that mean one
  /// thing only together (a grant and its lease's lock-delay). Returns the second one's log sequence number.
  std::uint64_t append_together(const entry& first, const entry& second);

  std::uint64_t last_appended() const;
  std::uint64_t durable() const;
  bool failed() const;
  /// Compactions completed since start (tests, metrics).
  std::uint64_t compactions() const;

  /// Completes with no error once record `lsn` (and all before it) is on disk, or with an error if the
  /// journal failed. The handler runs on its associated executor. Thread-safe.
  template <class CompletionToken>
  auto async_wait_durable(std::uint64_t lsn, CompletionToken&& token) {
    return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code)>(
        [this, lsn](auto handler) {
          boost::asio::any_io_executor ex =
              boost::asio::get_associated_executor(handler, boost::asio::system_executor());
          enqueue_waiter(lsn, std::move(ex), handler_type(std::move(handler)));
        },
        token);
  }

  /// Writes everything queued, lets a running compaction finish, stops both threads and fails any
  /// remaining waiter. Idempotent.
  void stop();

  /// The error that poisoned the journal, as text (empty when healthy).
  std::string failure_message() const;

 private:
  // The waiters of one executor that are ready to complete (journal_completion_queue.hpp). A group commit
  // hands each executor's waiters over with one post instead of one per waiter.
  class completion_queue;
  struct waiter {
    std::uint64_t lsn;
    completion_queue* queue;  // owned by queues_
    handler_type handler;

    waiter(std::uint64_t l, completion_queue* q, handler_type h) : lsn(l), queue(q), handler(std::move(h)) {}
    waiter(waiter&&) noexcept = default;
    // Boost 1.81's any_completion_handler move assignment wraps the source in a new handler instead of
    // taking it (it calls the converting constructor on an lvalue); sorting and erasing need a real move.
    waiter& operator=(waiter&& other) noexcept {
      lsn = other.lsn;
      queue = other.queue;
      handler_type taken(std::move(other.handler));
      handler.swap(taken);
      return *this;
    }
  };
  void enqueue_waiter(std::uint64_t lsn, boost::asio::any_io_executor ex, handler_type handler);
  completion_queue* queue_for_locked(const boost::asio::any_io_executor& ex);
  struct ready_batch;
  void take_waiters_locked(std::uint64_t up_to, boost::system::error_code ec,
                           std::vector<ready_batch>& to_post);
  static void post_queues(std::vector<ready_batch>& to_post);
  void take_batch_locked(std::string& batch, std::size_t& records, std::uint64_t& up_to, bool& guard);
  /// Encodes one record into the pending batch; returns its log sequence number. mu_ held.
  std::uint64_t queue_locked(const entry& e);
  int write_log(const std::string& batch);
  void run_writer();
  void end_writing();
  void run_compactor();
  bool write_batch(std::string& batch, std::uint64_t up_to_lsn, std::size_t records, bool guard);
  bool cut();
  bool compact_waiting();
  void compact(std::uint64_t up_to_generation);
  void poison(const std::string& message);
  std::string wal_path(std::uint64_t generation) const;

  journal_options options_;
  server_metrics* metrics_;
  std::function<void(const std::string&)> on_failure_;

  std::unique_ptr<storage> own_fs_;  // when options_.fs is null
  storage* fs_;
  int wal_fd_ = -1;               // writer thread only (after open)
  std::uint64_t generation_ = 0;  // of the log being appended to; writer thread only
  std::uint64_t file_size_ = 0;   // writer thread only

  mutable std::mutex mu_;
  std::condition_variable cv_;          // writer: records queued, or stopping
  std::condition_variable compact_cv_;  // compactor: a cut to compact, or stopping
  std::string pending_;
  std::size_t pending_records_ = 0;
  bool pending_guard_ = false;  // pending_ holds a record write: its batch gets a guard (wal_record.hpp)
  std::uint64_t last_lsn_ = 0;
  std::uint64_t durable_lsn_ = 0;
  bool stopping_ = false;
  bool writer_done_ = false;
  bool failed_ = false;
  std::string failure_;
  std::uint64_t compact_up_to_ = 0;  // a cut waiting for the compactor: the first generation it keeps
  bool compacting_ = false;          // a cut was made and its snapshot is not installed yet
  std::uint64_t compactions_ = 0;
  std::vector<waiter> waiters_;                            // in no particular order
  std::vector<std::shared_ptr<completion_queue>> queues_;  // one per executor ever waited on; never shrinks
  std::vector<ready_batch> batch_to_post_;                 // write_batch's, kept for its capacity
  std::thread writer_;
  std::thread compactor_;
};

}  // namespace baton::server
