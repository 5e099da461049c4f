// SPDX-License-Identifier: Apache-2.0
#pragma once
// HTTP/1.1 keep-alive connections to one server (Beast), shared by the SDK's backends. Private to the SDK:
// Beast never reaches a public header.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/json/value.hpp>
#include <boost/system/error_code.hpp>

#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace baton::detail {

class client_tls;

/// One answer: ec is set for transport errors (connection_failed, request_timeout, tls_failed), a body that
/// is not JSON (protocol_error), or cancellation (operation_aborted); otherwise status and body are the
/// server's. An answer asked for as text (answer_form::text) has its body in `text`, unread: not JSON is no
/// error yet, and `body` is null until parse_json_body().
struct http_result {
  boost::system::error_code ec;
  std::string diagnostic;
  int status = 0;
  boost::json::value body;
  std::string text;
};

/// How request() hands over the answer's body: parsed into http_result::body, or as it came, for a caller
/// that reads it itself (the batch renew answer, read without building a tree).
enum class answer_form { json, text };

/// Parses `r.text` into `r.body` as request() does for answer_form::json: a body that is not JSON sets
/// protocol_error.
void parse_json_body(http_result& r);

std::string string_field(const boost::json::value& v, std::string_view name);
/// Reads an unsigned integer field written as a JSON number or, as etcd writes int64, a decimal string.
bool uint_field(const boost::json::value& v, std::string_view name, std::uint64_t& out);

class http_transport {
 public:
  /// At most `max_open` connections are open at once; a request that finds none free waits for one (within
  /// its timeout). With `tls` (make_client_tls()), every connection is TLS, verified for `host`, made
  /// with the context `tls` holds when it connects (client_tls::reload() changes it for later connections).
  http_transport(boost::asio::any_io_executor ex, std::string host, std::string port, std::string host_header,
                 std::size_t max_idle, std::size_t max_open, std::shared_ptr<client_tls> tls = nullptr);
  ~http_transport();
  http_transport(const http_transport&) = delete;
  http_transport& operator=(const http_transport&) = delete;

  /// One request (`body` sent as JSON when not empty or when POST), bounded by `timeout`, on a pooled
  /// connection. A pooled connection the server closed while idle gets one retry on a fresh connection.
  boost::asio::awaitable<http_result> request(std::string_view method, std::string target, std::string body,
                                              std::chrono::milliseconds timeout,
                                              answer_form form = answer_form::json);
  /// Sends `value` as the Authorization header of every request (empty: none).
  void set_authorization(std::string value) { authorization_ = std::move(value); }
  /// The Authorization header requests carry (empty: none), for a stream on a connection of its own.
  const std::string& authorization() const { return authorization_; }
  void close();
  const std::string& name() const { return host_header_; }
  /// The TLS settings of this transport's connections; null without TLS.
  const std::shared_ptr<client_tls>& tls() const { return tls_; }

 private:
  struct connection;
  boost::asio::awaitable<boost::system::error_code> exchange(connection& c, void* req, void* res,
                                                             std::chrono::steady_clock::time_point deadline,
                                                             bool connect);
  boost::asio::any_io_executor ex_;
  std::shared_ptr<client_tls> tls_;
  std::string host_, port_, host_header_;
  std::string authorization_;
  std::size_t max_idle_;
  void released_one();
  std::size_t max_open_;
  std::size_t open_ = 0;
  std::vector<std::unique_ptr<connection>> idle_;
  std::list<boost::asio::steady_timer*> waiting_;
};

}  // namespace baton::detail
