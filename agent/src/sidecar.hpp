// SPDX-License-Identifier: Apache-2.0
#pragma once
// The sidecar HTTP API beside the application (loopback by default):
//   GET  /v1/leader  {"identity","is_leader","token","key","leader","leader_identity","leader_value",
//                     "leader_api"}
//   POST /v1/resign  give up leadership (Authorization: Bearer <resign_token> when one is configured)
//   POST /v1/reload  read the configuration file again and apply it, as SIGHUP does (authorised as resign)
//   GET  /healthz    the agent runs
//   GET  /readyz     the lock server answers
//   GET  /metrics    Prometheus text

#include "agent.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <functional>
#include <memory>
#include <string>

namespace baton::agent {

/// The outcome of reading the configuration file again and applying it (main.cpp), as POST /v1/reload
/// answers it.
struct reload_result {
  /// The file's error (config_error::what()); empty when it passed. Nothing was applied then.
  std::string error;
  config_changes changes;
  /// Whether the changes were applied; never with `error` or with keys that need a restart.
  bool applied = false;
};

class sidecar {
 public:
  /// Connections served at once; more are closed as soon as they are accepted, so a flood of idle
  /// connections holds at most this many descriptors (each idle one for up to 30 s).
  static constexpr std::size_t max_sessions = 64;

  sidecar(boost::asio::any_io_executor ex, agent_runtime& agent);
  /// Binds and listens on `at` (port 0 picks one); returns the bound endpoint. A failure (address in use, not
  /// an address of this machine, a port that needs privileges) is returned in `ec`, leaving nothing open.
  boost::asio::ip::tcp::endpoint bind(const boost::asio::ip::tcp::endpoint& at,
                                      boost::system::error_code& ec);
  boost::asio::awaitable<void> serve();
  /// What POST /v1/reload calls, on the sidecar's executor. Without it the route answers 503.
  void on_reload(std::function<reload_result()> reload) { reload_ = std::move(reload); }
  /// Serves GET /metrics and /healthz only (`metrics_listen`); every other route is 404.
  void metrics_only() { metrics_only_ = true; }
  void close();

 private:
  boost::asio::awaitable<void> session(boost::asio::ip::tcp::socket socket);
  boost::asio::any_io_executor ex_;
  agent_runtime& agent_;
  boost::asio::ip::tcp::acceptor acceptor_;
  std::function<reload_result()> reload_;
  bool loopback_ = false;  // bound to a loopback address: only a loopback Host is answered
  bool metrics_only_ = false;
  // Open connections (sessions), at most max_sessions. Shared with each session, whose frame may outlive this
  // object when the io_context is destroyed with it pending.
  std::shared_ptr<std::size_t> sessions_ = std::make_shared<std::size_t>(0);
};

}  // namespace baton::agent
