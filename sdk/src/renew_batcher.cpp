// SPDX-License-Identifier: Apache-2.0
#include "renew_batcher.hpp"

#include "lease_core.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <exception>
#include <span>
#include <string>

namespace baton::detail {
namespace asio = boost::asio;

namespace {
// A batch leaves at once when it has this many entries (the HTTP backend splits it further to the server's
// own limit).
constexpr std::size_t max_entries = 1'000;
// Room made in a new batch up front, so that a batch of a usual size grows its vectors once, not once per
// doubling (at 10,000 leases of 15 s and a 2 ms window, a batch holds about four entries).
constexpr std::size_t expected_entries = 16;
// Entry vectors kept for later batches: about as many as are in flight at once (a window's batch, and the
// one before it waiting for its answer), with room for a burst.
constexpr std::size_t max_spare_entries = 4;
}  // namespace

// The entries of one batch and their answers, side by side: the entries go to the backend as they are (no
// copy per batch), and each answer stays in place until its renewal picks it up.
struct renew_batcher::batch {
  // entries[0, n) are this batch's; any after them are left over from an earlier batch, memory to reuse.
  std::vector<renew_entry> entries;
  std::size_t n = 0;
  std::vector<renew_reply> replies;
  std::vector<lease_core*> waiters;  // each entry's lease, to answer; null once its renewal was withdrawn
  clock::time_point until{};         // the most patient entry's own timeout
  bool sent = false;
};

renew_batcher::place::place(std::shared_ptr<batch> b, lease_core& who)
    : b_(std::move(b)), i_(b_->waiters.size()) {
  b_->waiters.push_back(&who);
}

renew_batcher::place::~place() {
  if (b_) b_->waiters[i_] = nullptr;
}

renew_batcher::place renew_batcher::join(std::string_view key, std::string_view owner, std::uint64_t token,
                                         milliseconds ttl, milliseconds window, milliseconds timeout,
                                         lease_core& who) {
  if (!open_) {
    open_ = std::make_shared<batch>();
    auto b = open_;
    if (!spare_entries_.empty()) {
      b->entries = std::move(spare_entries_.back());
      spare_entries_.pop_back();
    } else {
      b->entries.reserve(expected_entries);
    }
    b->waiters.reserve(expected_entries);
    auto t = std::make_shared<timer>(cs_, cs_.now() + window);
    t->async_wait([this, b, t, keep = cs_.shared_from_this()](boost::system::error_code) { flush(b); });
  }
  open_->until = std::max(open_->until, cs_.now() + timeout);
  auto& b = *open_;
  if (b.n == b.entries.size()) b.entries.emplace_back();
  auto& e = b.entries[b.n++];
  e.key.assign(key);
  e.owner.assign(owner);
  e.token = token;
  e.ttl = ttl;
  place p(open_, who);
  if (b.n >= max_entries) flush(open_);
  return p;
}

void renew_batcher::flush(std::shared_ptr<batch> b) {
  if (b->sent) return;
  b->sent = true;
  if (open_ == b) open_.reset();
  // The client's shared state (and this batcher with it) lives until the batch is answered.
  asio::co_spawn(cs_.ex, send(std::move(b), cs_.shared_from_this()), asio::detached);
}

asio::awaitable<void> renew_batcher::send(std::shared_ptr<batch> b, std::shared_ptr<client_shared> /*keep*/) {
  // The batch may take as long as the most patient entry allows. The entries joined within one window, each
  // with its whole request_timeout ahead (a renewal short of time goes alone), so their bounds differ by at
  // most the window.
  const auto n = b->n;
  auto budget = std::max(milliseconds(1), std::chrono::ceil<milliseconds>(b->until - cs_.now()));
  std::string failure;
  try {
    if (n == 1) {
      // Copied, not moved: the entry keeps its memory for a later batch.
      const auto& e = b->entries.front();
      b->replies.push_back(co_await cs_.backend->renew(e.key, e.owner, e.token, e.ttl, budget));
    } else {
      const std::span<const renew_entry> entries(b->entries.data(), n);
      b->replies = co_await cs_.backend->renew_batch(entries, budget);
    }
  } catch (const std::exception& x) {
    // No answer: each lease retries, or is lost at its deadline, as after a timeout.
    b->replies.clear();
    failure = std::string("the batch's request failed: ") + x.what();
  }
  // The backend is done with the entries (renew_batch reads them until it completes).
  if (spare_entries_.size() < max_spare_entries) spare_entries_.push_back(std::move(b->entries));
  // Each answer goes to its lease as it is: one that arrives after the lease's deadline is handled there (a
  // "renewed" too late for the lease is handed back with a release).
  if (b->replies.size() < n) {
    const auto answered = b->replies.size();
    b->replies.resize(n);
    for (auto i = answered; i < n; ++i) {
      b->replies[i].ec = error::server_error;
      b->replies[i].diagnostic = failure.empty() ? "the batch's answer has no entry for this lease" : failure;
    }
  }
  // Looked up afresh for each entry: an answer may withdraw other leases' places (a loss handler releasing
  // them), and may end its own lease.
  for (std::size_t i = 0; i < n; ++i) {
    auto* who = b->waiters[i];
    if (!who) continue;
    b->waiters[i] = nullptr;
    renewal_answered(*who, std::move(b->replies[i]));
  }
}

}  // namespace baton::detail
