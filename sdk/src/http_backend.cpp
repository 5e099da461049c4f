// The HTTP backend: docs/protocol.md over a pool of HTTP/1.1 keep-alive connections (Beast).
// Beast stays in this file; public headers never see it.

#include "baton/backend.hpp"
#include "baton/error.hpp"

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
#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/url/encode.hpp>
#include <boost/url/parse.hpp>
#include <boost/url/rfc/unreserved_chars.hpp>

#include <vector>

namespace baton {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace json = boost::json;
using tcp = asio::ip::tcp;
using boost::system::error_code;
using clock = std::chrono::steady_clock;
constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

struct connection {
  explicit connection(const asio::any_io_executor& ex) : socket(ex) {}
  tcp::socket socket;
  beast::flat_buffer buffer;
};

struct http_result {
  error_code ec;
  std::string diagnostic;
  int status = 0;
  json::value body;
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
  error_code ec;
  out = f->to_number<std::uint64_t>(ec);
  return !ec;
}

// Maps a status the operation does not expect to an error, keeping the server's message.
void unexpected(http_result& r) {
  std::string msg = string_field(r.body, "message");
  if (r.status == 400) r.ec = error::bad_request;
  else if (r.status == 503) r.ec = error::storage_unavailable;
  else r.ec = error::server_error;
  r.diagnostic = "HTTP " + std::to_string(r.status) + (msg.empty() ? "" : ": " + msg);
}

class http_backend final : public backend {
 public:
  http_backend(asio::any_io_executor ex, const client_config& config) : ex_(std::move(ex)), config_(config) {
    auto u = boost::urls::parse_absolute_uri(config.server_url);
    if (!u || u->scheme() != "http" || u->host().empty())
      throw exception(error::invalid_config, "unsupported server URL \"" + config.server_url + "\"");
    host_ = u->host_address();
    if (u->host_type() == boost::urls::host_type::ipv6 && host_.size() > 2 && host_.front() == '[')
      host_ = host_.substr(1, host_.size() - 2);
    port_ = u->has_port() ? std::string(u->port()) : "80";
    host_header_ = std::string(u->encoded_host_and_port());
    base_path_ = std::string(u->encoded_path());
    while (!base_path_.empty() && base_path_.back() == '/') base_path_.pop_back();
  }

  asio::awaitable<acquire_reply> acquire(std::string key, std::string owner, milliseconds ttl,
                                         milliseconds timeout) override {
    json::object body{{"owner", owner}, {"ttl_ms", ttl.count()}};
    auto r = co_await roundtrip(http::verb::post, lock_path(key) + "/acquire", json::serialize(body), timeout);
    acquire_reply out;
    if (!r.ec) {
      if (r.status == 200) {
        if (!uint_field(r.body, "token", out.token) || out.token == 0) protocol(r, "acquire answer has no token");
      } else if (r.status == 409 && string_field(r.body, "error") == "held") {
        r.ec = error::held;
        out.holder.owner = string_field(r.body, "owner");
        uint_field(r.body, "token", out.holder.token);
        std::uint64_t remaining = 0;
        uint_field(r.body, "ttl_remaining_ms", remaining);
        out.holder.ttl_remaining = milliseconds(static_cast<std::int64_t>(remaining));
        r.diagnostic = string_field(r.body, "message");
      } else {
        unexpected(r);
      }
    }
    out.ec = r.ec;
    out.diagnostic = std::move(r.diagnostic);
    co_return out;
  }

  asio::awaitable<renew_reply> renew(std::string key, std::string owner, std::uint64_t token, milliseconds ttl,
                                     milliseconds timeout) override {
    json::object body{{"owner", owner}, {"token", token}, {"ttl_ms", ttl.count()}};
    auto r = co_await roundtrip(http::verb::post, lock_path(key) + "/renew", json::serialize(body), timeout);
    renew_reply out;
    if (!r.ec) {
      if (r.status == 200) {
      } else if (r.status == 409 && string_field(r.body, "error") == "lost") {
        r.ec = error::lease_lost;
        out.lost_reason = string_field(r.body, "reason");
        r.diagnostic = string_field(r.body, "message");
      } else {
        unexpected(r);
      }
    }
    out.ec = r.ec;
    out.diagnostic = std::move(r.diagnostic);
    co_return out;
  }

  asio::awaitable<release_reply> release(std::string key, std::string owner, std::uint64_t token,
                                         milliseconds timeout) override {
    json::object body{{"owner", owner}, {"token", token}};
    auto r = co_await roundtrip(http::verb::post, lock_path(key) + "/release", json::serialize(body), timeout);
    release_reply out;
    if (!r.ec) {
      if (r.status == 200) {
        // "outcome" is optional in the protocol; without it a 200 means released.
        out.outcome = string_field(r.body, "outcome") == "already_free" ? release_outcome::already_free
                                                                        : release_outcome::released;
      } else if (r.status == 409 && string_field(r.body, "error") == "not_owner") {
        out.outcome = release_outcome::not_owner;
        r.diagnostic = string_field(r.body, "message");
      } else {
        unexpected(r);
      }
    }
    out.ec = r.ec;
    out.diagnostic = std::move(r.diagnostic);
    co_return out;
  }

