// SPDX-License-Identifier: Apache-2.0
#pragma once
// `baton conformance` over HTTP, its wire: a raw HTTP/1.1 client (TLS for https://) driven synchronously, and
// the answers as the checks read them. The checks must see the exact statuses and bodies, which the SDK's
// backend maps into its own errors, so they do not go through it. Private to the CLI.

#include "baton/common/tls_context.hpp"
#include "conformance_check.hpp"
#include "exit_code.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include <cctype>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace baton::cli::http_conformance {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace json = boost::json;
using asio::ip::tcp;
using steady = std::chrono::steady_clock;
using std::chrono::milliseconds;
using namespace std::chrono_literals;

struct reply {
  int status = 0;     // 0: no answer (error says why)
  std::string error;  // transport failure
  std::string body;
  std::string allow;  // the Allow header
  json::value json;   // null unless the body is JSON
  steady::time_point sent, received;

  std::string str(std::string_view field) const {
    if (auto* o = json.if_object())
      if (auto* v = o->if_contains(field); v && v->is_string()) return std::string(v->get_string());
    return {};
  }
  std::optional<std::int64_t> num(std::string_view field) const {
    if (auto* o = json.if_object())
      if (auto* v = o->if_contains(field)) {
        if (v->is_int64()) return v->get_int64();
        if (v->is_uint64() && v->get_uint64() <= static_cast<std::uint64_t>(INT64_MAX))
          return static_cast<std::int64_t>(v->get_uint64());
      }
    return std::nullopt;
  }
  std::int64_t token() const {
    auto t = num("token");
    expect(t && *t >= 1, "answer without an integer token: " + describe());
    return *t;
  }
  std::string describe() const {
    if (status == 0) return "no answer (" + error + ")";
    std::string b = body.size() > 200 ? body.substr(0, 200) + "..." : body;
    return std::to_string(status) + " " + b;
  }
};

// Where the checks connect, and what every request carries: for https:// the TLS context (verification on,
// the SDK's, from --ca-file/--cert/--key), for a server that requires tokens the Authorization header.
struct server_address {
  std::string host;
  std::string port;
  std::shared_ptr<asio::ssl::context> tls;  // null: plain http://
  std::string authorization;                // empty: none
};

inline server_address parse_url(const std::string& url) {
  const bool https = url.rfind("https://", 0) == 0;
  if (!https && url.rfind("http://", 0) != 0)
    throw cli_error(exit_code::usage,
                    "conformance: --server must be http://HOST[:PORT] or https://HOST[:PORT]");
  std::string rest = url.substr(url.find("://") + 3);
  rest = rest.substr(0, rest.find('/'));
  server_address a{rest, https ? "443" : "80", nullptr, {}};
  if (!rest.empty() && rest.front() == '[') {  // [v6]:port
    auto close = rest.find(']');
    if (close == std::string::npos) throw cli_error(exit_code::usage, "conformance: bad --server URL " + url);
    a.host = rest.substr(1, close - 1);
    if (close + 1 < rest.size() && rest[close + 1] == ':') a.port = rest.substr(close + 2);
  } else if (auto colon = rest.rfind(':'); colon != std::string::npos) {
    a.host = rest.substr(0, colon);
    a.port = rest.substr(colon + 1);
  }
  if (a.host.empty() || a.port.empty())
    throw cli_error(exit_code::usage, "conformance: bad --server URL " + url);
  return a;
}

// One keep-alive connection driven synchronously: each request runs its own io_context until the answer, a
// failure or the timeout. Writing and reading run at once, so an early answer (413) is read even when the
// server stops reading the body.
class connection {
 public:
  explicit connection(server_address a) : addr_(std::move(a)) {}

