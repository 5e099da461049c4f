// SPDX-License-Identifier: Apache-2.0
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
  std::string url;  // http:// or https://host[:port]/path?query
  /// https://: the PEM CA bundle the server's certificate must chain to; empty: the system's CA store.
  std::string ca_file;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
};

struct http_call_result {
  boost::system::error_code ec;  // transport error, timeout (errc::timed_out) or cancellation
  int status = 0;
  std::string body;      // the first 4 KiB, for the log; on a TLS failure, why
  std::string location;  // the Location header of an answer (a 3xx is returned as it is, never followed)
};

/// Sends one request and reads the answer, within `timeout` (0 = none). https:// goes through the SDK's TLS
/// client: the certificate is verified (ca_file, else the system store) and must name the URL's host.
/// Redirects are not followed: a 3xx answer is the result. Terminal cancellation aborts it
/// (the connection is closed), giving operation_aborted. Never throws for network errors.
boost::asio::awaitable<http_call_result> call_http(const http_request_spec& spec,
                                                   std::chrono::milliseconds timeout);

}  // namespace baton::agent
