// SPDX-License-Identifier: Apache-2.0
// The journal's group commit: records queued under the caller's lock, written and synced in batches by one
// writer, and the waiters of each durable batch completed per executor; a failed write or sync poisons the
// journal.
#include "journal.hpp"
#include "journal_completion_queue.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace baton::server {
using namespace data_files;
namespace errc = boost::system::errc;

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
    poison("write " + wal_path(generation_) + ": " + std::strerror(err));
    return false;
  }
  if (int err = fs_->sync_data(wal_fd_)) {
    poison("fdatasync " + wal_path(generation_) + ": " + std::strerror(err));
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

}  // namespace baton::server
