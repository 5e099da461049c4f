// SPDX-License-Identifier: Apache-2.0
#pragma once
// Test helper: a plain HTTP/1.1 server on 127.0.0.1 (ephemeral port, its own thread) that records each
// request's method and target as it arrived on the wire, and answers every request with one canned reply.
// For checks of what a client puts on the wire (the encoding of a key in the path, say).

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace baton::test {

class recording_server {
 public:
  /// Answers every request with `status` and the JSON `body`.
  recording_server(int status, std::string body);
  ~recording_server();
  recording_server(const recording_server&) = delete;
  recording_server& operator=(const recording_server&) = delete;

  /// From now on answers requests for exactly `target` with `status` and `body` instead.
  void answer(std::string target, int status, std::string body);

  unsigned short port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  /// "METHOD target" of every request received, in order, the target exactly as sent.
  std::vector<std::string> requests() const;

 private:
  boost::asio::io_context ioc_;
  boost::asio::ip::tcp::acceptor acceptor_;
  unsigned short port_ = 0;
  int status_;
  std::string body_;
  mutable std::mutex mutex_;
  std::vector<std::string> requests_;
  std::map<std::string, std::pair<int, std::string>, std::less<>> answers_;  // by target
  std::thread thread_;
};

}  // namespace baton::test
