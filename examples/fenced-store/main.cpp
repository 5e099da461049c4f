// SPDX-License-Identifier: Apache-2.0
// fenced-store: a small key→value HTTP service that enforces fencing tokens on every write, the resource side
// of docs/fencing.md. State is in memory only; it exists to show, and to test, how a resource refuses writes
// from a lock holder that has been superseded.

#include "baton/common/log.hpp"
#include "http_api.hpp"
#include "item_store.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/program_options.hpp>

#include <charconv>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <optional>
#include <thread>
#include <vector>

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace po = boost::program_options;
using tcp = asio::ip::tcp;
using namespace fenced_store;

namespace {

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

// "HOST:PORT" or "[V6]:PORT"; HOST is an IP address or localhost.
tcp::endpoint parse_listen(const std::string& text) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos)
    throw std::invalid_argument("--listen must be HOST:PORT, got \"" + text + "\"");
  std::string host = text.substr(0, colon);
  const std::string_view port_text = std::string_view(text).substr(colon + 1);
  unsigned short port = 0;
  auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (port_text.empty() || ec != std::errc{} || end != port_text.data() + port_text.size())
    throw std::invalid_argument("--listen port must be 0 to 65535, got \"" + std::string(port_text) + "\"");
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (host == "localhost") host = "127.0.0.1";
  boost::system::error_code aec;
  auto addr = asio::ip::make_address(host, aec);
  if (aec) throw std::invalid_argument("--listen host must be an IP address, got \"" + host + "\"");
  return {addr, port};
}

struct server {
  item_store& store;
  asio::io_context& ioc;
  std::chrono::milliseconds read_timeout;

  // One connection: requests are answered in order. The coroutine runs on the connection's own strand, so
  // the stream and its timer are never touched by two threads at once.
  asio::awaitable<void> session(tcp::socket socket) {
    beast::tcp_stream stream(std::move(socket));
    beast::flat_buffer buffer;
    for (;;) {
      http::request_parser<http::string_body> parser;
      parser.body_limit(max_body_bytes);
      parser.header_limit(max_header_bytes);
      // Bounds both an idle keep-alive connection and a slow or stalled request.
      stream.expires_after(read_timeout);
      auto [ec, n] = co_await http::async_read_header(stream, buffer, parser, use_tuple);
      if (!ec && beast::iequals(parser.get()[http::field::expect], "100-continue")) {
        // curl and others wait for this before sending a large body.
        http::response<http::empty_body> cont{http::status::continue_, 11};
        std::tie(ec, n) = co_await http::async_write(stream, cont, use_tuple);
        if (ec) break;
      }
      if (!ec) std::tie(ec, n) = co_await http::async_read(stream, buffer, parser, use_tuple);
      if (ec) {
        std::optional<response> answer;
        if (ec == http::error::body_limit)
          answer =
              error_response(413, "body_too_large",
                             "request body exceeds " + std::to_string(max_body_bytes) + " bytes", 11, false);
        else if (ec == http::error::header_limit)
          answer = error_response(431, "header_too_large",
                                  "request header exceeds " + std::to_string(max_header_bytes) + " bytes", 11,
                                  false);
        else if (ec.category() == http::make_error_code(http::error::end_of_stream).category() &&
                 ec != http::error::end_of_stream && ec != http::error::partial_message)
          answer = error_response(400, "bad_request", "malformed HTTP request: " + ec.message(), 11, false);
        if (answer) co_await http::async_write(stream, *answer, use_tuple);
        break;  // end of stream, timeout, reset, or an error already answered: close
      }

      const request& req = parser.get();
      response res;
      try {
        res = handle(store, req);
      } catch (const std::exception& e) {
        baton::log::error("request_failed", {{"target", std::string(req.target())}, {"error", e.what()}});
        res = error_response(500, "internal", e.what(), req.version(), false);
      }
      stream.expires_after(read_timeout);
      auto [wec, wn] = co_await http::async_write(stream, res, use_tuple);
      if (wec || !res.keep_alive()) break;
    }
    beast::error_code ignored;
    stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
  }

