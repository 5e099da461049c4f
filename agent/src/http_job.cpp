#include "http_job.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/url/parse.hpp>

namespace baton::agent {
namespace asio = boost::asio;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;
using boost::system::error_code;

asio::awaitable<http_call_result> call_http(const http_request_spec& spec, std::chrono::milliseconds timeout) {
  using namespace asio::experimental::awaitable_operators;
  http_call_result out;
  auto u = boost::urls::parse_absolute_uri(spec.url);
  if (!u || u->scheme() != "http" || u->host().empty()) {
    out.ec = make_error_code(boost::system::errc::invalid_argument);
    out.body = "unsupported URL " + spec.url;
    co_return out;
  }
  auto ex = co_await asio::this_coro::executor;
  std::string host = u->host_address();
  if (!host.empty() && host.front() == '[') host = host.substr(1, host.size() - 2);
  std::string port = u->has_port() ? std::string(u->port()) : "80";
  std::string target = u->encoded_path().empty() ? "/" : std::string(u->encoded_path());
  if (u->has_query()) target += "?" + std::string(u->encoded_query());

  http::request<http::string_body> req{http::string_to_verb(spec.method), target, 11};
  if (req.method() == http::verb::unknown) req.method_string(spec.method);
  req.set(http::field::host, u->encoded_host_and_port());
  req.set(http::field::user_agent, "baton-agent");
  for (const auto& [name, value] : spec.headers) req.set(name, value);
  req.body() = spec.body;
  req.keep_alive(false);
  req.prepare_payload();

  tcp::socket socket(ex);
  boost::beast::flat_buffer buffer;
  http::response<http::string_body> res;
  auto exchange = [&]() -> asio::awaitable<error_code> {
    tcp::resolver resolver(ex);
    auto [rec, endpoints] = co_await resolver.async_resolve(host, port, asio::as_tuple(asio::use_awaitable));
    if (rec) co_return rec;
    auto [cec, ep] = co_await asio::async_connect(socket, endpoints, asio::as_tuple(asio::use_awaitable));
    if (cec) co_return cec;
    auto [wec, wn] = co_await http::async_write(socket, req, asio::as_tuple(asio::use_awaitable));
    if (wec) co_return wec;
    auto [hec, hn] = co_await http::async_read(socket, buffer, res, asio::as_tuple(asio::use_awaitable));
    co_return hec;
  };
  asio::steady_timer timer(ex);
  if (timeout.count() > 0)
    timer.expires_after(timeout);
  else
    timer.expires_at(asio::steady_timer::time_point::max());
  auto r = co_await (exchange() || timer.async_wait(asio::as_tuple(asio::use_awaitable)));
  if (r.index() == 1) {
    // The timer finished first: a timeout, unless the whole call was cancelled (then the timer was too).
    auto [tec] = std::get<1>(r);
    out.ec = tec ? make_error_code(asio::error::operation_aborted) : make_error_code(boost::system::errc::timed_out);
    co_return out;
  }
  out.ec = std::get<0>(r);
  if (!out.ec) {
    out.status = static_cast<int>(res.result_int());
    out.body = res.body().substr(0, 4096);
  }
  co_return out;
}

}  // namespace baton::agent
