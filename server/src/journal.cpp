// SPDX-License-Identifier: Apache-2.0
#include "journal.hpp"
#include "planted_defects.hpp"

#include "baton/common/log.hpp"

#include <malloc.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <stdexcept>

namespace baton::server {
namespace fs = std::filesystem;
using namespace data_files;
namespace errc = boost::system::errc;

namespace {

std::string errno_text(int err) {
  return std::strerror(err);
}

}  // namespace

// Where the waiters of one executor complete. A group commit posts one handler per executor that
// completes all that executor's waiters of the batch in LSN order, instead of one handler per waiter (each
// an allocation, the scheduler's lock and perhaps a wake-up). The handler owns its waiters, so an executor
// that never runs it destroys them with it, as it destroyed the single handlers before. Completed vectors
// come back here and are filled again, so a batch allocates nothing once the vectors are large enough.
class journal::completion_queue : public std::enable_shared_from_this<completion_queue> {
 public:
  struct entry {
    handler_type handler;
    boost::system::error_code ec;
  };
  using batch = std::vector<entry>;

  explicit completion_queue(boost::asio::any_io_executor ex) : executor_(std::move(ex)) {}

  const boost::asio::any_io_executor& executor() const { return executor_; }

  /// An empty vector, with the capacity of one that completed before when there is one.
  batch take_spare() {
    std::lock_guard lk(mu_);
    if (spares_.empty()) return {};
    batch b = std::move(spares_.back());
    spares_.pop_back();
    return b;
  }

  /// Completes `b`'s entries, in order, in one handler on the executor.
  void post(batch b) {
    boost::asio::post(executor_, [q = shared_from_this(), b = std::move(b)]() mutable {
      for (auto& e : b)
        std::move(e.handler)(e.ec);
      b.clear();
      q->give_back(std::move(b));
    });
  }

  batch filling;  // guarded by the journal's mu_: this executor's waiters of the batch being completed

 private:
  void give_back(batch b) {
    std::lock_guard lk(mu_);
    if (spares_.size() < max_spares) spares_.push_back(std::move(b));
  }

