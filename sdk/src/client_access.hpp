// SPDX-License-Identifier: Apache-2.0
#pragma once
// What the SDK's own code reads of a client that its users do not: its state, whose backend the public API
// keeps to itself (a user who needs the protocol without a lease makes a backend with make_backend()).

#include "baton/client.hpp"
#include "lease_core.hpp"

namespace baton::detail {

struct client_access {
  /// The client's state (null for a moved-from client): what an election keeps instead of the client object.
  static std::shared_ptr<client_shared> shared_of(const client& c) { return c.shared_; }
  /// client::async_acquire with the default token, on a client's state.
  static boost::asio::awaitable<lease> acquire(std::shared_ptr<client_shared> s, std::string key,
                                               lease_options options) {
    return client::acquire_for(std::move(s), std::move(key), options, std::nullopt);
  }
  /// client::async_get with the default token, on a client's state.
  static boost::asio::awaitable<std::optional<holder_info>> get(std::shared_ptr<client_shared> s,
                                                                std::string key) {
    return boost::asio::async_initiate<const default_token_t&,
                                       void(boost::system::error_code, std::optional<holder_info>)>(
        [s = std::move(s)](auto handler, std::string k) {
          auto* diag = diagnostic_slot(handler);
          client::start_get(s, std::move(k), diag, std::move(handler));
        },
        default_token, std::move(key));
  }
};

}  // namespace baton::detail
