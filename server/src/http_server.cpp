// SPDX-License-Identifier: Apache-2.0
#include "http_server.hpp"

#include "baton/common/log.hpp"
#include "baton/common/sd_notify.hpp"
#include "baton/common/tls_files.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/detect_ssl.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>

#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <concepts>
#include <cstddef>
#include <cstdio>
#include <functional>
#include <list>
#include <memory_resource>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

namespace baton::server {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

// A request's header, body and answer live in its connection's request_arena (below), so a request served
// from memory costs no heap allocation for them.
template <class T>
struct arena_allocator;
using fields = http::basic_fields<arena_allocator<char>>;
using body = http::basic_string_body<char, std::char_traits<char>, arena_allocator<char>>;
using request = http::request<body, fields>;
using response = http::response<body, fields>;
using request_parser = http::request_parser<body, arena_allocator<char>>;
using text = body::value_type;

// An allocator over a memory resource, as std::pmr::polymorphic_allocator but assignable (Beast's fields
// need that). Every message of a connection uses its one arena, so moving a message moves its memory.
template <class T>
struct arena_allocator {
  using value_type = T;
  using propagate_on_container_copy_assignment = std::true_type;
  using propagate_on_container_move_assignment = std::true_type;
  using propagate_on_container_swap = std::true_type;

  std::pmr::memory_resource* resource = std::pmr::new_delete_resource();

  arena_allocator() noexcept = default;  // the heap: for a message made before its request has an arena
  arena_allocator(std::pmr::memory_resource* r) noexcept : resource(r) {}  // NOLINT: implicit, as pmr's
  template <class U>
  arena_allocator(const arena_allocator<U>& other) noexcept : resource(other.resource) {}
  T* allocate(std::size_t n) { return static_cast<T*>(resource->allocate(n * sizeof(T), alignof(T))); }
  void deallocate(T* p, std::size_t n) noexcept { resource->deallocate(p, n * sizeof(T), alignof(T)); }
  template <class U>
  bool operator==(const arena_allocator<U>& other) const noexcept {
    return resource == other.resource;
  }
};

namespace {

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

// Memory for one request at a time on a connection: a bump allocator over a buffer the connection keeps,
// emptied before each request. The common request (a few header fields, a body under a hundred bytes, an
// answer of four fields) fits; what does not fit is taken from the heap and freed as before, so a large or
// stalled request holds what it did without the arena (docs/security.md, "Memory per connection"), plus
// the buffer.
class request_arena final : public std::pmr::memory_resource {
 public:
  // Empties the arena. Only once nothing allocated from it for the last request is alive.
  void reset() { used_ = 0; }

 private:
  static constexpr std::size_t size = 2048;
  alignas(std::max_align_t) std::byte memory_[size];
  std::size_t used_ = 0;

