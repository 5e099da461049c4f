// SPDX-License-Identifier: Apache-2.0
#include "tls_stub_server.hpp"

#include "serve_http.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

#include <sstream>
#include <stdexcept>

namespace baton::test {
namespace {
namespace asio = boost::asio;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;
constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);
}  // namespace

tls_stub_server::tls_stub_server(const std::string& cert_file, const std::string& key_file)
    : tls_(asio::ssl::context::tls_server), v4_(ioc_), v6_(ioc_) {
  tls_.use_certificate_chain_file(cert_file);
  tls_.use_private_key_file(key_file, asio::ssl::context::pem);
  // One port on both loopback addresses, so that `localhost` reaches it whichever address it resolves to.
  // The port the IPv6 listener got may be taken on IPv4: then try another.
  for (int attempt = 0;; ++attempt) {
    v6_ = tcp::acceptor(ioc_, tcp::endpoint(asio::ip::make_address("::1"), 0));
    port_ = v6_.local_endpoint().port();
    boost::system::error_code ec;
    v4_.open(tcp::v4());
    v4_.set_option(tcp::acceptor::reuse_address(true));
    v4_.bind(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port_), ec);
    if (!ec) v4_.listen(asio::socket_base::max_listen_connections, ec);
    if (!ec) break;
    v4_.close();
    v6_.close();
    if (attempt == 20) throw std::runtime_error("tls_stub_server: no port free on both 127.0.0.1 and ::1");
  }
  accept(v4_);
  accept(v6_);
  thread_ = std::thread([this] { ioc_.run(); });
}

tls_stub_server::~tls_stub_server() {
  ioc_.stop();
  thread_.join();
}

std::string tls_stub_server::received() const {
  std::lock_guard lock(mutex_);
  return received_;
}

int tls_stub_server::handshakes() const {
  std::lock_guard lock(mutex_);
  return handshakes_;
}

void tls_stub_server::accept(tcp::acceptor& acceptor) {
  accept_each(ioc_, acceptor, [this](tcp::socket s) -> asio::awaitable<void> {
    asio::ssl::stream<tcp::socket> stream(std::move(s), tls_);
    auto [hec] = co_await stream.async_handshake(asio::ssl::stream_base::server, use_tuple);
    if (hec) co_return;
    {
      std::lock_guard lock(mutex_);
      ++handshakes_;
    }
    // Named: GCC 12 may destroy a class-type temporary of a co_await expression twice.
    auto answer = [this](const http::request<http::string_body>& req) {
      {
        std::ostringstream text;
        text << req;
        std::lock_guard lock(mutex_);
        received_ += text.str();
      }
      http::response<http::string_body> res;
      res.set(http::field::content_type, "application/json");
      if (req.method() == http::verb::get && req.target() == "/version") {
        res.result(http::status::ok);
        res.body() = R"({"etcdserver":"3.5.0","etcdcluster":"3.5.0"})";
      } else {
        res.result(http::status::internal_server_error);
        res.body() = R"({"error":"stub","message":"a test stub answers nothing else"})";
      }
      return res;
    };
    co_await serve_http(stream, answer);
  });
}

}  // namespace baton::test
