// SPDX-License-Identifier: Apache-2.0
#pragma once
// Batch renewal in the client (docs/sdk.md, "Batch renewal"): the renewals of a client's leases that fall
// due within `client_config::renew_batch_window` of each other leave in one backend renew_batch() call, one
// request to a server that has `POST /v1/renew`. Private to the SDK.
//
// Safety: a lease's local deadline is counted from the instant its renewal fell due, before the window, so
// gathering only ever makes the deadline earlier, never later (docs/design.md, "Batch renewal").

#include "baton/backend.hpp"

#include "lease_core.hpp"

#include <boost/asio/awaitable.hpp>

#include <memory>
#include <vector>

namespace baton::detail {

class renew_batcher {
 public:
  explicit renew_batcher(client_shared& cs) : cs_(cs) {}

  /// Renews one lease with the others falling due within the window; what backend::renew would answer.
  /// `timeout` bounds the wait for the batch to leave plus its round trip. Cancellation (terminal) returns
  /// operation_aborted at once; the entry may still leave with its batch. Executor only.
  boost::asio::awaitable<renew_reply> renew(renew_entry entry, milliseconds timeout);

 private:
  struct batch;
  class waiter;
  void flush(std::shared_ptr<batch> b);
  boost::asio::awaitable<void> send(std::shared_ptr<batch> b, std::shared_ptr<client_shared> keep);

  client_shared& cs_;
  std::shared_ptr<batch> open_;  // the batch gathering entries, if any
};

}  // namespace baton::detail
