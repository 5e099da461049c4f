// The HTTP backend: docs/protocol.md over a pool of HTTP/1.1 keep-alive connections (http_transport).

#include "baton/backend.hpp"
#include "baton/error.hpp"
#include "http_transport.hpp"
#include "tls_context.hpp"

#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>
#include <boost/url/encode.hpp>
#include <boost/url/parse.hpp>
#include <boost/url/rfc/unreserved_chars.hpp>

#include <vector>

namespace baton {
namespace {
using detail::http_result;
using detail::string_field;
using detail::uint_field;

namespace asio = boost::asio;
namespace json = boost::json;

// Maps a status the operation does not expect to an error, keeping the server's message.
void unexpected(http_result& r) {
  std::string msg = string_field(r.body, "message");
  const std::string code = string_field(r.body, "error");
  // A limit refuses before anything changes. Any other 503 (storage_unavailable, or one from a proxy) may
  // come after the change reached the server: its outcome is unknown, which storage_unavailable says.
  const bool at_limit =
      r.status == 429 || (r.status == 503 && (code == "too_many_waiters" || code == "too_many_connections"));
  if (r.status == 400) r.ec = error::bad_request;
  else if (r.status == 401) r.ec = error::unauthorized;
  else if (r.status == 403) r.ec = error::forbidden;
  else if (at_limit) r.ec = error::server_busy;
  else if (r.status == 503) r.ec = error::storage_unavailable;
  else r.ec = error::server_error;
  r.diagnostic = "HTTP " + std::to_string(r.status) + (msg.empty() ? "" : ": " + msg);
}

class http_backend final : public backend {
 public:
  http_backend(asio::any_io_executor ex, const client_config& config) : ex_(std::move(ex)), config_(config) {
    auto u = boost::urls::parse_absolute_uri(config.server_url);
    if (!u || (u->scheme() != "http" && u->scheme() != "https") || u->host().empty())
      throw exception(error::invalid_config,
                      "unsupported server URL \"" + without_credentials(config.server_url) + "\"");
    const bool https = u->scheme() == "https";
    std::string host = u->host_address();
    if (u->host_type() == boost::urls::host_type::ipv6 && host.size() > 2 && host.front() == '[')
      host = host.substr(1, host.size() - 2);
    transport_ = std::make_unique<detail::http_transport>(
        ex_, host, u->has_port() ? std::string(u->port()) : std::string(https ? "443" : "80"),
        std::string(u->encoded_host_and_port()), config.max_idle_connections, config.max_connections,
        https ? detail::make_client_tls_context(config.tls) : nullptr);
    if (!config.bearer_token.empty()) transport_->set_authorization("Bearer " + config.bearer_token);
    base_path_ = std::string(u->encoded_path());
    while (!base_path_.empty() && base_path_.back() == '/') base_path_.pop_back();
  }

  asio::awaitable<acquire_reply> acquire(std::string key, std::string owner, milliseconds ttl,
                                         milliseconds timeout) override {
    return acquire(std::move(key), std::move(owner), ttl, {}, timeout);
  }

  asio::awaitable<acquire_reply> acquire(std::string key, std::string owner, milliseconds ttl,
                                         std::string value, milliseconds timeout) override {
    json::object body{{"owner", owner}, {"ttl_ms", ttl.count()}};
    // Sent only when there is one: an acquire without a value is the same request as before values.
    if (!value.empty()) body["value"] = value;
    auto r = co_await transport_->request("POST", lock_path(key) + "/acquire", json::serialize(body), timeout);
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
        out.holder.value = string_field(r.body, "value");
        r.diagnostic = string_field(r.body, "message");
      } else {
        unexpected(r);
      }
    }
    co_return with_outcome(std::move(out), r);
  }

  asio::awaitable<renew_reply> renew(std::string key, std::string owner, std::uint64_t token, milliseconds ttl,
                                     milliseconds timeout) override {
    json::object body{{"owner", owner}, {"token", token}, {"ttl_ms", ttl.count()}};
    auto r = co_await transport_->request("POST", lock_path(key) + "/renew", json::serialize(body), timeout);
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
    co_return with_outcome(std::move(out), r);
  }

  asio::awaitable<release_reply> release(std::string key, std::string owner, std::uint64_t token,
                                         milliseconds timeout) override {
    json::object body{{"owner", owner}, {"token", token}};
    auto r = co_await transport_->request("POST", lock_path(key) + "/release", json::serialize(body), timeout);
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
    co_return with_outcome(std::move(out), r);
  }

  asio::awaitable<get_reply> get(std::string key, std::optional<wait_for_change> wait,
                                 milliseconds timeout) override {
    std::string target = lock_path(key);
    if (wait)
      target += "?wait_ms=" + std::to_string(wait->wait.count()) + "&token=" + std::to_string(wait->token);
    auto r = co_await transport_->request("GET", target, {}, timeout);
    get_reply out;
    if (!r.ec) {
      if (r.status == 200) {
        holder_info h;
        h.owner = string_field(r.body, "owner");
        std::uint64_t remaining = 0;
        if (!uint_field(r.body, "token", h.token) || !uint_field(r.body, "ttl_remaining_ms", remaining))
          protocol(r, "lock answer lacks token or ttl_remaining_ms");
        h.ttl_remaining = milliseconds(static_cast<std::int64_t>(remaining));
        h.value = string_field(r.body, "value");  // absent from servers before values: empty
        out.holder = std::move(h);
      } else if (r.status == 404 && string_field(r.body, "error") == "not_held") {
      } else {
        unexpected(r);
      }
    }
    co_return with_outcome(std::move(out), r);
  }

  void close() override { transport_->close(); }

 private:
  // Every reply type carries the request's error and the server's message the same way.
  template <class Reply>
  static Reply with_outcome(Reply out, http_result& r) {
    out.ec = r.ec;
    out.diagnostic = std::move(r.diagnostic);
    return out;
  }

  static void protocol(http_result& r, std::string what) {
    r.ec = error::protocol_error;
    r.diagnostic = std::move(what);
  }

  std::string lock_path(std::string_view key) const {
    // The key is one path segment: encode everything but unreserved characters, '/' included.
    return base_path_ + "/v1/locks/" + boost::urls::encode(key, boost::urls::unreserved_chars);
  }

  asio::any_io_executor ex_;
  client_config config_;
  std::string base_path_;
  std::unique_ptr<detail::http_transport> transport_;
};

}  // namespace

asio::awaitable<acquire_reply> backend::acquire(std::string key, std::string owner, milliseconds ttl,
                                                std::string value, milliseconds timeout) {
  if (value.empty()) co_return co_await acquire(std::move(key), std::move(owner), ttl, timeout);
  acquire_reply out;
  out.ec = error::invalid_config;
  out.diagnostic = "this backend cannot publish a value with a lease";
  co_return out;
}

std::shared_ptr<backend> make_etcd_backend(const asio::any_io_executor& ex, const client_config& config);

std::shared_ptr<backend> make_backend(const asio::any_io_executor& ex, const client_config& config) {
  config.validate();
  if (config.server_url.rfind("etcd://", 0) == 0 || config.server_url.rfind("etcds://", 0) == 0)
    return make_etcd_backend(ex, config);
  return std::make_shared<http_backend>(ex, config);
}

}  // namespace baton