  asio::awaitable<void> accept_loop(tcp::acceptor& acceptor) {
    for (;;) {
      // A strand per connection: the io_context runs on several threads.
      auto [ec, socket] = co_await acceptor.async_accept(asio::make_strand(ioc), use_tuple);
      if (ec) {
        if (!acceptor.is_open()) co_return;
        baton::log::warn("accept_failed", {{"error", ec.message()}});
        // Out of descriptors or similar: back off briefly instead of spinning.
        asio::steady_timer t(acceptor.get_executor(), std::chrono::milliseconds(50));
        co_await t.async_wait(use_tuple);
        continue;
      }
      socket.set_option(tcp::no_delay(true), ec);
      auto ex = socket.get_executor();
      asio::co_spawn(ex, session(std::move(socket)), asio::detached);
    }
  }
};

}  // namespace

int main(int argc, char** argv) {
  std::string listen, level_name;
  unsigned threads = 0;
  std::size_t history_limit = 0;
  std::int64_t read_timeout_ms = 0;
  bool unsafe = false;

  po::options_description opts("fenced-store options");
  opts.add_options()("help,h", "show this help")("listen",
                                                 po::value(&listen)->default_value("127.0.0.1:7080"),
                                                 "address to serve on, HOST:PORT (port 0 picks a free one)")(
      "threads", po::value(&threads)->default_value(std::max(1u, std::thread::hardware_concurrency())),
      "worker threads")("history-limit", po::value(&history_limit)->default_value(1'000'000),
                        "write attempts kept for GET /history (oldest dropped first)")(
      "read-timeout-ms", po::value(&read_timeout_ms)->default_value(30'000),
      "disconnect a client that sends no complete request for this long")(
      "log-level", po::value(&level_name)->default_value("info"), "debug, info, warn or error")(
      "unsafe-skip-token-check", po::bool_switch(&unsafe),
      "UNSAFE, for testing checkers only: accept every write whatever its token");

  try {
    po::variables_map vm;
    po::store(po::parse_command_line(argc, argv, opts), vm);
    po::notify(vm);
    if (vm.count("help")) {
      std::cout << "usage: fenced-store [options]\n" << opts;
      return 0;
    }
    baton::log::level lvl;
    if (!baton::log::parse_level(level_name, lvl))
      throw std::invalid_argument("--log-level must be debug, info, warn or error");
    baton::log::set_level(lvl);
    if (threads < 1) throw std::invalid_argument("--threads must be at least 1");
    if (read_timeout_ms < 1) throw std::invalid_argument("--read-timeout-ms must be at least 1");
    const auto endpoint = parse_listen(listen);

    ::signal(SIGPIPE, SIG_IGN);

    item_store store(history_limit, unsafe);
    if (unsafe)
      baton::log::warn("unsafe_mode", {{"detail", "token check disabled: stale writes are accepted"}});
    asio::io_context ioc(static_cast<int>(threads));
    server srv{store, ioc, std::chrono::milliseconds(read_timeout_ms)};
    // The acceptor and the signal handler share a strand, so closing the acceptor never races the accept
    // loop.
    auto control = asio::make_strand(ioc);
    tcp::acceptor acceptor(control);
    acceptor.open(endpoint.protocol());
    acceptor.set_option(tcp::acceptor::reuse_address(true));
    acceptor.bind(endpoint);
    acceptor.listen(asio::socket_base::max_listen_connections);
    const auto bound = acceptor.local_endpoint();
    const std::string where =
        bound.address().is_v6() ? "[" + bound.address().to_string() + "]" : bound.address().to_string();
    std::printf("fenced-store listening on %s:%u\n", where.c_str(), bound.port());
    std::fflush(stdout);
    baton::log::info("listening",
                     {{"address", where + ":" + std::to_string(bound.port())}, {"threads", threads}});

    // State is in memory, so there is nothing to flush: stop accepting and stop. A request being handled
    // finishes its store update (handlers run to completion), but its answer may not be sent.
    asio::signal_set signals(control, SIGINT, SIGTERM);
    signals.async_wait([&](const boost::system::error_code& ec, int sig) {
      if (ec) return;
      baton::log::info("shutdown", {{"signal", sig}});
      beast::error_code ignored;
      acceptor.close(ignored);
      ioc.stop();
    });
    asio::co_spawn(control, srv.accept_loop(acceptor), asio::detached);

    std::vector<std::thread> pool;
    for (unsigned i = 1; i < threads; ++i)
      pool.emplace_back([&ioc] { ioc.run(); });
    ioc.run();
    for (auto& t : pool)
      t.join();
    return 0;
  } catch (const po::error& e) {
    std::fprintf(stderr, "fenced-store: %s (see --help)\n", e.what());
    return 2;
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "fenced-store: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fenced-store: %s\n", e.what());
    return 1;
  }
}