  void* do_allocate(std::size_t n, std::size_t align) override {
    const std::size_t start = (used_ + align - 1) & ~(align - 1);
    if (align <= alignof(std::max_align_t) && start <= size && n <= size - start) {
      used_ = start + n;
      return memory_ + start;
    }
    if (align <= __STDCPP_DEFAULT_NEW_ALIGNMENT__) return ::operator new(n);
    return ::operator new(n, std::align_val_t(align));
  }
  void do_deallocate(void* p, std::size_t n, std::size_t align) override {
    auto* b = static_cast<std::byte*>(p);
    if (b >= memory_ && b < memory_ + size) return;  // reclaimed by reset()
    // The unsized forms: clang before 16 does not declare the sized ones unless -fsized-deallocation.
    (void)n;
    if (align <= __STDCPP_DEFAULT_NEW_ALIGNMENT__)
      ::operator delete(p);
    else
      ::operator delete(p, std::align_val_t(align));
  }
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override { return this == &other; }
};

// `mem`: the request's arena, or std::pmr::new_delete_resource() for an answer outside a request's life (a
// refused connection).
response make_response(std::pmr::memory_resource* mem, http::status status, unsigned version, bool keep_alive,
                       text&& body, std::string_view content_type = "application/json") {
  response res{std::piecewise_construct, std::make_tuple(std::move(body)), std::make_tuple(mem)};
  res.result(status);
  res.version(version);
  res.set(http::field::server, "batond");
  res.set(http::field::content_type, content_type);
  res.keep_alive(keep_alive);
  res.prepare_payload();
  return res;
}
response make_response(std::pmr::memory_resource* mem, http::status status, unsigned version, bool keep_alive,
                       std::string_view body, std::string_view content_type = "application/json") {
  return make_response(mem, status, version, keep_alive, text(body, mem), content_type);
}
response make_response(std::pmr::memory_resource* mem, http::status status, unsigned version, bool keep_alive,
                       const char* body, std::string_view content_type = "application/json") {
  return make_response(mem, status, version, keep_alive, std::string_view(body), content_type);
}

// The answers are written as text rather than through a JSON DOM: members in the order a json::object
// built in that order serializes them, strings escaped as its serializer escapes them (append_json_string),
// so the bytes are the same without a value, a table and a copy per answer. `out` holds one object's text
// from its `{`: a member right after the brace takes no comma.
void append_member(text& out, std::string_view name, std::string_view value) {
  out += out.size() > 1 ? ",\"" : "\"";
  out += name;
  out += "\":";
  append_json_string(out, value);
}
template <std::integral Int>
void append_member(text& out, std::string_view name, Int value) {
  out += out.size() > 1 ? ",\"" : "\"";
  out += name;
  out += "\":";
  char digits[24];  // 20 digits and a sign at most
  out.append(digits, std::to_chars(digits, digits + sizeof digits, value).ptr);
}

text lease_body(std::pmr::memory_resource* mem, std::string_view key, std::string_view owner,
                std::uint64_t token, std::string_view ttl_name, std::int64_t ttl,
                std::string_view client = {}, std::optional<std::string_view> value = std::nullopt) {
  text out(mem);
  out.reserve(80 + key.size() + owner.size() + client.size() + (value ? value->size() : 0));
  out += '{';
  append_member(out, "key", key);
  append_member(out, "owner", owner);
  if (!client.empty()) append_member(out, "client", client);
  append_member(out, "token", token);
  append_member(out, ttl_name, ttl);
  // Answers that describe a holder always carry its value, "" included: a client can tell a server that
  // keeps values from one that predates them (docs/protocol.md).
  if (value) append_member(out, "value", *value);
  out += '}';
  return out;
}

// The members of a renew's 409 `lost`, and of a refused entry of a batch (which has the key before them).
void append_lost(text& out, lost_reason reason) {
  append_member(out, "error", "lost");
  append_member(out, "reason", to_string(reason));
  switch (reason) {
    case lost_reason::not_held:
      append_member(out, "message", "the lock is not held (it is free, or its lease expired)");
      break;
    case lost_reason::owner_mismatch:
      append_member(out, "message", "the lock is held by another owner");
      break;
    case lost_reason::token_mismatch:
      // Another token than the holder's, older or never issued: only the holder's own token renews.
      append_member(out, "message", "the lock is held by this owner with another token");
      break;
  }
}

text error_text(std::pmr::memory_resource* mem, std::string_view code, std::string_view message) {
  text out(mem);
  out.reserve(24 + code.size() + message.size());
  out += '{';
  append_member(out, "error", code);
  append_member(out, "message", message);
  out += '}';
  return out;
}

// {"results":[...]} in the batch's order: each a single renew's 200 body, or its 409 body with the key.
text renew_batch_body(std::pmr::memory_resource* mem, const renew_batch_request& batch,
                      const std::vector<renew_result>& results) {
  text out(mem);
  out.reserve(16 + results.size() * 96);
  out += R"({"results":[)";
  text entry(mem);
  for (std::size_t i = 0; i < results.size(); ++i) {
    const auto& e = batch.leases[i];
    entry.assign("{");
    append_member(entry, "key", e.key);
    if (std::holds_alternative<renew_ok>(results[i])) {
      append_member(entry, "owner", e.owner);
      append_member(entry, "token", e.token);
      append_member(entry, "ttl_ms", e.ttl.count());
    } else {
      append_lost(entry, std::get<renew_refused>(results[i]).reason);
    }
    entry += '}';
    if (i != 0) out += ',';
    out += entry;
  }
  out += "]}";
  return out;
}

// Only a lone `chunked` transfer coding, and no Content-Length beside it. Anything else is where a front
// proxy and batond could disagree on where a request ends (request smuggling): Beast takes `chunked,
// identity` for a request without a body, so its body would be read as a second request. Such a request is
// refused and its connection closed, since what follows it on the connection cannot be trusted.
std::optional<api_error> check_framing(const request& req) {
  auto codings = req.equal_range(http::field::transfer_encoding);
  if (codings.first == codings.second) return std::nullopt;
  if (std::next(codings.first) != codings.second)
    return api_error{400, "bad_request", "more than one Transfer-Encoding header"};
  std::string_view te = codings.first->value();
  while (!te.empty() && (te.front() == ' ' || te.front() == '\t'))
    te.remove_prefix(1);
  while (!te.empty() && (te.back() == ' ' || te.back() == '\t'))
    te.remove_suffix(1);
  if (!beast::iequals(te, "chunked"))
    return api_error{
        400, "bad_request",
        "Transfer-Encoding must be \"chunked\" alone, got \"" + std::string(codings.first->value()) + "\""};
  if (req.count(http::field::content_length) != 0)
    return api_error{400, "bad_request", "Content-Length together with Transfer-Encoding"};
  return std::nullopt;
}

}  // namespace

struct http_server::impl {
  struct worker {
    asio::io_context ioc{1};
    std::list<beast::tcp_stream*> idle;  // connections waiting for their next request (this thread only)
  };

  http_options options;
  lock_service& service;
  server_metrics& metrics;
  std::vector<std::unique_ptr<worker>> workers;
  tcp::acceptor acceptor;
  std::atomic<bool> draining{false};
  std::atomic<bool> drain_started{false};
  std::atomic<std::int64_t> open_connections{0};
  // Request rate per authenticated client name, and per address for requests without a valid token (all
  // requests when there are no tokens).
  rate_limiter client_rate{options.limits.rate_per_second, options.limits.rate_burst};
  rate_limiter address_rate{options.limits.rate_per_second, options.limits.rate_burst};
  // Connections past max_connections being answered 503; past this many more they are closed unanswered, so
  // a connection flood costs a bounded amount of work.
  static constexpr std::int64_t max_refusing = 64;
  std::atomic<std::int64_t> refusing{0};
  const bool loopback_listener = options.listen.address().is_loopback();
  std::mutex per_address_mu;
  std::unordered_map<std::string, std::size_t> per_address;

