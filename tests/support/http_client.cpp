#include "http_client.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <boost/json/parse.hpp>

#include <sys/socket.h>

#include <stdexcept>

namespace baton::test {
namespace asio = boost::asio;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;

namespace {

void set_timeout(tcp::socket& s, std::chrono::milliseconds t) {
  timeval tv{static_cast<time_t>(t.count() / 1000), static_cast<suseconds_t>((t.count() % 1000) * 1000)};
  ::setsockopt(s.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(s.native_handle(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

http_reply to_reply(http::response<http::string_body>& res) {
  http_reply r;
  r.status = static_cast<int>(res.result_int());
  r.content_type = std::string(res[http::field::content_type]);
  r.body = res.body();
  r.keep_alive = res.keep_alive();
  boost::system::error_code ec;
  auto v = boost::json::parse(r.body, ec);
  if (!ec) r.json = std::move(v);
  return r;
}

}  // namespace

struct http_client::impl {
  asio::io_context ioc;
  tcp::socket socket{ioc};
  boost::beast::flat_buffer buffer;
  unsigned short port;
  std::chrono::milliseconds timeout;

  void connect() {
    socket = tcp::socket(ioc);
    buffer.clear();
    socket.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
    socket.set_option(tcp::no_delay(true));
    set_timeout(socket, timeout);
  }
};

http_client::http_client(unsigned short port, std::chrono::milliseconds timeout) : impl_(std::make_unique<impl>()) {
  impl_->port = port;
  impl_->timeout = timeout;
  impl_->connect();
}

http_client::~http_client() = default;

http_reply http_client::request(std::string_view method, std::string_view target, std::string_view body) {
  http::request<http::string_body> req{http::string_to_verb(method), target, 11};
  req.set(http::field::host, "127.0.0.1");
  if (!body.empty() || method == "POST") {
    req.set(http::field::content_type, "application/json");
    req.body() = std::string(body);
  }
  req.keep_alive(true);
  req.prepare_payload();
  // One reconnect: the server may have closed an idle keep-alive connection.
  for (int attempt = 0;; ++attempt) {
    try {
      if (!impl_->socket.is_open()) impl_->connect();
      http::write(impl_->socket, req);
      http::response<http::string_body> res;
      http::read(impl_->socket, impl_->buffer, res);
      auto r = to_reply(res);
      if (!r.keep_alive) impl_->socket.close();
      return r;
    } catch (const boost::system::system_error& e) {
      impl_->socket.close();
      if (attempt > 0) throw;
    }
  }
}

http_reply http_client::raw(unsigned short port, std::string_view bytes, std::chrono::milliseconds timeout) {
  asio::io_context ioc;
  tcp::socket s(ioc);
  s.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
  set_timeout(s, timeout);
  asio::write(s, asio::buffer(bytes.data(), bytes.size()));
  boost::beast::flat_buffer buf;
  http::response<http::string_body> res;
  http::read(s, buf, res);
  return to_reply(res);
}

}  // namespace baton::test
