// SPDX-License-Identifier: Apache-2.0
#include "recording_server.hpp"

#include "serve_http.hpp"

#include <boost/beast/http/string_body.hpp>

namespace baton::test {
namespace {
namespace asio = boost::asio;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;
}  // namespace

recording_server::recording_server(int status, std::string body)
    : acceptor_(ioc_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)),
      status_(status),
      body_(std::move(body)) {
  port_ = acceptor_.local_endpoint().port();
  accept_each(ioc_, acceptor_, [this](tcp::socket s) -> asio::awaitable<void> {
    // Named: GCC 12 may destroy a class-type temporary of a co_await expression twice.
    auto answer = [this](const http::request<http::string_body>& req) {
      int status = status_;
      std::string body = body_;
      {
        std::lock_guard lock(mutex_);
        requests_.push_back(std::string(req.method_string()) + " " + std::string(req.target()));
        if (auto it = answers_.find(req.target()); it != answers_.end()) {
          status = it->second.first;
          body = it->second.second;
        }
      }
      http::response<http::string_body> res{static_cast<http::status>(status), 11};
      res.set(http::field::content_type, "application/json");
      res.body() = std::move(body);
      return res;
    };
    co_await serve_http(s, answer);
  });
  thread_ = std::thread([this] { ioc_.run(); });
}

recording_server::~recording_server() {
  ioc_.stop();
  thread_.join();
}

void recording_server::answer(std::string target, int status, std::string body) {
  std::lock_guard lock(mutex_);
  answers_[std::move(target)] = {status, std::move(body)};
}

std::vector<std::string> recording_server::requests() const {
  std::lock_guard lock(mutex_);
  return requests_;
}

}  // namespace baton::test
