// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: batond's request path without sockets. The bytes are one HTTP request, parsed by Beast
// with batond's default limits, then checked, routed and decoded as http_server does (protocol.cpp), and
// finally carried out on the lock table behind the service (lock_table.cpp), which already holds a lease
// on the request's key. Besides "no crash", it checks what the protocol promises: a decoded request is
// within docs/protocol.md's bounds, a key can be echoed back in JSON, every refusal is a JSON error with a
// 4xx status, and the table's answer is consistent with its state (a grant takes a larger token, only the
// holder with its token renews or releases, the counts behind --max-locks stay exact).

#include "fuzz_support.hpp"
#include "lock_table.hpp"
#include "protocol.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/string.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace http = boost::beast::http;
namespace json = boost::json;
using namespace baton::server;
using baton::fuzz::require;

namespace {

bool has_control_chars(std::string_view s) {
  for (unsigned char c : s)
    if (c < 0x20 || c == 0x7f) return true;
  return false;
}

void check_error(const api_error& e) {
  require(e.status >= 400 && e.status < 500, "a decoding error is a 4xx");
  boost::system::error_code ec;
  auto v = json::parse(error_body(e.code, e.message), ec);
  require(!ec && v.is_object() && v.as_object().contains("error"), "an error body is a JSON object");
}

void check_text(std::string_view s, std::size_t max, const char* what) {
  require(!s.empty() && s.size() <= max && !has_control_chars(s), what);
  // Echoed back to clients in JSON: it must survive a round trip.
  boost::system::error_code ec;
  auto v = json::parse(json::serialize(json::string(s)), ec);
  require(!ec && v.is_string() && v.as_string() == s, "a decoded string round-trips through JSON");
}

// `v` must outlive the pointer: pass a named variable, never a temporary.
template <class R>
const R* decoded(const std::variant<R, api_error>& v) {
  if (auto* e = std::get_if<api_error>(&v)) {
    check_error(*e);
    return nullptr;
  }
  return &std::get<R>(v);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const ttl_bounds bounds;
  const auto parsed =
      baton::fuzz::parse_http_request(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!parsed) return 0;
  const auto& req = *parsed;
  // What http_server checks before routing; any header value must be safe to look at.
  (void)is_loopback_host(req[http::field::host]);
  (void)is_json_content_type(req[http::field::content_type]);

  const auto target = parse_target(req.target());
  const auto* t = decoded(target);
  if (!t) return 0;
  require(method_for(t->what) == "GET" || method_for(t->what) == "POST" || method_for(t->what) == "GET, PUT",
          "a route has a method");
  const auto kind = with_method(t->what, req.method_string());  // nullopt: the router's 405
  if (t->what == lock_target::kind::healthz || t->what == lock_target::kind::metrics ||
      t->what == lock_target::kind::capabilities)
    return 0;
  if (t->what == lock_target::kind::renew_batch) {
    // The keys are in the body: each entry is checked as a single renew's body and path are.
    if (const auto v = parse_renew_batch(req.body(), bounds); auto* r = decoded(v)) {
      require(!r->leases.empty() && r->leases.size() <= max_renew_batch, "a batch has 1 to N entries");
      for (const auto& e : r->leases) {
        check_text(e.key, max_key_bytes, "a key is 1-512 bytes without control characters");
        check_text(e.owner, max_owner_bytes, "an owner is 1-256 bytes without control characters");
        require(e.token >= 1 && e.token <= static_cast<std::uint64_t>(INT64_MAX), "token in range");
        require(e.ttl >= bounds.min && e.ttl <= bounds.max, "ttl within bounds");
      }
    }
    return 0;
  }
  if (t->what == lock_target::kind::list) {
    // A listing's prefix and cursor are empty or checked as keys are; its limit is within bounds.
    if (!t->key.empty())
      check_text(t->key, max_key_bytes, "a prefix is 0-512 bytes without control characters");
    if (t->after && !t->after->empty())
      check_text(*t->after, max_key_bytes, "a cursor is 0-512 bytes without control characters");
    if (t->limit) require(*t->limit >= 1 && *t->limit <= max_list_limit, "limit within bounds");
    return 0;
  }
  check_text(t->key, max_key_bytes, "a key is 1-512 bytes without control characters");
  if (t->wait_ms) require(*t->wait_ms <= max_wait_ms, "wait_ms is clamped");
  if (t->value)
    require(t->value->size() <= max_value_bytes && !has_control_chars(*t->value),
            "a long-poll's value is checked as a body's");

  // The table as the service would find it: the key held by "holder" with token 1 (the same owner string
  // as the request's is possible, and then it is the holder), and one other key held.
  const time_point t0 = time_point{} + std::chrono::hours(1000);
  lock_table table;
  table.acquire(t->key, "holder", std::chrono::milliseconds(1000), t0);
  table.acquire(t->key + "/other", "someone", std::chrono::milliseconds(1000), t0);
  const auto before = table.last_token();
  const auto holder = table.get(t->key, t0);
  require(holder && holder->token == 1, "the seeded lease holds the key");
  const time_point now = t0 + std::chrono::milliseconds(size % 2000);  // before or after the seed's expiry
  const bool expired = now >= holder->expires;

  switch (t->what) {
    case lock_target::kind::acquire:
      if (const auto v = parse_acquire(req.body(), bounds); auto* r = decoded(v)) {
        check_text(r->owner, max_owner_bytes, "an owner is 1-256 bytes without control characters");
        require(r->ttl >= bounds.min && r->ttl <= bounds.max, "ttl within bounds");
        auto result = table.acquire(t->key, r->owner, r->ttl, now);
        if (auto* g = std::get_if<acquire_granted>(&result)) {
          require(expired || r->owner == "holder", "only a free key or its holder is granted");
          require(g->token == before + 1 && g->replaced_token == 1, "a grant takes the next token");
          auto view = table.get(t->key, now);
          require(view && view->owner == r->owner && view->token == g->token, "the grant is what get shows");
        } else {
          require(!expired && r->owner != "holder", "a held key is refused to another owner");
          require(std::get<acquire_refused>(result).holder.token == 1, "the refusal names the holder");
          require(table.last_token() == before, "a refused acquire takes no token");
        }
      }
      break;
    case lock_target::kind::renew:
      if (const auto v = parse_renew(req.body(), bounds); auto* r = decoded(v)) {
        check_text(r->owner, max_owner_bytes, "an owner is 1-256 bytes without control characters");
        require(r->token >= 1 && r->token <= static_cast<std::uint64_t>(INT64_MAX), "token in range");
        require(r->ttl >= bounds.min && r->ttl <= bounds.max, "ttl within bounds");
        auto result = table.renew(t->key, r->owner, r->token, r->ttl, now);
        require(
            std::holds_alternative<renew_ok>(result) == (!expired && r->owner == "holder" && r->token == 1),
            "only the holder with its token renews an unexpired lease");
      }
      break;
    case lock_target::kind::release:
      if (const auto v = parse_release(req.body()); auto* r = decoded(v)) {
        check_text(r->owner, max_owner_bytes, "an owner is 1-256 bytes without control characters");
        require(r->token >= 1 && r->token <= static_cast<std::uint64_t>(INT64_MAX), "token in range");
        auto result = table.release(t->key, r->owner, r->token, now);
        if (result.outcome == release_outcome::released)
          require(!expired && r->owner == "holder" && r->token == 1,
                  "only the holder with its token releases");
        if (result.outcome != release_outcome::not_owner)
          require(!table.get(t->key, now), "after a release the key is free");
      }
      break;
    case lock_target::kind::proclaim:
      if (const auto v = parse_proclaim(req.body()); auto* r = decoded(v)) {
        check_text(r->owner, max_owner_bytes, "an owner is 1-256 bytes without control characters");
        require(r->token >= 1 && r->token <= static_cast<std::uint64_t>(INT64_MAX), "token in range");
        require(r->value.size() <= max_value_bytes && !has_control_chars(r->value), "a value is checked");
        auto result = table.proclaim(t->key, r->owner, r->token, r->value, now);
        const bool held = !expired && r->owner == "holder" && r->token == 1;
        require(std::holds_alternative<proclaim_ok>(result) == held,
                "only the holder with its token proclaims on an unexpired lease");
        if (held) {
          auto view = table.get(t->key, now);
          require(view && view->token == 1 && view->value == r->value, "a proclaim keeps the token");
        }
        require(table.last_token() == before, "a proclaim takes no token");
      }
      break;
    case lock_target::kind::record_read:
      if (kind != lock_target::kind::record_write) break;
      if (const auto v = parse_record_write(req.body()); auto* r = decoded(v)) {
        check_text(r->owner, max_owner_bytes, "an owner is 1-256 bytes without control characters");
        require(r->token >= 1 && r->token <= static_cast<std::uint64_t>(INT64_MAX), "token in range");
        require(r->value.size() <= max_record_bytes, "a record value is bounded");
        const auto* old = table.find_record(t->key);
        const std::uint64_t old_version = old ? old->version : 0;
        auto result = table.write_record(t->key, r->owner, r->token, r->value, now);
        const bool held = !expired && r->owner == "holder" && r->token == 1;
        require(std::holds_alternative<record_written>(result) == held,
                "only the holder with its token writes the record on an unexpired lease");
        const auto* now_record = table.find_record(t->key);
        if (held)
          require(now_record && now_record->value == r->value && now_record->version == old_version + 1,
                  "a write replaces the value and counts a version");
        else
          require((now_record ? now_record->version : 0) == old_version, "a refused write changes nothing");
        auto view = table.get(t->key, now);
        require(view.has_value() != expired && (!view || view->token == 1),
                "a record write leaves the lease");
        require(table.last_token() == before, "a record write takes no token");
      }
      break;
    case lock_target::kind::break_lease:
      if (const auto v = parse_break(req.body()); auto* r = decoded(v)) {
        if (r->token)
          require(*r->token >= 1 && *r->token <= static_cast<std::uint64_t>(INT64_MAX), "token in range");
        auto result = table.break_lease(t->key, r->token, now);
        if (std::holds_alternative<lease_broken>(result)) {
          require(!expired && (!r->token || *r->token == 1), "only the live lease named is broken");
          require(!table.get(t->key, now), "after a break the key is free");
        } else {
          require(table.get(t->key, now).has_value() != expired, "a refused break changes nothing");
        }
        require(table.last_token() == before, "a break takes no token");
      }
      break;
    case lock_target::kind::get: {
      auto view = table.get(t->key, now);
      require(view.has_value() != expired, "get shows the lease until its expiry");
      break;
    }
    default:
      break;
  }
  require(table.size_of("") == table.size(), "the per-client count matches the table");
  require(table.size() <= 2, "nothing but the key and its neighbour is in the table");
  return 0;
}
