// SPDX-License-Identifier: Apache-2.0
#pragma once
// The HTTP face of batond: Beast over C++20 coroutines, one io_context per worker thread, keep-alive
// connections spread across the workers. Everything protocol-specific is in protocol.* and lock_service.*;
// this layer only reads requests, routes them and writes answers.

#include "auth.hpp"
#include "limits.hpp"
#include "lock_service.hpp"
#include "metrics.hpp"
#include "protocol.hpp"
#include "tls.hpp"

#include <boost/asio/ip/tcp.hpp>

#include <chrono>
#include <memory>

namespace baton::server {

struct http_options {
  boost::asio::ip::tcp::endpoint listen;
  unsigned threads = 1;
  ttl_bounds ttl;
  /// A client that takes longer than this to send a request (or sits idle between requests) is disconnected.
  std::chrono::milliseconds read_timeout{30'000};
  /// How long shutdown waits for in-flight requests before closing their connections.
  std::chrono::milliseconds drain_timeout{10'000};
  /// How often expired leases are swept (the lazy check makes expiry exact; the sweep frees memory and
  /// logs the expiry).
  std::chrono::milliseconds sweep_interval{1'000};
  /// When set, every connection must speak TLS (make_server_tls_context()); the handshake is bounded by
  /// read_timeout. A plain HTTP request gets a 400 `tls_required` answer. Null: plain HTTP.
  std::shared_ptr<boost::asio::ssl::context> tls;

  /// Bearer-token authentication (docs/security.md); null: every request is served without a token.
  /// SIGHUP reloads it.
  std::shared_ptr<auth::token_store> tokens;

  /// Connection, size, rate and waiter limits (docs/security.md, "Limits").
  limits_options limits;
};

class http_server {
 public:
  http_server(http_options options, lock_service& service, server_metrics& metrics);
  ~http_server();

  /// Binds and listens; returns the bound endpoint (the real port when port 0 was asked for).
  boost::asio::ip::tcp::endpoint bind();

  /// Serves until SIGTERM or SIGINT (or stop()), then stops accepting, answers in-flight requests and
  /// returns.
  void run();

  /// Makes run() return as a signal would, waiting at most `drain_timeout` for requests in flight.
  /// Thread-safe; the first call (or signal) wins.
  void stop(std::chrono::milliseconds drain_timeout);

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace baton::server
