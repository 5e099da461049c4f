// SPDX-License-Identifier: Apache-2.0
#pragma once
// Test helper: the accept and request loops of the test stub servers (tls_stub_server, recording_server).

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

namespace baton::test {

/// Accepts connections on `acceptor` until it fails (it is closed, or `ioc` stopped) and runs the coroutine
/// `serve(socket)` on `ioc` for each, concurrently. `serve` is copied, and each copy lives as long as its
/// connection's coroutine.
template <class Serve>
void accept_each(boost::asio::io_context& ioc, boost::asio::ip::tcp::acceptor& acceptor, Serve serve) {
  namespace asio = boost::asio;
  asio::co_spawn(
      ioc,
      [&ioc, &acceptor, serve]() -> asio::awaitable<void> {
        for (;;) {
          auto [ec, socket] = co_await acceptor.async_accept(asio::as_tuple(asio::use_awaitable));
          if (ec) co_return;
          asio::co_spawn(
              ioc,
              [serve, s = std::move(socket)]() mutable -> asio::awaitable<void> {
                co_await serve(std::move(s));
              },
              asio::detached);
        }
      },
      asio::detached);
}

/// Reads HTTP/1.1 requests from `stream` (a TCP socket or a TLS stream) and writes `answer(request)` back to
/// each, keeping the connection alive as the client asks, until it closes or fails.
template <class Stream, class Answer>
boost::asio::awaitable<void> serve_http(Stream& stream, Answer answer) {
  namespace http = boost::beast::http;
  constexpr auto use_tuple = boost::asio::as_tuple(boost::asio::use_awaitable);
  boost::beast::flat_buffer buffer;
  for (;;) {
    http::request<http::string_body> req;
    auto [rec, rn] = co_await http::async_read(stream, buffer, req, use_tuple);
    if (rec) co_return;
    http::response<http::string_body> res = answer(req);
    res.version(11);
    res.keep_alive(req.keep_alive());
    res.prepare_payload();
    auto [wec, wn] = co_await http::async_write(stream, res, use_tuple);
    if (wec || !req.keep_alive()) co_return;
  }
}

}  // namespace baton::test
