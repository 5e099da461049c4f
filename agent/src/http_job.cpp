// SPDX-License-Identifier: Apache-2.0
#include "http_job.hpp"

#include "baton/common/tls_context.hpp"
#include "baton/config.hpp"
#include "baton/error.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/url/parse.hpp>

#include <memory>
#include <optional>

namespace baton::agent {
namespace asio = boost::asio;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;
using boost::system::error_code;

asio::awaitable<http_call_result> call_http(const http_request_spec& spec,
                                            std::chrono::milliseconds timeout) {
  using namespace asio::experimental::awaitable_operators;
  http_call_result out;
  auto u = boost::urls::parse_absolute_uri(spec.url);
  const bool https = u && u->scheme() == "https";
  if (!u || (u->scheme() != "http" && !https) || u->host().empty()) {
    out.ec = make_error_code(boost::system::errc::invalid_argument);
    out.body = "unsupported URL " + without_credentials(spec.url);
    co_return out;
  }
  // The same TLS client as the SDK's: the certificate verified against ca_file (else the system store) and
  // checked to name the URL's host. The CA file is read for each run, so a renewed bundle is used at once.
  std::shared_ptr<asio::ssl::context> tls;
  if (https) {
    try {
      tls = detail::make_client_tls_context(tls_config{spec.ca_file, {}, {}});
    } catch (const exception& e) {
      out.ec = make_error_code(boost::system::errc::invalid_argument);
      out.body = e.diagnostic();
      co_return out;
    }
  }
  auto ex = co_await asio::this_coro::executor;
  std::string host = u->host_address();
  if (!host.empty() && host.front() == '[') host = host.substr(1, host.size() - 2);
  std::string port = u->has_port() ? std::string(u->port()) : (https ? "443" : "80");
  std::string target = u->encoded_path().empty() ? "/" : std::string(u->encoded_path());
  if (u->has_query()) target += "?" + std::string(u->encoded_query());

  http::request<http::string_body> req{http::string_to_verb(spec.method), target, 11};
  if (req.method() == http::verb::unknown) req.method_string(spec.method);
  req.set(http::field::host, u->encoded_host_and_port());
  req.set(http::field::user_agent, "baton-agent");
  for (const auto& [name, value] : spec.headers)
    req.set(name, value);
  req.body() = spec.body;
  req.keep_alive(false);
  req.prepare_payload();

  tcp::socket socket(ex);
  std::optional<asio::ssl::stream<tcp::socket&>> stream;
  boost::beast::flat_buffer buffer;
  http::response<http::string_body> res;
  // Why the TLS layer refused, for the run's detail (an untrusted certificate, a host name mismatch).
  std::string tls_failure;
  auto exchange = [&]() -> asio::awaitable<error_code> {
    tcp::resolver resolver(ex);
    auto [rec, endpoints] = co_await resolver.async_resolve(host, port, asio::as_tuple(asio::use_awaitable));
    if (rec) co_return rec;
    auto [cec, ep] = co_await asio::async_connect(socket, endpoints, asio::as_tuple(asio::use_awaitable));
    if (cec) co_return cec;
    if (!tls) {
      auto [wec, wn] = co_await http::async_write(socket, req, asio::as_tuple(asio::use_awaitable));
      if (wec) co_return wec;
      auto [hec, hn] = co_await http::async_read(socket, buffer, res, asio::as_tuple(asio::use_awaitable));
      co_return hec;
    }
    stream.emplace(socket, *tls);
    const std::string where = host + ":" + port;
    if (auto why = detail::set_expected_host(stream->native_handle(), host); !why.empty()) {
      tls_failure = why;
      co_return make_error_code(boost::system::errc::invalid_argument);
    }
    auto [sec] =
        co_await stream->async_handshake(asio::ssl::stream_base::client, asio::as_tuple(asio::use_awaitable));
    if (sec) {
      if (detail::is_tls_error(sec))
        tls_failure = detail::describe_tls_failure(stream->native_handle(), sec, where, true);
      co_return sec;
    }
    auto [wec, wn] = co_await http::async_write(*stream, req, asio::as_tuple(asio::use_awaitable));
    if (wec) co_return wec;
    auto [hec, hn] = co_await http::async_read(*stream, buffer, res, asio::as_tuple(asio::use_awaitable));
    // The connection is not reused (Connection: close): no TLS close_notify is waited for.
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
    out.ec = tec ? make_error_code(asio::error::operation_aborted)
                 : make_error_code(boost::system::errc::timed_out);
    co_return out;
  }
  out.ec = std::get<0>(r);
  if (out.ec) {
    out.body = tls_failure;
  } else {
    out.status = static_cast<int>(res.result_int());
    out.body = res.body().substr(0, 4096);
    if (auto it = res.find(http::field::location); it != res.end()) out.location = std::string(it->value());
  }
  co_return out;
}

}  // namespace baton::agent
