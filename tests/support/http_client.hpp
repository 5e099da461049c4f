// SPDX-License-Identifier: Apache-2.0
#pragma once
// Test helper: a small blocking HTTP/1.1 keep-alive client with a receive timeout.

#include <boost/json/value.hpp>

#include <chrono>
#include <memory>
#include <string>

namespace baton::test {

struct http_reply {
  int status = 0;
  std::string content_type;
  std::string body;
  boost::json::value json;  // null when the body is not JSON
  bool keep_alive = true;
  std::string www_authenticate;  // the WWW-Authenticate header, empty when absent
  std::string retry_after;       // the Retry-After header, empty when absent
};

class http_client {
 public:
  explicit http_client(unsigned short port, std::chrono::milliseconds timeout = std::chrono::seconds(90));
  ~http_client();

  http_reply request(std::string_view method, std::string_view target, std::string_view body = {});
  http_reply get(std::string_view target) { return request("GET", target); }
  http_reply post(std::string_view target, std::string_view body) { return request("POST", target, body); }
  /// Sends `Authorization: <value>` with every later request (empty: no such header).
  void set_authorization(std::string value);

  /// Sends raw bytes on a fresh connection and returns what the server answered (for malformed requests).
  static http_reply raw(unsigned short port, std::string_view bytes,
                        std::chrono::milliseconds timeout = std::chrono::seconds(30));

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace baton::test
