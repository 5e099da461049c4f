// SPDX-License-Identifier: Apache-2.0
#include "http_transport.hpp"

#include "baton/common/tls_context.hpp"
#include "baton/error.hpp"
#include "renew_batch_answer.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/json/parse.hpp>

namespace baton::detail {
namespace {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace json = boost::json;
using tcp = asio::ip::tcp;
using boost::system::error_code;
using clock = std::chrono::steady_clock;
using milliseconds = std::chrono::milliseconds;
constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);
using request_t = http::request<http::string_body>;
using response_t = http::response<http::string_body>;
}  // namespace

struct http_transport::connection {
  explicit connection(const asio::any_io_executor& ex) : socket(ex) {}
  tcp::socket socket;
  /// The TLS context `tls` was made with, current when the connection was made: kept for the connection's
  /// life, whatever reloads follow.
  std::shared_ptr<asio::ssl::context> tls_context;
  /// Over `socket`, for https:// and etcds://.
  std::unique_ptr<asio::ssl::stream<tcp::socket&>> tls;
  beast::flat_buffer buffer;
  /// Why the last exchange failed at the TLS layer (error::tls_failed), or what a connection failure right
  /// after the handshake may mean; for the caller's diagnostic.
  std::string tls_failure;
};

std::string string_field(const json::value& v, std::string_view name) {
  if (!v.is_object()) return {};
  auto* f = v.as_object().if_contains(name);
  return f && f->is_string() ? std::string(f->as_string()) : std::string();
}

bool uint_field(const json::value& v, std::string_view name, std::uint64_t& out) {
  if (!v.is_object()) return false;
  auto* f = v.as_object().if_contains(name);
  if (!f) return false;
  if (f->is_string()) {
    decimal_reader d;
    d.add(f->as_string());
    if (!d.ok()) return false;
    out = d.value();
    return true;
  }
  error_code ec;
  out = f->to_number<std::uint64_t>(ec);
  return !ec;
}

http_transport::http_transport(asio::any_io_executor ex, std::string host, std::string port,
                               std::string host_header, std::size_t max_idle, std::size_t max_open,
                               std::shared_ptr<client_tls> tls)
    : ex_(std::move(ex)),
      tls_(std::move(tls)),
      host_(std::move(host)),
      port_(std::move(port)),
      host_header_(std::move(host_header)),
      max_idle_(max_idle),
      max_open_(std::max<std::size_t>(1, max_open)) {}

http_transport::~http_transport() = default;

void http_transport::close() {
  for (auto& c : idle_) {
    error_code ignored;
    c->socket.close(ignored);
    --open_;
  }
  idle_.clear();
  if (!waiting_.empty()) waiting_.front()->cancel();
}

void http_transport::released_one() {
  --open_;
  if (!waiting_.empty()) waiting_.front()->cancel();
}

// One request/response on `c`, raced against the deadline. Cancellation of the caller reaches both.
asio::awaitable<error_code> http_transport::exchange(connection& c, void* req_ptr, void* res_ptr,
                                                     clock::time_point deadline, bool connect) {
  auto& req = *static_cast<request_t*>(req_ptr);
  auto& res = *static_cast<response_t*>(res_ptr);
  using namespace asio::experimental::awaitable_operators;
  asio::steady_timer timer(ex_, deadline);
  auto work = [&]() -> asio::awaitable<error_code> {
    if (connect) {
      // A literal address needs no resolver: name resolution runs on a thread of its own and cannot be
      // cancelled, so it would let a request outlive its timeout.
      error_code aec;
      auto address = asio::ip::make_address(host_, aec);
      unsigned long port_number = std::strtoul(port_.c_str(), nullptr, 10);
      if (!aec && port_number > 0 && port_number <= 65535) {
        auto [cec] = co_await c.socket.async_connect(
            tcp::endpoint(address, static_cast<unsigned short>(port_number)), use_tuple);
        if (cec) co_return cec;
      } else {
        tcp::resolver resolver(ex_);
        auto [rec, endpoints] = co_await resolver.async_resolve(host_, port_, use_tuple);
        if (rec) co_return rec;
        auto [cec, ep] = co_await asio::async_connect(c.socket, endpoints, use_tuple);
        if (cec) co_return cec;
      }
      error_code ignored;
      c.socket.set_option(tcp::no_delay(true), ignored);
      if (tls_) {
        c.tls_context = tls_->current();
        c.tls = std::make_unique<asio::ssl::stream<tcp::socket&>>(c.socket, *c.tls_context);
        if (auto why = set_expected_host(c.tls->native_handle(), host_); !why.empty()) {
          c.tls_failure = "cannot verify the TLS certificate of " + host_header_ + ": " + why;
          co_return make_error_code(error::tls_failed);
        }
        auto [hec] = co_await c.tls->async_handshake(asio::ssl::stream_base::client, use_tuple);
        if (hec) {
          c.tls_failure = describe_tls_failure(c.tls->native_handle(), hec, host_header_, true);
          co_return make_error_code(error::tls_failed);
        }
      }
    }
    auto round_trip = [&](auto& stream) -> asio::awaitable<error_code> {
      auto [wec, wn] = co_await http::async_write(stream, req, use_tuple);
      if (wec) co_return wec;
      auto [rec, rn] = co_await http::async_read(stream, c.buffer, res, use_tuple);
      co_return rec;
    };
    error_code ec;
    if (c.tls)
      ec = co_await round_trip(*c.tls);
    else
      ec = co_await round_trip(c.socket);
    // After the handshake a TLS error is the server refusing us (TLS 1.3 sends the verdict on our client
    // certificate only then); a truncated stream is a connection that broke, as on plain TCP.
    if (c.tls && connect && is_tls_error(ec) && ec != asio::ssl::error::stream_truncated) {
      c.tls_failure = describe_tls_failure(c.tls->native_handle(), ec, host_header_, false);
      co_return make_error_code(error::tls_failed);
    }
    // A server that refuses our client certificate after a TLS 1.3 handshake may close before we read its
    // alert (a reset drops it). Still a connection failure (retried), but the message says what it may be.
    if (c.tls && connect &&
        (ec == asio::error::connection_reset || ec == asio::error::eof ||
         ec == asio::ssl::error::stream_truncated))
      c.tls_failure =
          "the server closed the connection right after the TLS handshake; a server that "
          "requires a client certificate does this when it refuses ours";
    co_return ec;
  };
  auto result = co_await (work() || timer.async_wait(use_tuple));
  if (result.index() == 1) co_return make_error_code(error::request_timeout);
  co_return std::get<0>(result);
}

