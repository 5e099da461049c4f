// SPDX-License-Identifier: Apache-2.0
#include "renew_batcher.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>

namespace baton::detail {
namespace asio = boost::asio;

namespace {
// A batch leaves at once when it has this many entries (the HTTP backend splits it further to the server's
// own limit).
constexpr std::size_t max_entries = 1'000;
}  // namespace

struct renew_batcher::pending {
  explicit pending(const asio::any_io_executor& ex) : done_signal(ex, clock::time_point::max()) {}
  renew_entry entry;
  clock::time_point give_up;  // the entry's own timeout, counted from when it joined
  renew_reply reply;
  bool done = false;
  timer done_signal;  // cancelled when the reply is in
};

struct renew_batcher::batch {
  std::vector<std::shared_ptr<pending>> entries;
  bool sent = false;
};

asio::awaitable<renew_reply> renew_batcher::renew(renew_entry entry, milliseconds timeout) {
  auto p = std::make_shared<pending>(cs_.ex);
  p->entry = std::move(entry);
  p->give_up = clock::now() + timeout;
  if (!open_) {
    open_ = std::make_shared<batch>();
    auto b = open_;
    auto t = std::make_shared<timer>(cs_.ex, clock::now() + cs_.config.renew_batch_window);
    t->async_wait([this, b, t, keep = cs_.shared_from_this()](boost::system::error_code) { flush(b); });
  }
  auto b = open_;
  b->entries.push_back(p);
  if (b->entries.size() >= max_entries) flush(b);
  co_await p->done_signal.async_wait(asio::as_tuple(asio::use_awaitable));
  if (!p->done) {
    renew_reply aborted;
    aborted.ec = asio::error::operation_aborted;
    co_return aborted;
  }
  co_return std::move(p->reply);
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
  const auto now = clock::now();
  clock::time_point until = now;
  std::vector<renew_entry> entries;
  entries.reserve(b->entries.size());
  for (const auto& p : b->entries) {
    until = std::max(until, p->give_up);
    entries.push_back(p->entry);
  }
  auto budget = std::max(milliseconds(1), std::chrono::ceil<milliseconds>(until - now));
  std::vector<renew_reply> replies;
  if (entries.size() == 1) {
    auto& e = entries.front();
    replies.push_back(co_await cs_.backend->renew(e.key, e.owner, e.token, e.ttl, budget));
  } else {
    replies = co_await cs_.backend->renew_batch(std::move(entries), budget);
  }
  // Each answer goes to its lease as it is: one that arrives after the lease's deadline is handled there (a
  // "renewed" too late for the lease is handed back with a release).
  for (std::size_t i = 0; i < b->entries.size(); ++i) {
    auto& p = *b->entries[i];
    if (i < replies.size()) {
      p.reply = std::move(replies[i]);
    } else {
      p.reply.ec = error::server_error;
      p.reply.diagnostic = "the batch's answer has no entry for this lease";
    }
    p.done = true;
    p.done_signal.cancel();
  }
}

}  // namespace baton::detail