  // `on_written`, when given, is called (on the requesting thread) once the whole request was written: a
  // request that waits at the server (a queued acquire) is then on its way.
  reply request(http::verb method, const std::string& target, std::string body = {},
                steady::duration timeout = 10s, const std::function<void()>& on_written = {}) {
    reply r;
    r.sent = steady::now();
    if (!open_) {
      if (auto why = connect(timeout)) return fail(r, *why);
      open_ = true;
      buffer_.clear();
    }
    http::request<http::string_body> req{method, target, 11};
    req.set(http::field::host, addr_.host);
    if (!addr_.authorization.empty()) req.set(http::field::authorization, addr_.authorization);
    req.keep_alive(true);
    if (method == http::verb::post || method == http::verb::put) {
      req.set(http::field::content_type, "application/json");
      req.body() = std::move(body);
      req.prepare_payload();
    }
    http::response_parser<http::string_body> parser;
    parser.body_limit(1 << 20);
    beast::error_code write_ec, read_ec;
    tcp_.expires_after(timeout);
    auto exchange = [&](auto& stream) {
      http::async_write(stream, req, [&](beast::error_code e, std::size_t) {
        write_ec = e;
        if (!e && on_written) on_written();
      });
      http::async_read(stream, buffer_, parser, [&](beast::error_code e, std::size_t) { read_ec = e; });
    };
    if (tls_)
      exchange(*tls_);
    else
      exchange(tcp_);
    run();
    r.received = steady::now();
    if (read_ec) {
      if (read_ec == beast::error::timeout) return fail(r, "timed out");
      if (tls_ && detail::is_tls_error(read_ec))
        return fail(r, detail::describe_tls_failure(tls_->native_handle(), read_ec, where(), false));
      return fail(r, read_ec.message());
    }
    const auto& res = parser.get();
    r.status = static_cast<int>(res.result_int());
    r.body = res.body();
    if (auto it = res.find(http::field::allow); it != res.end()) r.allow = std::string(it->value());
    json::error_code jec;
    auto v = json::parse(r.body, jec);
    if (!jec) r.json = std::move(v);
    if (write_ec || !res.keep_alive()) close();
    return r;
  }

  // From another thread, while a request waits on this connection: closes it as a client that goes away does,
  // and the request ends without an answer. Only the socket is closed here, on the requesting thread (a TLS
  // stream may not be destroyed under its pending operations; the failed request then closes the rest). The
  // connection is not used again.
  void abandon() {
    asio::post(ioc_, [this] {
      beast::error_code ignored;
      tcp_.socket().close(ignored);
    });
  }

  void close() {
    beast::error_code ignored;
    tcp_.socket().close(ignored);
    // A TLS session is not reused across TCP connections: each connection gets a fresh stream.
    tls_.reset();
    open_ = false;
  }

 private:
  // Connects (and for https:// shakes hands, checking the certificate against the host); why it failed.
  std::optional<std::string> connect(steady::duration timeout) {
    beast::error_code ec;
    tcp::resolver resolver(ioc_);
    auto endpoints = resolver.resolve(addr_.host, addr_.port, ec);
    if (ec) return "resolve: " + ec.message();
    tcp_.expires_after(timeout);
    tcp_.async_connect(endpoints, [&](beast::error_code e, const tcp::endpoint&) { ec = e; });
    run();
    if (ec) return "connect: " + ec.message();
    if (!addr_.tls) return std::nullopt;
    tls_.emplace(tcp_, *addr_.tls);
    if (auto why = detail::set_expected_host(tls_->native_handle(), addr_.host); !why.empty()) {
      close();
      return "TLS: " + why;
    }
    tcp_.expires_after(timeout);
    tls_->async_handshake(asio::ssl::stream_base::client, [&](beast::error_code e) { ec = e; });
    run();
    if (!ec) return std::nullopt;
    std::string why = ec == beast::error::timeout
                          ? std::string("TLS handshake timed out")
                          : detail::describe_tls_failure(tls_->native_handle(), ec, where(), true);
    close();
    return why;
  }
  std::string where() const { return addr_.host + ":" + addr_.port; }
  void run() {
    ioc_.restart();
    ioc_.run();
  }
  reply& fail(reply& r, std::string why) {
    r.error = std::move(why);
    r.received = steady::now();
    close();
    return r;
  }

  server_address addr_;
  asio::io_context ioc_;
  beast::tcp_stream tcp_{ioc_};
  // The TLS layer over tcp_ (which it refers to) for https://; empty for http://.
  std::optional<asio::ssl::stream<beast::tcp_stream&>> tls_;
  beast::flat_buffer buffer_;
  bool open_ = false;
};

inline std::string encode_segment(const std::string& s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

}  // namespace baton::cli::http_conformance
