// SPDX-License-Identifier: Apache-2.0
#include "run_now_client.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include <stdexcept>

namespace baton::agent {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace json = boost::json;
using tcp = asio::ip::tcp;

namespace {

// A wildcard `listen` is reached on loopback.
tcp::endpoint sidecar_endpoint(const std::string& listen) {
  auto at = parse_listen(listen);
  if (at.port() == 0)
    throw std::invalid_argument(
        "listen: port 0 is picked at start; give --listen ADDR:PORT of the running agent");
  if (at.address().is_unspecified())
    at.address(at.address().is_v6() ? asio::ip::address(asio::ip::address_v6::loopback())
                                    : asio::ip::address(asio::ip::address_v4::loopback()));
  return at;
}

std::string text_of(const json::value& v, const char* field) {
  const auto* o = v.if_object();
  if (!o) return {};
  const auto it = o->find(field);
  if (it == o->end() || !it->value().is_string()) return {};
  return std::string(it->value().as_string());
}

}  // namespace

run_now_answer run_now_via_sidecar(const agent_config& config, const std::string& job,
                                   std::chrono::milliseconds timeout) {
  const auto at = sidecar_endpoint(config.listen);
  http::request<http::string_body> req{http::verb::post, "/v1/jobs/" + job + "/run", 11};
  req.set(http::field::host, to_listen_string(at));
  if (!config.resign_token.empty()) req.set(http::field::authorization, "Bearer " + config.resign_token);
  req.prepare_payload();

  asio::io_context ioc(1);
  http::response<http::string_body> res;
  std::string failure;
  bool done = false;
  asio::co_spawn(
      ioc,
      [&]() -> asio::awaitable<void> {
        beast::tcp_stream stream(co_await asio::this_coro::executor);
        stream.expires_after(timeout);
        co_await stream.async_connect(at, asio::use_awaitable);
        co_await http::async_write(stream, req, asio::use_awaitable);
        beast::flat_buffer buffer;
        co_await http::async_read(stream, buffer, res, asio::use_awaitable);
        done = true;
      },
      [&](std::exception_ptr e) {
        if (!e) return;
        try {
          std::rethrow_exception(e);
        } catch (const std::exception& ex) {
          failure = ex.what();
        }
      });
  ioc.run();
  const auto where = "the agent at " + to_listen_string(at);
  if (!done) return {1, "cannot ask " + where + ": " + (failure.empty() ? "no answer" : failure)};

  boost::system::error_code ec;
  const auto body = json::parse(res.body(), ec);
  const auto error = text_of(body, "error");
  const auto message = text_of(body, "message");
  switch (res.result_int()) {
    case 202:
      return {0,
              "started " + job + ": run " + text_of(body, "run_id") + " with token " +
                  (body.is_object() && body.as_object().contains("token") ? json::serialize(body.at("token"))
                                                                          : std::string("?"))};
    case 401:
      return {1, where + " refused the request: its resign_token differs from this file's"};
    case 409:
      if (error == "not_leader") {
        const auto leader = text_of(body, "leader_identity");
        const auto api = text_of(body, "leader_api");  // what the leader published: where to ask it
        return {3, where + " does not lead" +
                       (leader.empty() ? std::string("; no leader is known")
                                       : "; the leader is " + leader + (api.empty() ? "" : " at " + api))};
      }
      break;
    default:
      break;
  }
  return {1, where + " answered " + std::to_string(res.result_int()) + (error.empty() ? "" : " " + error) +
                 (message.empty() ? "" : ": " + message)};
}

}  // namespace baton::agent
