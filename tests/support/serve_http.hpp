// SPDX-License-Identifier: Apache-2.0
#pragma once
// Test helper: the request loop of the test stub servers (tls_stub_server, recording_server). Reads HTTP/1.1
// requests from `stream` (a TCP socket or a TLS stream) and writes `answer(request)` back to each, keeping
// the connection alive as the client asks, until it closes or fails.

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

namespace baton::test {

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