  static constexpr std::size_t max_spares = 2;
  boost::asio::any_io_executor executor_;
  std::mutex mu_;
  std::vector<batch> spares_;  // guarded by mu_
};

struct journal::ready_batch {
  completion_queue* queue;
  completion_queue::batch entries;
};

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

void journal::start() {
  writer_ = std::thread([this] { run_writer(); });
  compactor_ = std::thread([this] { run_compactor(); });
}

std::uint64_t journal::append(record_type type, std::uint64_t token, std::uint64_t ttl_ms,
                              std::string_view key, std::string_view owner, std::string_view client,
                              std::string_view value) {
  std::uint64_t lsn;
  bool first;
  {
    std::lock_guard lk(mu_);
    first = pending_records_ == 0;
    lsn = queue_locked({type, token, ttl_ms, key, owner, client, value});
  }
  // Woken after the unlock, the writer takes mu_ at once instead of blocking on it again (two futex calls
  // per batch less). No wake-up is lost: the writer checks pending_ under mu_ before it waits.
  if (first) cv_.notify_one();
  return lsn;
}

std::uint64_t journal::append_together(const entry& first_record, const entry& second_record) {
  std::uint64_t lsn;
  bool first;
  {
    std::lock_guard lk(mu_);
    first = pending_records_ == 0;
    queue_locked(first_record);
    lsn = queue_locked(second_record);
  }
  if (first) cv_.notify_one();
  return lsn;
}

std::uint64_t journal::queue_locked(const entry& e) {
  if (pending_.empty()) pending_.append(batch_frame_size, '\0');  // the frame, written at the batch's end
  encode_record(e.type, e.token, e.ttl_ms, e.key, e.owner, pending_, e.client, e.value);
  pending_guard_ = pending_guard_ || e.type == record_type::lock_record || e.type == record_type::lock_delay;
  ++pending_records_;
  return ++last_lsn_;
}

std::uint64_t journal::last_appended() const {
  std::lock_guard lk(mu_);
  return last_lsn_;
}

std::uint64_t journal::durable() const {
  std::lock_guard lk(mu_);
  return durable_lsn_;
}

bool journal::failed() const {
  std::lock_guard lk(mu_);
  return failed_;
}

std::uint64_t journal::compactions() const {
  std::lock_guard lk(mu_);
  return compactions_;
}

std::string journal::failure_message() const {
  std::lock_guard lk(mu_);
  return failure_;
}

journal::completion_queue* journal::queue_for_locked(const boost::asio::any_io_executor& ex) {
  for (auto& q : queues_)
    if (q->executor() == ex) return q.get();
  return queues_.emplace_back(std::make_shared<completion_queue>(ex)).get();
}

void journal::enqueue_waiter(std::uint64_t lsn, boost::asio::any_io_executor ex, handler_type handler) {
  boost::system::error_code ec;
  {
    std::lock_guard lk(mu_);
    if (lsn > durable_lsn_) {
      if (!failed_ && !writer_done_) {
        waiters_.emplace_back(lsn, queue_for_locked(ex), std::move(handler));
        return;
      }
      ec = errc::make_error_code(errc::io_error);
    }
  }
  boost::asio::post(ex, [h = std::move(handler), ec]() mutable { std::move(h)(ec); });
}

// Takes every waiter for a record up to `up_to` and groups them by executor, each group in LSN order;
// `to_post` gets the groups, to be posted outside mu_ (a post takes the executor's own lock).
void journal::take_waiters_locked(std::uint64_t up_to, boost::system::error_code ec,
                                  std::vector<ready_batch>& to_post) {
  std::sort(waiters_.begin(), waiters_.end(), [](const waiter& a, const waiter& b) { return a.lsn < b.lsn; });
  auto end =
      std::partition_point(waiters_.begin(), waiters_.end(), [&](const waiter& w) { return w.lsn <= up_to; });
  std::size_t first = to_post.size();
  for (auto it = waiters_.begin(); it != end; ++it) {
    auto& filling = it->queue->filling;
    if (filling.empty()) {
      if (filling.capacity() == 0) filling = it->queue->take_spare();
      to_post.push_back({it->queue, {}});
    }
    filling.push_back({std::move(it->handler), ec});
  }
  waiters_.erase(waiters_.begin(), end);
  for (std::size_t i = first; i < to_post.size(); ++i)
    to_post[i].entries = std::move(to_post[i].queue->filling);
}

void journal::post_queues(std::vector<ready_batch>& to_post) {
  for (auto& b : to_post)
    b.queue->post(std::move(b.entries));
  to_post.clear();
}

void journal::poison(const std::string& message) {
  std::vector<ready_batch> to_post;
  bool first = false;
  {
    std::lock_guard lk(mu_);
    if (!failed_) {
      failed_ = true;
      first = true;
      failure_ = message;
    }
    take_waiters_locked(UINT64_MAX, errc::make_error_code(errc::io_error), to_post);
  }
  cv_.notify_all();
  compact_cv_.notify_all();
  if (metrics_) {
    metrics_->storage_errors.fetch_add(1, std::memory_order_relaxed);
    metrics_->storage_healthy.store(0, std::memory_order_relaxed);
  }
  post_queues(to_post);
  if (first && on_failure_) on_failure_(message);
}

int journal::write_log(const std::string& batch) {
  return fs_->write(wal_fd_, batch);
}

bool journal::write_batch(std::string& batch, std::uint64_t up_to_lsn, std::size_t records, bool guard) {
  auto started = clock::now();
  encode_batch_frame(std::string_view(batch).substr(batch_frame_size), records, batch.data());
  // In the same write as the record it guards, so that it is never durable without it (wal_record.hpp).
  if (guard) batch += guard_batch();
  if (int err = write_log(batch)) {
    poison("write " + wal_path(generation_) + ": " + errno_text(err));
    return false;
  }
  if (int err = fs_->sync_data(wal_fd_)) {
    poison("fdatasync " + wal_path(generation_) + ": " + errno_text(err));
    return false;
  }
  file_size_ += batch.size();
  if (metrics_) {
    metrics_->wal_bytes.store(file_size_, std::memory_order_relaxed);
    metrics_->fsync_batch_records.observe(static_cast<double>(records));
    metrics_->fsync_seconds.observe(std::chrono::duration<double>(clock::now() - started).count());
  }
  {
    std::lock_guard lk(mu_);
    durable_lsn_ = std::max(durable_lsn_, up_to_lsn);
    take_waiters_locked(durable_lsn_, {}, batch_to_post_);
  }
  post_queues(batch_to_post_);
  return true;
}

void journal::run_writer() {
  std::string batch;
  for (;;) {
    std::size_t records;
    std::uint64_t up_to;
    bool guard;
    {
      std::unique_lock lk(mu_);
      cv_.wait(lk, [&] { return !pending_.empty() || stopping_ || failed_; });
      if (pending_.empty() || failed_) break;  // stopping with nothing left, or poisoned
      take_batch_locked(batch, records, up_to, guard);
    }
    if (!write_batch(batch, up_to, records, guard)) break;
    if (file_size_ > options_.compact_bytes && !cut()) break;
  }
  end_writing();
}

void journal::take_batch_locked(std::string& batch, std::size_t& records, std::uint64_t& up_to, bool& guard) {
  batch.clear();
  batch.swap(pending_);  // keeps both buffers' capacity alive across batches
  records = pending_records_;
  pending_records_ = 0;
  guard = std::exchange(pending_guard_, false);
  up_to = last_lsn_;
}

bool journal::flush() {
  std::string batch;
  std::size_t records;
  std::uint64_t up_to;
  bool guard;
  {
    std::lock_guard lk(mu_);
    if (failed_) return false;
    if (pending_.empty()) return true;
    take_batch_locked(batch, records, up_to, guard);
  }
  return write_batch(batch, up_to, records, guard) && (file_size_ <= options_.compact_bytes || cut());
}

void journal::end_writing() {
  // Whatever is still waiting can never become durable: no writer will run again.
  std::vector<ready_batch> to_post;
  {
    std::lock_guard lk(mu_);
    writer_done_ = true;
    take_waiters_locked(UINT64_MAX, errc::make_error_code(errc::io_error), to_post);
  }
  compact_cv_.notify_all();
  post_queues(to_post);
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
    poison("open " + path + ": " + errno_text(-fd));
    return false;
  }
  // The new log starts with an empty frame, durable before any batch follows it, so that its first batch
  // torn by a power cut reads as a framed one.
  const std::string marker = framed_batch();
  int err = fs_->write(fd, marker);
  if (err == 0) err = fs_->sync_data(fd);
  if (err != 0) {
    fs_->close(fd);
    poison("write " + path + ": " + errno_text(err));
    return false;
  }
  if ((err = fs_->sync_dir()) != 0) {
    fs_->close(fd);
    poison("fsync directory " + fs_->path().string() + ": " + errno_text(err));
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