namespace {
void parse_body(http_result& r, std::string_view text) {
  error_code jec;
  r.body = json::parse(text, jec);
  if (jec) {
    r.ec = error::protocol_error;
    r.diagnostic = "HTTP " + std::to_string(r.status) + " with a body that is not JSON";
  }
}
}  // namespace

void parse_json_body(http_result& r) {
  parse_body(r, r.text);
}

asio::awaitable<http_result> http_transport::request(std::string_view method, std::string target,
                                                     std::string body, milliseconds timeout,
                                                     answer_form form) {
  const http::verb verb = http::string_to_verb(method);
  request_t req{verb, target, 11};
  req.set(http::field::host, host_header_);
  req.set(http::field::user_agent, "baton-sdk");
  if (!authorization_.empty()) req.set(http::field::authorization, authorization_);
  if (verb == http::verb::post || !body.empty()) {
    req.set(http::field::content_type, "application/json");
    req.body() = std::move(body);
  }
  req.keep_alive(true);
  req.prepare_payload();

  const auto deadline = clock::now() + timeout;
  http_result out;
  // A pooled connection may have been closed by the server while idle; that failure says nothing about
  // the server, so it gets one more try on a fresh connection (every protocol request is safe to repeat).
  for (int attempt = 0; attempt < 2; ++attempt) {
    // Bounded: at most max_open_ connections at once. During an outage every retry would otherwise open
    // one more socket, and a process holding thousands of leases would run out of descriptors.
    while (idle_.empty() && open_ >= max_open_) {
      asio::steady_timer slot(ex_, deadline);
      auto it = waiting_.insert(waiting_.end(), &slot);
      auto [wec] = co_await slot.async_wait(use_tuple);
      waiting_.erase(it);
      if (!wec) {
        out.ec = error::request_timeout;
        out.diagnostic =
            "no free connection to " + host_header_ + " within " + std::to_string(timeout.count()) + " ms";
        co_return out;
      }
      if ((co_await asio::this_coro::cancellation_state).cancelled() != asio::cancellation_type::none) {
        out.ec = asio::error::operation_aborted;
        co_return out;
      }
    }
    std::unique_ptr<connection> c;
    bool fresh = idle_.empty();
    if (fresh) {
      c = std::make_unique<connection>(ex_);
      ++open_;
    } else {
      c = std::move(idle_.back());
      idle_.pop_back();
    }
    http::response<http::string_body> res;
    res.body().reserve(256);
    error_code ec = co_await exchange(*c, &req, &res, deadline, fresh);
    if (ec) {
      error_code ignored;
      c->socket.close(ignored);
      released_one();
      if (ec == asio::error::operation_aborted) {
        out.ec = ec;  // the caller cancelled: report it as such, not as a server problem
        co_return out;
      }
      if (!fresh && ec != error::request_timeout && attempt == 0) continue;
      if (ec == error::request_timeout) {
        out.ec = ec;
        out.diagnostic = "no answer within " + std::to_string(timeout.count()) + " ms";
      } else if (ec == error::tls_failed) {
        out.ec = ec;
        out.diagnostic = std::move(c->tls_failure);
      } else {
        out.ec = error::connection_failed;
        out.diagnostic = host_header_ + ": " + ec.message();
        if (!c->tls_failure.empty()) out.diagnostic += " (" + c->tls_failure + ")";
      }
      co_return out;
    }
    out.status = static_cast<int>(res.result_int());
    if (form == answer_form::text)
      out.text = std::move(res.body());
    else
      parse_body(out, res.body());
    if (res.keep_alive() && idle_.size() < max_idle_) {
      idle_.push_back(std::move(c));
      if (!waiting_.empty()) waiting_.front()->cancel();  // a waiter can take it
    } else {
      released_one();
    }
    co_return out;
  }
  co_return out;
}

}  // namespace baton::detail
