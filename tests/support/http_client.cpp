// SPDX-License-Identifier: Apache-2.0
#include "http_client.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <boost/json/parse.hpp>

#include <optional>
#include <stdexcept>

namespace baton::test {
namespace asio = boost::asio;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;

namespace {

http_reply to_reply(http::response<http::string_body>& res) {
  http_reply r;
  r.status = static_cast<int>(res.result_int());
  r.content_type = std::string(res[http::field::content_type]);
  r.body = res.body();
  r.keep_alive = res.keep_alive();
  r.www_authenticate = std::string(res[http::field::www_authenticate]);
  r.retry_after = std::string(res[http::field::retry_after]);
  boost::system::error_code ec;
  auto v = boost::json::parse(r.body, ec);
  if (!ec) r.json = std::move(v);
  return r;
}

}  // namespace

struct http_client::impl {
  asio::io_context ioc;
  std::optional<boost::beast::tcp_stream> stream;
  boost::beast::flat_buffer buffer;
  unsigned short port;
  std::chrono::milliseconds timeout;
  std::string authorization;

  void connect() {
    stream.emplace(ioc);
    buffer.clear();
    stream->expires_after(timeout);
    run([&](auto done) {
      stream->async_connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port), done);
    });
    stream->socket().set_option(tcp::no_delay(true));
  }

  // Runs one async operation to completion; the stream's own timer bounds it, so a silent peer cannot hang
  // the test (Asio's blocking calls would wait again after a socket timeout).
  template <class Start>
  void run(Start start) {
    boost::system::error_code result;
    start([&](boost::system::error_code ec, auto&&...) { result = ec; });
    ioc.restart();
    ioc.run();
    if (result) throw boost::system::system_error(result);
  }
};

http_client::http_client(unsigned short port, std::chrono::milliseconds timeout)
    : impl_(std::make_unique<impl>()) {
  impl_->port = port;
  impl_->timeout = timeout;
  impl_->connect();
}

http_client::~http_client() = default;

http_reply http_client::request(std::string_view method, std::string_view target, std::string_view body) {
  http::request<http::string_body> req{http::string_to_verb(method), target, 11};
  req.set(http::field::host, "127.0.0.1");
  if (!impl_->authorization.empty()) req.set(http::field::authorization, impl_->authorization);
  if (!body.empty() || method == "POST") {
    req.set(http::field::content_type, "application/json");
    req.body() = std::string(body);
  }
  req.keep_alive(true);
  req.prepare_payload();
  // One reconnect, only for a reused connection the server may have closed while idle.
  for (int attempt = 0;; ++attempt) {
    bool reused = impl_->stream.has_value();
    try {
      if (!impl_->stream) impl_->connect();
      impl_->stream->expires_after(impl_->timeout);
      impl_->run([&](auto done) { http::async_write(*impl_->stream, req, done); });
      http::response<http::string_body> res;
      impl_->run([&](auto done) { http::async_read(*impl_->stream, impl_->buffer, res, done); });
      auto r = to_reply(res);
      if (!r.keep_alive) impl_->stream.reset();
      return r;
    } catch (const boost::system::system_error& e) {
      bool timed_out = e.code() == boost::beast::error::timeout;
      impl_->stream.reset();
      if (attempt > 0 || !reused || timed_out) throw;
    }
  }
}

void http_client::set_authorization(std::string value) {
  impl_->authorization = std::move(value);
}

http_reply http_client::raw(unsigned short port, std::string_view bytes, std::chrono::milliseconds timeout) {
  impl one;
  one.port = port;
  one.timeout = timeout;
  one.connect();
  one.stream->expires_after(timeout);
  one.run([&](auto done) { asio::async_write(*one.stream, asio::buffer(bytes.data(), bytes.size()), done); });
  http::response<http::string_body> res;
  one.run([&](auto done) { http::async_read(*one.stream, one.buffer, res, done); });
  return to_reply(res);
}

}  // namespace baton::test
