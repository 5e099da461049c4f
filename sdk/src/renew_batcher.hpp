// SPDX-License-Identifier: Apache-2.0
#pragma once
// Batch renewal in the client (docs/sdk.md, "Batch renewal"): the renewals of a client's leases that fall
// due within `client_config::renew_batch_window` of each other leave in one backend renew_batch() call, one
// request to a server that has `POST /v1/renew`. Private to the SDK.
//
// Safety: a lease's local deadline is counted from the instant its renewal fell due, before the window, so
// gathering only ever makes the deadline earlier, never later (docs/design.md, "Batch renewal").

#include "baton/backend.hpp"
#include "baton/config.hpp"

#include <boost/asio/awaitable.hpp>

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

namespace baton::detail {

struct client_shared;
struct lease_core;

/// Hands `c` the answer to its renew in a batch (renewal_scheduler::answered). Executor only.
void renewal_answered(lease_core& c, renew_reply r);

class renew_batcher {
  struct batch;

 public:
  explicit renew_batcher(client_shared& cs) : cs_(cs) {}

  /// One renewal's place in its batch, held by the lease while it waits for the answer. The batch points at
  /// the lease only while the place lives, so an answer that arrives after the renewal was withdrawn (the
  /// lease stopped, or is gone) touches nothing.
  class place {
   public:
    place(std::shared_ptr<batch> b, lease_core& who);
    ~place();
    place(place&& other) noexcept : b_(std::move(other.b_)), i_(other.i_) {}
    place& operator=(place&&) = delete;

   private:
    std::shared_ptr<batch> b_;
    std::size_t i_;
  };

  /// Adds one lease's renewal (renew `key` held by `owner` with `token` for `ttl`) to the batch gathering
  /// the others falling due within the window; a renewal that finds no batch gathering opens one, which
  /// leaves `window` later (that lease's window: leases of other renew periods may join it). The key and
  /// owner are copied into an entry whose memory an earlier batch left behind. `timeout` bounds the wait for
  /// the batch to leave plus its round trip. The answer goes to `who` by renewal_answered(), while the place
  /// lives. No coroutine frame per renewal. Executor only.
  place join(std::string_view key, std::string_view owner, std::uint64_t token, milliseconds ttl,
             milliseconds window, milliseconds timeout, lease_core& who);

 private:
  void flush(std::shared_ptr<batch> b);
  boost::asio::awaitable<void> send(std::shared_ptr<batch> b, std::shared_ptr<client_shared> keep);

  client_shared& cs_;
  std::shared_ptr<batch> open_;  // the batch gathering entries, if any
  // The entries of answered batches, their strings' memory kept for the next batches: the same leases renew
  // again and again, so a key or owner copied into one rarely needs memory of its own.
  std::vector<std::vector<renew_entry>> spare_entries_;
};

}  // namespace baton::detail
