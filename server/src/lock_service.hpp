#pragma once
// The lock service: the lock table made durable and shared between threads.
//
// One mutex serialises every table operation together with the append of its log record, so the log's
// order is the order of effects (per-key linearizability). Answers that report a change (a grant, a
// release) or that read state another request may have changed wait until the log is durable up to that
// point: nothing is ever acknowledged that a crash could take back. Renew changes no durable state (unless
// the TTL grows) and is answered from memory.
//
// Long-poll waiters park on a timer of their own executor; a change to their key cancels the timer.

#include "journal.hpp"
#include "lock_table.hpp"
#include "metrics.hpp"
#include "protocol.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>

#include <memory>
#include <mutex>
#include <stdexcept>
#include <unordered_map>
#include <vector>

namespace baton::server {

/// Thrown when the journal cannot store a change; the request is answered 503.
struct storage_unavailable : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class lock_service {
 public:
  lock_service(journal& j, server_metrics& metrics);

  /// The table, for recovery before the service starts serving.
  lock_table& table() { return table_; }

  /// Connects the journal's compaction to this table (call once, before serving).
  journal::snapshot_source snapshot_source();

  // `client` is the authenticated name of the caller (empty without authentication); see lock_table.
  boost::asio::awaitable<acquire_result> acquire(std::string_view key, std::string_view owner,
                                                 milliseconds ttl, std::string_view client = {});
  boost::asio::awaitable<renew_result> renew(std::string_view key, std::string_view owner,
                                             std::uint64_t token, milliseconds ttl,
                                             std::string_view client = {});
  boost::asio::awaitable<release_result> release(std::string_view key, std::string_view owner,
                                                 std::uint64_t token, std::string_view client = {});
  boost::asio::awaitable<std::optional<lease_view>> get(std::string_view key);

  /// Long-poll: answers as soon as the holder's token differs from `token` (0 = free), or after `wait`.
  /// Must run on a single-threaded executor (each batond worker thread has its own io_context).
  boost::asio::awaitable<std::optional<lease_view>> wait(std::string_view key, std::uint64_t token,
                                                          milliseconds wait);

  /// Removes expired leases, logs their expiry and wakes their waiters. Returns how many expired. Works in
  /// steps of a few thousand hash buckets and lets requests in between, so a large table never stalls them.
  std::size_t sweep();

  /// Wakes every long-poll waiter and makes new ones answer at once (shutdown).
  void wake_all();

 private:
  struct waiter {
    boost::asio::steady_timer timer;
    explicit waiter(const boost::asio::any_io_executor& ex) : timer(ex) {}
  };

  boost::asio::awaitable<void> wait_durable(std::uint64_t lsn);
  void notify_locked(std::string_view key);
  static void wake(const std::shared_ptr<waiter>& w);

  journal& journal_;
  server_metrics& metrics_;
  std::mutex mu_;
  lock_table table_;
  bool stopping_ = false;
  std::size_t sweep_cursor_ = 0;
  std::unordered_map<std::string, std::vector<std::shared_ptr<waiter>>> waiters_;
};

}  // namespace baton::server