  impl(http_options o, lock_service& s, server_metrics& m)
      : options(std::move(o)),
        service(s),
        metrics(m),
        workers(make_workers(options.threads)),
        acceptor(workers[0]->ioc) {
    service.set_waiter_limits(options.limits.max_waiters_per_key, options.limits.max_waiters);
    service.set_lock_limit(options.limits.max_locks);
  }

  static std::vector<std::unique_ptr<worker>> make_workers(unsigned n) {
    std::vector<std::unique_ptr<worker>> w;
    for (unsigned i = 0; i < std::max(1u, n); ++i)
      w.push_back(std::make_unique<worker>());
    return w;
  }

  // What every answer to one request is built with; its memory comes from `mem`, the request's arena.
  struct answer_context {
    unsigned version;
    bool keep_alive;
    std::pmr::memory_resource* mem;
  };

  static response error_answer(const answer_context& c, const api_error& e) {
    return make_response(c.mem, static_cast<http::status>(e.status), c.version, c.keep_alive,
                         error_text(c.mem, e.code, e.message));
  }

  static response refusal(const request& req, const answer_context& c, const api_error& e) {
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
  static asio::awaitable<response> answered(response res) { co_return res; }

  // Answers `req`. The checks before its route and the routes that never wait run here as plain code;
  // only a route that waits (for the log or for a lock) is a coroutine, each with a frame of its own.
  // One coroutine holding every route's locals had a frame above the size Asio recycles, so it cost a
  // heap allocation per request.
  asio::awaitable<response> handle(const request& req, route& counted_as, const std::string& peer_address,
                                   clock::time_point started, std::string& authenticated_as,
                                   std::pmr::memory_resource* mem) {
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
    if (req.method_string() != method_for(*kind)) {
      auto res =
          error_answer(c, {405, "method_not_allowed",
                           "use " + std::string(method_for(*kind)) + " for " + std::string(req.target())});
      res.set(http::field::allow, method_for(*kind));
      return answered(std::move(res));
    }
    if (auto* e = std::get_if<api_error>(&parsed)) return answered(error_answer(c, *e));
    auto& t = std::get<lock_target>(parsed);
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
                                      capabilities_body(options.limits.max_body_bytes)));
      case lock_target::kind::acquire:
        return acquire_route(req, c, std::move(t.key), std::move(client));
      case lock_target::kind::renew:
        return renew_route(req, c, std::move(t.key), std::move(client));
      case lock_target::kind::renew_batch:
        return renew_batch_route(req, c, std::move(client), std::move(tokens));
      case lock_target::kind::release:
        return release_route(req, c, std::move(t.key), std::move(client));
      case lock_target::kind::get:
        return get_route(c, std::move(t));
    }
    return answered(error_answer(c, {500, "internal", "unhandled route"}));
  }

  // The routes that wait. Each one parses its body, waits for the service and builds its answer in plain
  // functions, so that its frame holds little more than what lives across the wait.
  asio::awaitable<response> acquire_route(const request& req, answer_context c, std::string key,
                                          std::string client) {
    auto body = parse_acquire(req.body(), options.ttl);
    if (auto* e = std::get_if<api_error>(&body)) co_return error_answer(c, *e);
    auto& r = std::get<acquire_request>(body);
    std::optional<std::size_t> quota;
    if (options.tokens && !client.empty()) quota = auth::lock_quota(*options.tokens->current(), client);
    auto result = co_await service.acquire(key, r.owner, r.ttl, client, quota, r.value);
    co_return acquire_answer(c, key, r, result);
  }

  static response acquire_answer(const answer_context& c, const std::string& key, const acquire_request& r,
                                 const acquire_result& result) {
    if (auto* g = std::get_if<acquire_granted>(&result)) {
      // The fields are strings: built only when the line is written.
      if (log::enabled(log::level::debug))
        log::debug("acquire", {{"key", key}, {"owner", r.owner}, {"token", g->token}});
      return make_response(c.mem, http::status::ok, c.version, c.keep_alive,
                           lease_body(c.mem, key, r.owner, g->token, "ttl_ms", r.ttl.count()));
    }
    const auto& h = std::get<acquire_refused>(result).holder;
    text o(c.mem);
    o += '{';
    append_member(o, "error", "held");
    append_member(o, "message", "the lock is held by another owner");
    append_member(o, "owner", h.owner);
    if (!h.client.empty()) append_member(o, "client", h.client);
    append_member(o, "token", h.token);
    append_member(o, "ttl_remaining_ms", h.remaining.count());
    append_member(o, "value", h.value);
    o += '}';
    return make_response(c.mem, http::status::conflict, c.version, c.keep_alive, std::move(o));
  }

  asio::awaitable<response> renew_route(const request& req, answer_context c, std::string key,
                                        std::string client) {
    auto body = parse_renew(req.body(), options.ttl);
    if (auto* e = std::get_if<api_error>(&body)) co_return error_answer(c, *e);
    auto& r = std::get<renew_request>(body);
    auto result = co_await service.renew(key, r.owner, r.token, r.ttl, client);
    co_return renew_answer(c, key, r, result);
  }

  static response renew_answer(const answer_context& c, const std::string& key, const renew_request& r,
                               const renew_result& result) {
    if (std::holds_alternative<renew_ok>(result))
      return make_response(c.mem, http::status::ok, c.version, c.keep_alive,
                           lease_body(c.mem, key, r.owner, r.token, "ttl_ms", r.ttl.count()));
    text o(c.mem);
    o += '{';
    append_lost(o, std::get<renew_refused>(result).reason);
    o += '}';
    return make_response(c.mem, http::status::conflict, c.version, c.keep_alive, std::move(o));
  }

  asio::awaitable<response> renew_batch_route(const request& req, answer_context c, std::string client,
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

  asio::awaitable<response> release_route(const request& req, answer_context c, std::string key,
                                          std::string client) {
    auto body = parse_release(req.body());
    if (auto* e = std::get_if<api_error>(&body)) co_return error_answer(c, *e);
    auto& r = std::get<release_request>(body);
    auto result = co_await service.release(key, r.owner, r.token, client);
    co_return release_answer(c, result);
  }

  static response release_answer(const answer_context& c, const release_result& result) {
    if (result.outcome == release_outcome::not_owner)
      return error_answer(c,
                          {409, "not_owner", "the lock is held by another owner or token; nothing changed"});
    return make_response(c.mem, http::status::ok, c.version, c.keep_alive,
                         result.outcome == release_outcome::released
                             ? R"({"released":true,"outcome":"released"})"
                             : R"({"released":true,"outcome":"already_free"})");
  }

  asio::awaitable<response> get_route(answer_context c, lock_target t) {
    std::optional<lease_view> view;
    if (t.wait_ms) {
      view = co_await service.wait(t.key, t.token.value_or(0), milliseconds(*t.wait_ms));
    } else {
      view = co_await service.get(t.key);
    }
    co_return get_answer(c, t.key, view);
  }

  static response get_answer(const answer_context& c, const std::string& key,
                             const std::optional<lease_view>& view) {
    if (!view) return error_answer(c, {404, "not_held", "the lock is not held"});
    return make_response(c.mem, http::status::ok, c.version, c.keep_alive,
                         lease_body(c.mem, key, view->owner, view->token, "ttl_remaining_ms",
                                    view->remaining.count(), view->client, view->value));
  }

  // What stops a web page from driving batond through a browser (docs/security.md): no browser client is
  // expected, so a request that carries an Origin is refused; a cross-site POST that needs no preflight
  // cannot have a JSON content type; and on a loopback listener a Host that is not a loopback name is a
  // page whose DNS name was rebound to 127.0.0.1. A request without Host is not from a browser.
  std::optional<api_error> browser_check(const request& req) const {
    if (req.count(http::field::origin) != 0)
      return api_error{403, "cross_origin_refused",
                       "requests with an Origin header (from a web page) are refused: batond has no browser "
                       "clients"};
    if (loopback_listener && req.count(http::field::host) != 0 && !is_loopback_host(req[http::field::host]))
      return api_error{421, "misdirected_request",
                       "this server listens on loopback and answers only Host: localhost, 127.x.x.x or "
                       "[::1], got \"" +
                           std::string(req[http::field::host]) + "\""};
    if (req.method() == http::verb::post && !is_json_content_type(req[http::field::content_type]))
      return api_error{415, "unsupported_media_type",
                       "a POST body must be sent as Content-Type: application/json"};
    return std::nullopt;
  }

  std::string rate_text() const {
    char text[32];
    std::snprintf(text, sizeof text, "%g", options.limits.rate_per_second);
    return text;
  }

  static route route_of(const lock_target& t) {
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
    }
    return route::other;
  }

  // How long a connection may wait for a request before it has made an authenticated one.
  std::chrono::milliseconds first_request_timeout() const {
    return options.tokens ? std::min(options.read_timeout, options.limits.unauthenticated_timeout)
                          : options.read_timeout;
  }

  // Open connections per remote address, counted from accept to close (the accept loop and every worker).
  bool take_address(const std::string& address) {
    std::lock_guard lk(per_address_mu);
    auto& n = per_address[address];
    if (n >= options.limits.max_connections_per_address) return false;
    ++n;
    return true;
  }
  void release_address(const std::string& address) {
    std::lock_guard lk(per_address_mu);
    auto it = per_address.find(address);
    if (it != per_address.end() && --it->second == 0) per_address.erase(it);
  }

  // A long-poll's client may close while it waits; without noticing, its connection would stay open (in
  // CLOSE-WAIT) until wait_ms. The socket is watched for readability without reading from it (which would
  // take bytes from the HTTP or TLS stream): end of stream or an error cancels the wait. Pending bytes mean
  // the client is still there (a pipelined request, a TLS record) and end the watch.
  struct peer_watch {
    asio::cancellation_signal signal;
    bool done = false;  // the request was answered; the watch's completion must touch nothing
    bool gone = false;
  };
  static std::shared_ptr<peer_watch> watch_peer(tcp::socket& socket) {
    auto watch = std::make_shared<peer_watch>();
    const int fd = socket.native_handle();
    socket.async_wait(tcp::socket::wait_read, [watch, fd](const boost::system::error_code& ec) {
      if (watch->done || ec == asio::error::operation_aborted) return;
      if (!ec) {
        char byte;
        ssize_t n = ::recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
        if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))) return;
      }
      watch->gone = true;
      watch->signal.emit(asio::cancellation_type::terminal);
    });
    return watch;
  }

  static std::string peer_of(const tcp::socket& socket) {
    beast::error_code ec;
    auto ep = socket.remote_endpoint(ec);
    if (ec) return "unknown";
    auto a = ep.address().to_string();
    return (ep.address().is_v6() ? "[" + a + "]" : a) + ":" + std::to_string(ep.port());
  }

  // Answers a connection past the limit with 503 without reading its request, then waits (briefly) for the
  // client to finish sending and close, so the answer is not lost to a reset.
  asio::awaitable<void> refuse_connection(tcp::socket socket, std::string code, std::string message) {
    struct counted {
      impl& self;
      ~counted() { self.refusing.fetch_sub(1); }
    } guard{*this};
    auto* mem = std::pmr::new_delete_resource();
    beast::tcp_stream stream(std::move(socket));
    auto res =
        make_response(mem, http::status::service_unavailable, 11, false, error_text(mem, code, message));
    res.set(http::field::retry_after, "1");
    metrics.count_request(route::other, 503);
    stream.expires_after(std::chrono::seconds(1));
    auto [wec, wn] = co_await http::async_write(stream, res, use_tuple);
    if (wec) co_return;
    beast::error_code ignored;
    stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
    std::array<char, 4096> sink;
    for (;;) {
      auto [rec, rn] = co_await stream.async_read_some(asio::buffer(sink), use_tuple);
      if (rec) break;
    }
  }

  asio::awaitable<void> session(tcp::socket socket, worker& w, std::string client) {
    beast::tcp_stream stream(std::move(socket));
    // Bounded by what one request may hold: Beast otherwise reads up to 64 KiB at a time into it, which a
    // stalled client would keep allocated (docs/security.md, "Memory per connection").
    beast::flat_buffer buffer(options.limits.max_header_bytes + options.limits.max_body_bytes);
    metrics.connections.fetch_add(1, std::memory_order_relaxed);
    struct closer {
      impl& self;
      const std::string& address;
      ~closer() {
        self.release_address(address);
        self.open_connections.fetch_sub(1);
        self.metrics.connections.fetch_sub(1, std::memory_order_relaxed);
      }
    } close_guard{*this, client};

    if (!options.tls) {
      co_await serve(stream, buffer, w, client);
      beast::error_code ignored;
      stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
      co_return;
    }
    co_await serve_tls(std::move(stream), buffer, w, client);
  }

  asio::awaitable<void> serve_tls(beast::tcp_stream stream, beast::flat_buffer& buffer, worker& w,
                                  const std::string& client) {
    // The first bytes tell a TLS ClientHello from a plain HTTP request, so a client with an http:// URL gets
    // an answer it can show instead of a reset connection. Both waits count as idle: drain closes them.
    stream.expires_after(first_request_timeout());
    auto pos = w.idle.insert(w.idle.end(), &stream);
    auto [dec, is_tls] = co_await beast::async_detect_ssl(stream, buffer, use_tuple);
    w.idle.erase(pos);
    if (dec) co_return;
    if (!is_tls) {
      co_await refuse_plain_http(stream, buffer);
      co_return;
    }
    const std::string peer = peer_of(stream.socket());
    beast::ssl_stream<beast::tcp_stream> secure(std::move(stream), *options.tls);
    auto& lowest = beast::get_lowest_layer(secure);
    // A client that stalls the handshake is dropped like an idle one.
    lowest.expires_after(first_request_timeout());
    pos = w.idle.insert(w.idle.end(), &lowest);
    auto [hec, used] =
        co_await secure.async_handshake(asio::ssl::stream_base::server, buffer.data(), use_tuple);
    w.idle.erase(pos);
    if (hec) {
      const std::string verify = tls::verify_failure(secure.native_handle());
      log::warn(
          "tls_handshake_failed",
          {{"peer", peer}, {"error", hec.message()}, {"client_certificate", verify.empty() ? "-" : verify}});
      // The alert is on its way; read what the client still sends for a moment so closing does not reset
      // the connection before the client has read why (a TLS 1.3 client learns of a refused certificate
      // only on its first read).
      beast::error_code ignored;
      lowest.socket().shutdown(tcp::socket::shutdown_send, ignored);
      lowest.expires_after(
          std::min<std::chrono::milliseconds>(options.read_timeout, std::chrono::seconds(1)));
      char scratch[512];
      for (;;) {
        auto [rec, rn] = co_await lowest.async_read_some(asio::buffer(scratch), use_tuple);
        if (rec) break;
      }
      co_return;
    }
    buffer.consume(used);
    co_await serve(secure, buffer, w, client);
    // close_notify, so the client can tell the end of the connection from a truncation; bounded, since a
    // client that never answers it must not hold the connection.
    lowest.expires_after(std::min<std::chrono::milliseconds>(options.read_timeout, std::chrono::seconds(1)));
    co_await secure.async_shutdown(use_tuple);
  }

  // A plain HTTP request on a TLS port: one 400 answer that says so, then close.
  asio::awaitable<void> refuse_plain_http(beast::tcp_stream& stream, beast::flat_buffer& buffer) {
    http::request_parser<http::string_body> parser;
    parser.body_limit(options.limits.max_body_bytes);
    parser.header_limit(static_cast<std::uint32_t>(options.limits.max_header_bytes));
    auto [ec, n] = co_await http::async_read(stream, buffer, parser, use_tuple);
    if (ec) co_return;
    metrics.count_request(route::other, 400);
    auto* mem = std::pmr::new_delete_resource();
    auto res = make_response(
        mem, http::status::bad_request, parser.get().version(), false,
        error_text(mem, "tls_required", "this server accepts only TLS connections: use https://"));
    co_await http::async_write(stream, res, use_tuple);
    beast::error_code ignored;
    stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
  }

  // Requests on one connection until it closes, fails, times out or the server drains. `Stream` is the TCP
  // stream or the TLS stream over it. `client` is the peer's address, the key of its request rate.
  template <class Stream>
  asio::awaitable<void> serve(Stream& stream, beast::flat_buffer& buffer, worker& w,
                              const std::string& client) {
    auto& lowest = beast::get_lowest_layer(stream);
    bool authenticated = false;  // this connection has made a request with a valid token
    // This connection's entry in w.idle, moved in while it waits for a request and out while it serves
    // one: splicing allocates nothing.
    std::list<beast::tcp_stream*> mine{&lowest};
    const auto pos = mine.begin();
    auto arena = std::make_unique<request_arena>();
    std::pmr::memory_resource* const mem = arena.get();
    for (;;) {
      if (draining.load()) break;
      // Nothing of the last request is alive: its parser and answer ended with the last iteration.
      arena->reset();
      request_parser parser{std::piecewise_construct, std::make_tuple(mem), std::make_tuple(mem)};
      parser.body_limit(options.limits.max_body_bytes);
      parser.header_limit(static_cast<std::uint32_t>(options.limits.max_header_bytes));
      lowest.expires_after(authenticated ? options.read_timeout : first_request_timeout());
      w.idle.splice(w.idle.end(), mine, pos);
      // The header first: its framing is checked before a byte of the body is read as anything.
      auto [ec, n] = co_await http::async_read_header(stream, buffer, parser, use_tuple);
      std::optional<api_error> framing;
      if (!ec) {
        framing = check_framing(parser.get());
        // A client that sent `Expect: 100-continue` (curl does for larger bodies) waits for this before it
        // sends the body, about a second in curl's case. Sent only while a body is still to come.
        if (!framing && !parser.is_done() && parser.get().version() >= 11 &&
            beast::iequals(parser.get()[http::field::expect], "100-continue")) {
          http::response<http::empty_body> go_on{http::status::continue_, 11};
          std::tie(ec, n) = co_await http::async_write(stream, go_on, use_tuple);
        }
        if (!framing && !ec) std::tie(ec, n) = co_await http::async_read(stream, buffer, parser, use_tuple);
      }
      mine.splice(mine.end(), w.idle, pos);
      if (ec || framing) {
        std::optional<api_error> answer = framing;
        if (framing) {
          // answered below
        } else if (ec == http::error::body_limit) {
          answer =
              api_error{413, "body_too_large",
                        "request body exceeds " + std::to_string(options.limits.max_body_bytes) + " bytes"};
        } else if (ec == http::error::header_limit) {
          answer = api_error{
              431, "header_too_large",
              "request header exceeds " + std::to_string(options.limits.max_header_bytes) + " bytes"};
        } else if (ec.category() == http::make_error_code(http::error::end_of_stream).category() &&
                   ec != http::error::end_of_stream && ec != http::error::partial_message) {
          answer = api_error{400, "bad_request", "malformed HTTP request: " + ec.message()};
        }
        if (answer) {
          metrics.count_request(route::other, answer->status);
          auto res = make_response(mem, static_cast<http::status>(answer->status), 11, false,
                                   error_text(mem, answer->code, answer->message));
          lowest.expires_after(options.read_timeout);
          co_await http::async_write(stream, res, use_tuple);
        }
        break;  // end of stream, timeout, reset or an error already answered: close
      }

      request& req = parser.get();
      auto started = clock::now();
      lowest.expires_never();  // a long-poll may legitimately take up to a minute
      response res{std::piecewise_construct, std::make_tuple(mem), std::make_tuple(mem)};
      route r = route::other;
      std::string name;  // the authenticated client, empty without a valid token
      const bool long_poll =
          req.method() == http::verb::get && req.target().find("wait_ms=") != std::string_view::npos;
      auto watch = long_poll ? watch_peer(lowest.socket()) : nullptr;
      try {
        if (watch) {
          res = co_await asio::co_spawn(
              co_await asio::this_coro::executor, handle(req, r, client, started, name, mem),
              asio::bind_cancellation_slot(watch->signal.slot(), asio::use_awaitable));
        } else {
          res = co_await handle(req, r, client, started, name, mem);
        }
      } catch (const waiters_exhausted& e) {
        res = make_response(mem, http::status::service_unavailable, req.version(), req.keep_alive(),
                            error_text(mem, "too_many_waiters", std::string(e.what()) + "; retry later"));
        res.set(http::field::retry_after, "1");
      } catch (const locks_exhausted& e) {
        res = make_response(
            mem, e.server_wide ? http::status::service_unavailable : http::status::too_many_requests,
            req.version(), req.keep_alive(),
            error_text(mem, e.server_wide ? "too_many_locks" : "lock_quota_exceeded",
                       std::string(e.what()) + "; release a lock or retry later"));
        res.set(http::field::retry_after, "1");
      } catch (const storage_unavailable& e) {
        res = make_response(mem, http::status::service_unavailable, req.version(), false,
                            error_text(mem, "storage_unavailable", e.what()));
        res.set(http::field::retry_after, "1");
      } catch (const std::exception& e) {
        log::error("request_failed", {{"target", std::string(req.target())}, {"error", e.what()}});
        res = make_response(mem, http::status::internal_server_error, req.version(), false,
                            error_text(mem, "internal", e.what()));
      }
      if (watch) {
        watch->done = true;
        beast::error_code ignored;
        lowest.socket().cancel(ignored);
        if (watch->gone) break;  // nobody to answer; closing frees the slot now, not at wait_ms
      }
      if (!name.empty()) authenticated = true;
      // A refusal for who the client is or how much it sends ends the connection, so a client cannot hold a
      // slot with refused requests; with tokens, so does any answer to a request without a valid one.
      const auto status = res.result_int();
      if (status == 401 || status == 403 || status == 429 || (options.tokens && name.empty()))
        res.keep_alive(false);
      metrics.count_request(r, static_cast<int>(res.result_int()));
      if (r != route::wait)
        metrics.request_seconds.observe(std::chrono::duration<double>(clock::now() - started).count());
      if (draining.load()) res.keep_alive(false);
      lowest.expires_after(options.read_timeout);
      // The answer to a HEAD (always 405) is its header alone: a client reads no body after a HEAD, so body
      // bytes would be taken for the start of the next answer on the connection.
      http::response_serializer<body, fields> serializer{res};
      auto [wec, wn] = req.method() == http::verb::head
                           ? co_await http::async_write_header(stream, serializer, use_tuple)
                           : co_await http::async_write(stream, serializer, use_tuple);
      if (wec || !res.keep_alive()) break;
    }
  }

  asio::awaitable<void> accept_loop() {
    std::size_t next = 0;
    for (;;) {
      worker& w = *workers[next];
      next = (next + 1) % workers.size();
      auto [ec, socket] = co_await acceptor.async_accept(w.ioc, use_tuple);
      if (ec) {
        if (!acceptor.is_open() || draining.load()) co_return;
        log::warn("accept_failed", {{"error", ec.message()}});
        // Out of descriptors or similar: back off briefly instead of spinning.
        asio::steady_timer t(acceptor.get_executor(), std::chrono::milliseconds(50));
        co_await t.async_wait(use_tuple);
        continue;
      }
      socket.set_option(tcp::no_delay(true), ec);
      std::string address = socket.remote_endpoint(ec).address().to_string();
      std::optional<std::pair<std::string, std::string>> refusal;
      if (open_connections.load() >= static_cast<std::int64_t>(options.limits.max_connections))
        refusal.emplace("too_many_connections", "the server has " +
                                                    std::to_string(options.limits.max_connections) +
                                                    " open connections, its limit; retry later");
      else if (!take_address(address))
        refusal.emplace("too_many_connections_from_address",
                        "this address has " + std::to_string(options.limits.max_connections_per_address) +
                            " open connections, the limit per address; retry later");
      if (refusal) {
        if (refusing.fetch_add(1) < max_refusing) {
          asio::co_spawn(w.ioc, refuse_connection(std::move(socket), refusal->first, refusal->second),
                         asio::detached);
        } else {
          refusing.fetch_sub(1);
          socket.close(ec);
        }
        continue;
      }
      // Counted here, not in the session, so a burst of accepts cannot overshoot the limit.
      open_connections.fetch_add(1);
      asio::co_spawn(w.ioc, session(std::move(socket), w, std::move(address)), asio::detached);
    }
  }

  asio::awaitable<void> sweep_loop() {
    asio::steady_timer t(workers[0]->ioc);
    while (!draining.load()) {
      t.expires_after(options.sweep_interval);
      co_await t.async_wait(use_tuple);
      std::size_t expired = 0;
      for (;;) {
        auto step = service.sweep_step();
        expired += step.expired;
        if (step.pass_done || draining.load()) break;
        // Let this thread's connections run between steps: a pass over a large table takes tens of ms.
        co_await asio::post(workers[0]->ioc, asio::use_awaitable);
      }
      if (expired) log::debug("expired", {{"count", expired}});
    }
  }

  // SIGHUP: new connections get the certificate, key and client CAs the files hold now; open connections,
  // leases and the lock table are not touched. A file that does not load leaves the old ones in use.
  void reload_tls() {
    auto r = reload_server_tls(*options.tls, std::chrono::system_clock::now());
    if (!r.ok()) {
      metrics.tls_reloads_failed.fetch_add(1, std::memory_order_relaxed);
      log::error(
          "tls_reload_failed",
          {{"error", r.error}, {"kept", "previous certificate"}, {"served_sha256", r.certificate.sha256}});
      return;
    }
    metrics.tls_reloads_ok.fetch_add(1, std::memory_order_relaxed);
    metrics.tls_certificate_not_after.store(r.certificate.not_after_seconds, std::memory_order_relaxed);
    log_certificate("tls_reloaded", r.certificate);
  }

  // Starts drain() once, whoever asks first (a signal, or a storage failure). Thread-safe.
  void begin_drain(std::chrono::milliseconds timeout) {
    if (drain_started.exchange(true)) return;
    sd_notify::notify("STOPPING=1");
    asio::co_spawn(workers[0]->ioc, drain(timeout), asio::detached);
  }

  asio::awaitable<void> drain(std::chrono::milliseconds timeout) {
    draining.store(true);
    beast::error_code ignored;
    acceptor.close(ignored);
    service.wake_all();
    // Idle keep-alive connections have nothing in flight: close them on their own threads.
    for (auto& w : workers)
      asio::post(w->ioc, [wp = w.get()] {
        for (auto* s : wp->idle)
          s->cancel();
      });
    asio::steady_timer t(workers[0]->ioc);
    auto give_up = clock::now() + timeout;
    while (open_connections.load() > 0 && clock::now() < give_up) {
      t.expires_after(std::chrono::milliseconds(10));
      co_await t.async_wait(use_tuple);
    }
    for (auto& w : workers)
      w->ioc.stop();
  }

  // systemd's watchdog (WatchdogSec): WATCHDOG=1 every half of `timeout`, and only when every worker ran the
  // probe posted to it at the previous ping. A worker whose loop is wedged (a handler that never returns, a
  // deadlock) then stops the pings, and systemd restarts batond within `timeout` instead of leaving it up
  // and unable to answer. Runs on worker 0, so a wedged worker 0 stops its own timer too.
  asio::awaitable<void> watchdog_loop(std::chrono::microseconds timeout) {
    const auto half = timeout / 2;
    const auto half_ms = std::chrono::duration_cast<std::chrono::milliseconds>(half).count();
    auto answered = std::make_shared<std::vector<std::atomic<bool>>>(workers.size());
    for (auto& a : *answered)
      a.store(true);
    asio::steady_timer t(workers[0]->ioc);
    while (!draining.load()) {
      if (std::all_of(answered->begin(), answered->end(), [](const auto& a) { return a.load(); })) {
        sd_notify::notify("WATCHDOG=1");
      } else {
        log::warn("watchdog_ping_withheld",
                  {{"reason", "a worker thread did not run the probe posted to it"}, {"within_ms", half_ms}});
      }
      for (std::size_t i = 0; i < workers.size(); ++i) {
        (*answered)[i].store(false);
        asio::post(workers[i]->ioc, [answered, i] { (*answered)[i].store(true); });
      }
      t.expires_after(half);
      co_await t.async_wait(use_tuple);
    }
  }
};

