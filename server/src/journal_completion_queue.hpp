// SPDX-License-Identifier: Apache-2.0
#pragma once
// Private to the journal: where the waiters of one executor complete (journal_group_commit.cpp fills and
// posts them; journal.cpp owns them).

#include "journal.hpp"

#include <boost/asio/post.hpp>

#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace baton::server {

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

}  // namespace baton::server
