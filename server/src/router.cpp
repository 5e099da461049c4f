// SPDX-License-Identifier: Apache-2.0
#include "router.hpp"

#include "baton/common/log.hpp"

#include <boost/asio/use_awaitable.hpp>

#include <cstdio>

namespace baton::server {
namespace asio = boost::asio;

namespace {

response refusal(const request& req, const answer_context& c, const api_error& e) {
  auto res = error_answer(c, e);
  if (e.status == 401)
    res.set(http::field::www_authenticate, req[http::field::authorization].empty()
                                               ? R"(Bearer realm="batond")"
                                               : R"(Bearer realm="batond", error="invalid_token")");
  log::debug("auth_refused",
             {{"status", e.status}, {"target", std::string(req.target())}, {"reason", e.message}});
  return res;
}

// An answer known without waiting, as the awaitable handle() returns.
asio::awaitable<response> answered(response res) {
  co_return res;
}

}  // namespace

router::router(const http_options& o, lock_service& s, server_metrics& m, const std::atomic<bool>& d)
    : options(o),
      service(s),
      metrics(m),
      draining(d),
      loopback_listener(o.listen.address().is_loopback()),
      client_rate(o.limits.rate_per_second, o.limits.rate_burst),
      address_rate(o.limits.rate_per_second, o.limits.rate_burst) {}

// Answers `req`. The checks before its route and the routes that never wait run here as plain code;
// only a route that waits (for the log or for a lock) is a coroutine, each with a frame of its own.
// One coroutine holding every route's locals had a frame above the size Asio recycles, so it cost a
// heap allocation per request.
asio::awaitable<response> router::handle(const request& req, route& counted_as,
                                         const std::string& peer_address, clock::time_point started,
                                         std::string& authenticated_as, std::pmr::memory_resource* mem) {
  const answer_context c{req.version(), req.keep_alive() && !draining.load(std::memory_order_relaxed), mem};
  if (auto e = browser_check(req)) {
    log::debug("browser_refused", {{"status", e->status}, {"target", std::string(req.target())}});
    return answered(make_response(mem, static_cast<http::status>(e->status), c.version, false,
                                  error_text(mem, e->code, e->message)));
  }

  // The order of checks (docs/protocol.md, "Order of checks"): who is asking (401), then the route (404),
  // the method (405), the key and query (400), the caller's access to that key (403), the body (400).
  // Nothing about a route or a key is revealed to a caller without a valid token.
  // The target is parsed once; its route's errors and its key's are answered at their places below.
  auto [route_kind, parsed] = parse_request_target(req.target());
  const auto* kind = std::get_if<lock_target::kind>(&route_kind);
  if (kind) counted_as = route_of(lock_target{*kind, {}, {}, {}});
  std::string client;  // the authenticated name; empty without authentication
  std::optional<api_error> refused;
  std::shared_ptr<const auth::token_table> tokens;
  if (options.tokens && !(kind && *kind == lock_target::kind::healthz)) {
    tokens = options.tokens->current();
    auto d = auth::authenticate(*tokens, req[http::field::authorization]);
    if (auto* e = std::get_if<api_error>(&d))
      refused = std::move(*e);
    else
      client = std::move(std::get<std::string>(d));
    authenticated_as = client;
  }
  // The rate is charged after authentication: an authenticated client has a bucket of its own name, so
  // nobody else on its address (or behind its NAT) can spend it; requests without a valid token share
  // their address's bucket, kept apart from the names' buckets.
  if (auto wait =
          client.empty() ? address_rate.admit(peer_address, started) : client_rate.admit(client, started)) {
    auto res = make_response(
        mem, http::status::too_many_requests, c.version, c.keep_alive,
        error_text(mem, "rate_limited",
                   "more than " + rate_text() + " requests per second from this client; retry later"));
    res.set(http::field::retry_after, retry_after_seconds(*wait));
    return answered(std::move(res));
  }
  if (refused) return answered(refusal(req, c, *refused));
  if (auto* e = std::get_if<api_error>(&route_kind)) return answered(error_answer(c, *e));
  const auto method_kind = with_method(*kind, req.method_string());
  if (!method_kind) {
    auto res =
        error_answer(c, {405, "method_not_allowed",
                         "use " + std::string(method_for(*kind)) + " for " + std::string(req.target())});
    res.set(http::field::allow, method_for(*kind));
    return answered(std::move(res));
  }
  if (auto* e = std::get_if<api_error>(&parsed)) return answered(error_answer(c, *e));
  auto& t = std::get<lock_target>(parsed);
  t.what = *method_kind;
  counted_as = route_of(t);
  if (tokens) {
    auto d = auth::authorize(*tokens, req[http::field::authorization], t);
    if (auto* e = std::get_if<api_error>(&d)) return answered(refusal(req, c, *e));
  }

  switch (t.what) {
    case lock_target::kind::healthz:
      // Unhealthy from the moment the log fails until batond has exited (fail-stop, docs/design.md).
      if (!service.storage_healthy()) {
        text o(mem);
        o += '{';
        append_member(o, "status", "storage_failed");
        append_member(o, "error", "storage_failed");
        append_member(o, "message", service.storage_failure());
        o += '}';
        return answered(
            make_response(mem, http::status::service_unavailable, c.version, false, std::move(o)));
      }
      return answered(make_response(mem, http::status::ok, c.version, c.keep_alive, R"({"status":"ok"})"));
    case lock_target::kind::metrics:
      return answered(make_response(mem, http::status::ok, c.version, c.keep_alive, metrics.render(),
                                    "text/plain; version=0.0.4"));
    case lock_target::kind::capabilities:
      return answered(make_response(mem, http::status::ok, c.version, c.keep_alive,
                                    capabilities_body(options.limits.max_body_bytes,
                                                      options.ttl.max_lock_delay, options.ttl.max_permits)));
    case lock_target::kind::acquire:
      return acquire_route(req, c, std::move(t.key), std::move(client), t.wait_ms.value_or(0));
    case lock_target::kind::renew:
      return renew_route(req, c, std::move(t.key), std::move(client));
    case lock_target::kind::renew_batch:
      return renew_batch_route(req, c, std::move(client), std::move(tokens));
    case lock_target::kind::release:
      return release_route(req, c, std::move(t.key), std::move(client));
    case lock_target::kind::proclaim:
      return proclaim_route(req, c, std::move(t.key), std::move(client));
    case lock_target::kind::record_write:
      return record_write_route(req, c, std::move(t.key), std::move(client));
    case lock_target::kind::record_read:
      return record_read_route(c, std::move(t.key));
    case lock_target::kind::get:
      return get_route(c, std::move(t));
    case lock_target::kind::list:
      return list_route(c, std::move(t));
    case lock_target::kind::break_lease:
      return break_route(req, c, std::move(t.key), std::move(client));
  }
  return answered(error_answer(c, {500, "internal", "unhandled route"}));
}

// The routes that wait. Each one parses its body, waits for the service and builds its answer in plain
// functions, so that its frame holds little more than what lives across the wait.
asio::awaitable<response> router::acquire_route(const request& req, answer_context c, std::string key,
                                                std::string client, std::uint64_t wait_ms) {
  auto body = parse_acquire(req.body(), options.ttl);
  if (auto* e = std::get_if<api_error>(&body)) co_return error_answer(c, *e);
  auto& r = std::get<acquire_request>(body);
  std::optional<std::size_t> quota;
  if (options.tokens && !client.empty()) quota = auth::lock_quota(*options.tokens->current(), client);
  const std::uint32_t permits = r.permits.value_or(1);
  if (wait_ms == 0) {
    auto result =
        co_await service.acquire(key, r.owner, r.ttl, client, quota, r.value, r.lock_delay, permits);
    co_return acquire_answer(c, key, r, result);
  }
  auto queued = co_await service.acquire_queued(key, r.owner, r.ttl, milliseconds(wait_ms), client, quota,
                                                r.value, r.lock_delay, permits);
  // No answer: the client went away while it waited (its grant, if any, is already released).
  if (!queued) co_return error_answer(c, {503, "gone", "the client closed its connection"});
  co_return acquire_answer(c, key, r, queued->result, queued->queued);
}

asio::awaitable<response> router::renew_route(const request& req, answer_context c, std::string key,
                                              std::string client) {
  auto body = parse_renew(req.body(), options.ttl);
  if (auto* e = std::get_if<api_error>(&body)) co_return error_answer(c, *e);
  auto& r = std::get<renew_request>(body);
  auto result = co_await service.renew(key, r.owner, r.token, r.ttl, client);
  co_return renew_answer(c, key, r, result);
}

asio::awaitable<response> router::renew_batch_route(const request& req, answer_context c, std::string client,
                                                    std::shared_ptr<const auth::token_table> tokens) {
  auto body = parse_renew_batch(req.body(), options.ttl);
  if (auto* e = std::get_if<api_error>(&body)) co_return error_answer(c, *e);
  auto& batch = std::get<renew_batch_request>(body);
  // The keys are known only now: any key the token may not write refuses the whole batch.
  if (tokens) {
    auto d = auth::authorize_renew_batch(*tokens, req[http::field::authorization], batch);
    if (auto* e = std::get_if<api_error>(&d)) co_return refusal(req, c, *e);
  }
  auto results = co_await service.renew_batch(batch.leases, client);
  co_return make_response(c.mem, http::status::ok, c.version, c.keep_alive,
                          renew_batch_body(c.mem, batch, results));
}

asio::awaitable<response> router::release_route(const request& req, answer_context c, std::string key,
                                                std::string client) {
  auto body = parse_release(req.body());
  if (auto* e = std::get_if<api_error>(&body)) co_return error_answer(c, *e);
  auto& r = std::get<release_request>(body);
  auto result = co_await service.release(key, r.owner, r.token, client);
  co_return release_answer(c, result);
}

asio::awaitable<response> router::proclaim_route(const request& req, answer_context c, std::string key,
                                                 std::string client) {
  auto body = parse_proclaim(req.body());
  if (auto* e = std::get_if<api_error>(&body)) co_return error_answer(c, *e);
  auto& r = std::get<proclaim_request>(body);
  auto result = co_await service.proclaim(key, r.owner, r.token, r.value, client);
  co_return proclaim_answer(c, key, r, result);
}

asio::awaitable<response> router::record_write_route(const request& req, answer_context c, std::string key,
                                                     std::string client) {
  auto body = parse_record_write(req.body());
  if (auto* e = std::get_if<api_error>(&body)) co_return error_answer(c, *e);
  auto& r = std::get<record_write_request>(body);
  auto result = co_await service.write_record(key, r.owner, r.token, r.value, client);
  co_return record_write_answer(c, key, result);
}

asio::awaitable<response> router::record_read_route(answer_context c, std::string key) {
  auto record = co_await service.read_record(key);
  co_return record_read_answer(c, key, record);
}

asio::awaitable<response> router::get_route(answer_context c, lock_target t) {
  std::optional<lease_view> view;
  if (t.wait_ms) {
    view = co_await service.wait(t.key, t.token.value_or(0), milliseconds(*t.wait_ms), t.value);
  } else {
    view = co_await service.get(t.key);
  }
  co_return get_answer(c, t.key, view);
}

asio::awaitable<response> router::list_route(answer_context c, lock_target t) {
  // Named, not temporaries in the co_await expression: GCC 12 destroys those twice (docs/design.md).
  const std::string after = t.after.value_or(std::string());
  const std::size_t limit = t.limit.value_or(default_list_limit);
  auto page = co_await service.list(t.key, after, limit);
  co_return list_answer(c, page);
}

asio::awaitable<response> router::break_route(const request& req, answer_context c, std::string key,
                                              std::string client) {
  auto body = parse_break(req.body());
  if (auto* e = std::get_if<api_error>(&body)) co_return error_answer(c, *e);
  const std::optional<std::uint64_t> token = std::get<break_request>(body).token;
  auto result = co_await service.break_lease(key, token, client);
  co_return break_answer(c, key, result);
}

// What stops a web page from driving batond through a browser (docs/security.md): no browser client is
// expected, so a request that carries an Origin is refused; a cross-site POST that needs no preflight
// cannot have a JSON content type; and on a loopback listener a Host that is not a loopback name is a
// page whose DNS name was rebound to 127.0.0.1. A request without Host is not from a browser.
std::optional<api_error> router::browser_check(const request& req) const {
  if (req.count(http::field::origin) != 0)
    return api_error{403, "cross_origin_refused",
                     "requests with an Origin header (from a web page) are refused: batond has no browser "
                     "clients"};
  if (loopback_listener && req.count(http::field::host) != 0 && !is_loopback_host(req[http::field::host]))
    return api_error{421, "misdirected_request",
                     "this server listens on loopback and answers only Host: localhost, 127.x.x.x or "
                     "[::1], got \"" +
                         std::string(req[http::field::host]) + "\""};
  if ((req.method() == http::verb::post || req.method() == http::verb::put) &&
      !is_json_content_type(req[http::field::content_type]))
    return api_error{
        415, "unsupported_media_type",
        "a " + std::string(req.method_string()) + " body must be sent as Content-Type: application/json"};
  return std::nullopt;
}

std::string router::rate_text() const {
  char text[32];
  std::snprintf(text, sizeof text, "%g", options.limits.rate_per_second);
  return text;
}

route router::route_of(const lock_target& t) {
  switch (t.what) {
    case lock_target::kind::acquire:
      return route::acquire;
    case lock_target::kind::renew:
      return route::renew;
    case lock_target::kind::release:
      return route::release;
    case lock_target::kind::get:
      return t.wait_ms ? route::wait : route::get;
    case lock_target::kind::healthz:
      return route::healthz;
    case lock_target::kind::metrics:
      return route::metrics;
    case lock_target::kind::capabilities:
      return route::other;  // rare, and read once per client: no series of its own
    case lock_target::kind::renew_batch:
      return route::renew_batch;
    case lock_target::kind::proclaim:
      return route::proclaim;
    case lock_target::kind::record_read:
      return route::record_read;
    case lock_target::kind::record_write:
      return route::record_write;
    case lock_target::kind::list:
      return route::list;
    case lock_target::kind::break_lease:
      return route::break_lease;
  }
  return route::other;
}

}  // namespace baton::server
