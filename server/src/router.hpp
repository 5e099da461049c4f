// SPDX-License-Identifier: Apache-2.0
#pragma once
// The routing of one request (docs/protocol.md, "Order of checks"): browser checks, authentication and the
// request rate, the route, method, key and access, then the route itself against the lock service. It
// knows nothing of connections: http_server reads a request, hands it here and writes what comes back.

#include "answers.hpp"
#include "auth.hpp"
#include "http_message.hpp"
#include "http_server.hpp"
#include "limits.hpp"
#include "lock_service.hpp"
#include "metrics.hpp"
#include "protocol.hpp"

#include <boost/asio/awaitable.hpp>

#include <atomic>
#include <memory>
#include <memory_resource>
#include <optional>
#include <string>

namespace baton::server {

class router {
 public:
  /// `draining` is the server's: once set, answers ask the client to close the connection.
  router(const http_options& options, lock_service& service, server_metrics& metrics,
         const std::atomic<bool>& draining);

  /// Answers `req` from `peer_address`, received at `started`. Sets `counted_as` to the route the request
  /// is counted under and `authenticated_as` to the client its token names (empty: none). The answer's
  /// memory comes from `mem`, the request's arena. Throws what lock_service throws (storage_unavailable,
  /// waiters_exhausted, locks_exhausted) for the caller to answer.
  boost::asio::awaitable<response> handle(const request& req, route& counted_as,
                                          const std::string& peer_address, clock::time_point started,
                                          std::string& authenticated_as, std::pmr::memory_resource* mem);

 private:
  boost::asio::awaitable<response> acquire_route(const request& req, answer_context c, std::string key,
                                                 std::string client, std::uint64_t wait_ms);
  boost::asio::awaitable<response> renew_route(const request& req, answer_context c, std::string key,
                                               std::string client);
  boost::asio::awaitable<response> renew_batch_route(const request& req, answer_context c, std::string client,
                                                     std::shared_ptr<const auth::token_table> tokens);
  boost::asio::awaitable<response> release_route(const request& req, answer_context c, std::string key,
                                                 std::string client);
  boost::asio::awaitable<response> proclaim_route(const request& req, answer_context c, std::string key,
                                                  std::string client);
  boost::asio::awaitable<response> record_write_route(const request& req, answer_context c, std::string key,
                                                      std::string client);
  boost::asio::awaitable<response> record_read_route(answer_context c, std::string key);
  boost::asio::awaitable<response> get_route(answer_context c, lock_target t);
  boost::asio::awaitable<response> list_route(answer_context c, lock_target t);
  boost::asio::awaitable<response> break_route(const request& req, answer_context c, std::string key,
                                               std::string client);
  std::optional<api_error> browser_check(const request& req) const;
  std::string rate_text() const;
  static route route_of(const lock_target& t);

  const http_options& options;
  lock_service& service;
  server_metrics& metrics;
  const std::atomic<bool>& draining;
  const bool loopback_listener;
  // Request rate per authenticated client name, and per address for requests without a valid token (all
  // requests when there are no tokens).
  rate_limiter client_rate;
  rate_limiter address_rate;
};

}  // namespace baton::server