http_server::http_server(http_options options, lock_service& service, server_metrics& metrics)
    : impl_(std::make_unique<impl>(std::move(options), service, metrics)) {}

http_server::~http_server() = default;

tcp::endpoint http_server::bind() {
  auto& a = impl_->acceptor;
  a.open(impl_->options.listen.protocol());
  a.set_option(tcp::acceptor::reuse_address(true));
  a.bind(impl_->options.listen);
  a.listen(asio::socket_base::max_listen_connections);
  return a.local_endpoint();
}

void http_server::stop(std::chrono::milliseconds drain_timeout) {
  impl_->begin_drain(drain_timeout);
}

void http_server::run() {
  auto& m = *impl_;
  auto& main_ioc = m.workers[0]->ioc;
  asio::signal_set signals(main_ioc, SIGINT, SIGTERM);
  asio::signal_set hangup(main_ioc, SIGHUP);
  std::function<void()> await_hangup = [&] {
    hangup.async_wait([&](const boost::system::error_code& ec, int) {
      if (ec) return;
      if (!m.options.tokens && !m.options.tls)
        log::info("sighup_ignored", {{"reason", "no --tokens-file and no --tls-cert"}});
      if (m.options.tokens) {
        if (auto failed = m.options.tokens->reload())
          log::error("tokens_reload_failed", {{"error", *failed}, {"kept", "previous tokens"}});
        else
          log::info("tokens_reloaded", {{"file", m.options.tokens->path()},
                                        {"clients", m.options.tokens->current()->clients.size()}});
      }
      // Independent of the tokens: a bad tokens file does not keep a new certificate out, nor the reverse.
      if (m.options.tls) m.reload_tls();
      await_hangup();
    });
  };
  await_hangup();
  signals.async_wait([&m](const boost::system::error_code& ec, int sig) {
    if (ec) return;
    log::info("shutdown", {{"signal", sig}});
    m.begin_drain(m.options.drain_timeout);
  });
  asio::co_spawn(main_ioc, m.accept_loop(), asio::detached);
  asio::co_spawn(main_ioc, m.sweep_loop(), asio::detached);
  if (auto timeout = sd_notify::watchdog_timeout())
    asio::co_spawn(main_ioc, m.watchdog_loop(*timeout), asio::detached);

  // Keep every worker's run() alive until drain() stops it, even while it has no connection.
  std::vector<asio::executor_work_guard<asio::io_context::executor_type>> guards;
  for (auto& w : m.workers)
    guards.push_back(asio::make_work_guard(w->ioc));
  std::vector<std::thread> threads;
  for (std::size_t i = 1; i < m.workers.size(); ++i)
    threads.emplace_back([&m, i] { m.workers[i]->ioc.run(); });
  main_ioc.run();
  for (auto& t : threads)
    t.join();
}

}  // namespace baton::server
