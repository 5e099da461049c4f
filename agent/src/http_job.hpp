#pragma once
// HTTP jobs: one request per run, carrying the fencing token downstream.

#include <boost/asio/awaitable.hpp>
#include <boost/system/error_code.hpp>

#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace baton::agent {

struct http_request_spec {
  std::string method = "POST";
  std::string url;  // http://host[:port]/path?query
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
};

struct http_call_result {
  boost::system::error_code ec;  // transport error, timeout (errc::timed_out) or cancellation
  int status = 0;
  std::string body;  // the first 4 KiB, for the log
};

/// Sends one request and reads the answer, within `timeout` (0 = none). Terminal cancellation aborts it
/// (the connection is closed), giving operation_aborted. Never throws for network errors.
boost::asio::awaitable<http_call_result> call_http(const http_request_spec& spec, std::chrono::milliseconds timeout);

}  // namespace baton::agent
