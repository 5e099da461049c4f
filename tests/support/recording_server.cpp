// SPDX-License-Identifier: Apache-2.0
#include "recording_server.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

namespace baton::test {
namespace {
namespace asio = boost::asio;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;
constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);
}  // namespace

recording_server::recording_server(int status, std::string body)
    : acceptor_(ioc_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)),
      status_(status),
      body_(std::move(body)) {
  port_ = acceptor_.local_endpoint().port();
  asio::co_spawn(
      ioc_,
      [this]() -> asio::awaitable<void> {
        for (;;) {
          auto [ec, socket] = co_await acceptor_.async_accept(use_tuple);
          if (ec) co_return;
          asio::co_spawn(
              ioc_,
              [this, s = std::move(socket)]() mutable -> asio::awaitable<void> {
                boost::beast::flat_buffer buffer;
                for (;;) {
                  http::request<http::string_body> req;
                  auto [rec, rn] = co_await http::async_read(s, buffer, req, use_tuple);
                  if (rec) co_return;
                  {
                    std::lock_guard lock(mutex_);
                    requests_.push_back(std::string(req.method_string()) + " " + std::string(req.target()));
                  }
                  http::response<http::string_body> res{static_cast<http::status>(status_), 11};
                  res.set(http::field::content_type, "application/json");
                  res.body() = body_;
                  res.keep_alive(req.keep_alive());
                  res.prepare_payload();
                  auto [wec, wn] = co_await http::async_write(s, res, use_tuple);
                  if (wec || !req.keep_alive()) co_return;
                }
              },
              asio::detached);
        }
      },
      asio::detached);
  thread_ = std::thread([this] { ioc_.run(); });
}

recording_server::~recording_server() {
  ioc_.stop();
  thread_.join();
}

std::vector<std::string> recording_server::requests() const {
  std::lock_guard lock(mutex_);
  return requests_;
}

}  // namespace baton::test
