#pragma once
// The sidecar HTTP API beside the application (loopback by default):
//   GET  /v1/leader  {"identity","is_leader","token","key","leader","leader_identity"}
//   POST /v1/resign  give up leadership (Authorization: Bearer <resign_token> when one is configured)
//   GET  /healthz    the agent runs
//   GET  /readyz     the lock server answers
//   GET  /metrics    Prometheus text

#include "agent.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>

namespace baton::agent {

class sidecar {
 public:
  sidecar(boost::asio::any_io_executor ex, agent_runtime& agent);
  /// Binds and listens on `at` (port 0 picks one); returns the bound endpoint. A failure (address in use, not
  /// an address of this machine, a port that needs privileges) is returned in `ec`, leaving nothing open.
  boost::asio::ip::tcp::endpoint bind(const boost::asio::ip::tcp::endpoint& at,
                                      boost::system::error_code& ec);
  boost::asio::awaitable<void> serve();
  void close();

 private:
  boost::asio::awaitable<void> session(boost::asio::ip::tcp::socket socket);
  boost::asio::any_io_executor ex_;
  agent_runtime& agent_;
  boost::asio::ip::tcp::acceptor acceptor_;
};

}  // namespace baton::agent
