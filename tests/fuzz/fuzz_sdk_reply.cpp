// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: the SDK's reply decoding, through its public API (make_backend), against an in-process
// loopback server that answers each HTTP request with the next piece of the input, raw (status line, headers
// and body, so Beast's response parser is fuzzed too), and closes the connection after each answer.
//
// Input: the first byte picks the backend and the call (byte % 8: 0-3 http, 4-7 etcd; acquire, renew,
// release, get with a long-poll; with the byte's high bit, 0 and 1 are a lock record's write and read
// instead); the rest is the answers, separated by lines "@@@".

#include "baton/backend.hpp"
#include "baton/config.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace asio = boost::asio;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;

namespace {

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

std::vector<std::string> split_answers(std::string_view rest) {
  std::vector<std::string> out;
  const std::string_view sep = "@@@\n";
  for (;;) {
    auto at = rest.find(sep);
    if (at == std::string_view::npos) {
      out.emplace_back(rest);
      return out;
    }
    out.emplace_back(rest.substr(0, at));
    rest.remove_prefix(at + sep.size());
  }
}

struct fake_server {
  tcp::acceptor acceptor;
  std::vector<std::string> answers;
  std::size_t next = 0;

  asio::awaitable<void> serve() {
    for (;;) {
      auto [ec, socket] = co_await acceptor.async_accept(use_tuple);
      if (ec) co_return;
      if (next >= answers.size()) continue;  // out of answers: the socket closes at once
      boost::beast::flat_buffer buffer;
      http::request<http::string_body> req;
      auto [rec, rn] = co_await http::async_read(socket, buffer, req, use_tuple);
      if (rec) continue;
      const std::string& answer = answers[next++];
      co_await asio::async_write(socket, asio::buffer(answer), use_tuple);
      boost::system::error_code ignored;
      socket.shutdown(tcp::socket::shutdown_send, ignored);
    }
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const unsigned choice = data[0] % 8;
  const bool record = (data[0] & 0x80) != 0;
  std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);

  asio::io_context ioc;
  fake_server server{tcp::acceptor(ioc, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)),
                     split_answers(rest)};
  const std::string where = "127.0.0.1:" + std::to_string(server.acceptor.local_endpoint().port());
  baton::client_config config;
  config.server_url = (choice < 4 ? "http://" : "etcd://") + where;
  auto backend = baton::make_backend(ioc.get_executor(), config);

  asio::co_spawn(ioc, server.serve(), asio::detached);
  asio::co_spawn(
      ioc,
      [&]() -> asio::awaitable<void> {
        const auto timeout = 5s;
        switch (choice % 4) {
          case 0:
            if (record)
              (void)co_await backend->write_record("k", "me", 7, "state", timeout);
            else
              (void)co_await backend->acquire("k", "me", 10s, {}, timeout);
            break;
          case 1:
            if (record)
              (void)co_await backend->read_record("k", timeout);
            else
              (void)co_await backend->renew("k", "me", 7, 10s, timeout);
            break;
          case 2:
            (void)co_await backend->release("k", "me", 7, timeout);
            break;
          case 3:
            (void)co_await backend->get("k", baton::wait_for_change{7, 1s}, timeout);
            break;
        }
        backend->close();
        boost::system::error_code ignored;
        server.acceptor.close(ignored);
      },
      asio::detached);
  ioc.run();
  return 0;
}