  asio::awaitable<get_reply> get(std::string key, std::optional<wait_for_change> wait,
                                 milliseconds timeout) override {
    std::string target = lock_path(key);
    if (wait)
      target += "?wait_ms=" + std::to_string(wait->wait.count()) + "&token=" + std::to_string(wait->token);
    auto r = co_await roundtrip(http::verb::get, target, {}, timeout);
    get_reply out;
    if (!r.ec) {
      if (r.status == 200) {
        holder_info h;
        h.owner = string_field(r.body, "owner");
        std::uint64_t remaining = 0;
        if (!uint_field(r.body, "token", h.token) || !uint_field(r.body, "ttl_remaining_ms", remaining))
          protocol(r, "lock answer lacks token or ttl_remaining_ms");
        h.ttl_remaining = milliseconds(static_cast<std::int64_t>(remaining));
        out.holder = std::move(h);
      } else if (r.status == 404 && string_field(r.body, "error") == "not_held") {
      } else {
        unexpected(r);
      }
    }
    out.ec = r.ec;
    out.diagnostic = std::move(r.diagnostic);
    co_return out;
  }

  void close() override {
    for (auto& c : idle_) {
      error_code ignored;
      c->socket.close(ignored);
    }
    idle_.clear();
  }

 private:
  static void protocol(http_result& r, std::string what) {
    r.ec = error::protocol_error;
    r.diagnostic = std::move(what);
  }

  std::string lock_path(std::string_view key) const {
    // The key is one path segment: encode everything but unreserved characters, '/' included.
    return base_path_ + "/v1/locks/" + boost::urls::encode(key, boost::urls::unreserved_chars);
  }

  // One request/response on `c`, raced against the deadline. Cancellation of the caller reaches both.
  asio::awaitable<error_code> exchange(connection& c, http::request<http::string_body>& req,
                                       http::response<http::string_body>& res, clock::time_point deadline,
                                       bool connect) {
    using namespace asio::experimental::awaitable_operators;
    asio::steady_timer timer(ex_, deadline);
    auto work = [&]() -> asio::awaitable<error_code> {
      if (connect) {
        tcp::resolver resolver(ex_);
        auto [rec, endpoints] = co_await resolver.async_resolve(host_, port_, use_tuple);
        if (rec) co_return rec;
        auto [cec, ep] = co_await asio::async_connect(c.socket, endpoints, use_tuple);
        if (cec) co_return cec;
        c.socket.set_option(tcp::no_delay(true), cec);
      }
      auto [wec, wn] = co_await http::async_write(c.socket, req, use_tuple);
      if (wec) co_return wec;
      auto [rec, rn] = co_await http::async_read(c.socket, c.buffer, res, use_tuple);
      co_return rec;
    };
    auto result = co_await (work() || timer.async_wait(use_tuple));
    if (result.index() == 1) co_return make_error_code(error::request_timeout);
    co_return std::get<0>(result);
  }

  asio::awaitable<http_result> roundtrip(http::verb verb, std::string target, std::string body,
                                         milliseconds timeout) {
    http::request<http::string_body> req{verb, target, 11};
    req.set(http::field::host, host_header_);
    req.set(http::field::user_agent, "baton-sdk");
    if (verb == http::verb::post) {
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
      std::unique_ptr<connection> c;
      bool fresh = idle_.empty();
      if (fresh) {
        c = std::make_unique<connection>(ex_);
      } else {
        c = std::move(idle_.back());
        idle_.pop_back();
      }
      http::response<http::string_body> res;
      res.body().reserve(256);
      error_code ec = co_await exchange(*c, req, res, deadline, fresh);
      if (ec) {
        error_code ignored;
        c->socket.close(ignored);
        if (ec == asio::error::operation_aborted) {
          out.ec = ec;  // the caller cancelled: report it as such, not as a server problem
          co_return out;
        }
        if (!fresh && ec != error::request_timeout && attempt == 0) continue;
        if (ec == error::request_timeout) {
          out.ec = ec;
          out.diagnostic = "no answer within " + std::to_string(timeout.count()) + " ms";
        } else {
          out.ec = error::connection_failed;
          out.diagnostic = host_header_ + ": " + ec.message();
        }
        co_return out;
      }
      out.status = static_cast<int>(res.result_int());
      error_code jec;
      out.body = json::parse(res.body(), jec);
      if (jec) {
        out.ec = error::protocol_error;
        out.diagnostic = "HTTP " + std::to_string(out.status) + " with a body that is not JSON";
      }
      if (res.keep_alive() && idle_.size() < config_.max_idle_connections) idle_.push_back(std::move(c));
      co_return out;
    }
    co_return out;
  }

  asio::any_io_executor ex_;
  client_config config_;
  std::string host_, port_, host_header_, base_path_;
  std::vector<std::unique_ptr<connection>> idle_;
};

}  // namespace

std::shared_ptr<backend> make_backend(const asio::any_io_executor& ex, const client_config& config) {
  config.validate();
  return std::make_shared<http_backend>(ex, config);
}

}  // namespace baton
