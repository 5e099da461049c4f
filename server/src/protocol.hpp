// SPDX-License-Identifier: Apache-2.0
#pragma once
// Protocol v1 request decoding and validation (docs/protocol.md), with no I/O: every function maps bytes
// to a request or to the exact error the client gets.

#include "baton/common/json_string.hpp"

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace baton::server {

/// An error answer: HTTP status plus the JSON body {"error": code, "message": message}.
struct api_error {
  int status;
  std::string code;
  std::string message;
};

/// Encodes {"error":code,"message":message}.
std::string error_body(std::string_view code, std::string_view message);

// batond writes its answers' strings with baton::append_json_string (baton/common/json_string.hpp).
using baton::append_json_string;

struct ttl_bounds {
  std::chrono::milliseconds min{100};
  std::chrono::milliseconds max{3'600'000};
  /// The longest lock-delay an acquire may ask for (batond --max-lock-delay-ms; advertised as
  /// `lock_delay_max_ms`). A longer one is refused, not clamped: the client asked for a promise to the next
  /// holder that this server would not keep.
  std::chrono::milliseconds max_lock_delay{60'000};
  /// The most permits an acquire may ask for (batond --max-permits; advertised as `permits_max`).
  std::uint32_t max_permits = 1000;
};

/// The bounds of batond's --max-permits.
inline constexpr std::uint32_t max_permits_limit = 65535;

inline constexpr std::size_t max_key_bytes = 512;
inline constexpr std::size_t max_owner_bytes = 256;
inline constexpr std::size_t max_value_bytes = 1024;
inline constexpr std::uint64_t max_wait_ms = 60'000;
/// The largest lock record value, in bytes of UTF-8 (advertised as `record_max_bytes`).
inline constexpr std::size_t max_record_bytes = 64 * 1024;
/// The body limit of a record write: room for any value within max_record_bytes, every byte escaped as
/// `\u00xx` at worst, and its other members. Only this route reads bodies past --max-body-bytes.
inline constexpr std::size_t max_record_body_bytes = 6 * max_record_bytes + 4096;
/// The most entries a `POST /v1/renew` may carry (advertised in GET /v1/capabilities). The body limit
/// (--max-body-bytes) bounds a batch too, and at its default is the tighter bound.
inline constexpr std::size_t max_renew_batch = 1000;
/// A listing's page size (`limit`): its default, and the most one page may hold (advertised as
/// `list_max`). The bound keeps an answer, and the time the table is held to sort it, small.
inline constexpr std::size_t default_list_limit = 100;
inline constexpr std::size_t max_list_limit = 1000;

struct acquire_request {
  std::string owner;
  std::chrono::milliseconds ttl;
  /// The optional `value` published with the lease (empty when the field is absent).
  std::string value{};
  /// The optional `lock_delay_ms` (feature lock_delay; 0 when absent): how long the key stays unavailable
  /// after the lease ends by expiry or a break.
  std::chrono::milliseconds lock_delay{0};
  /// The optional `permits` (feature semaphores; absent: none, a plain lock): the key's permit count.
  std::optional<std::uint32_t> permits{};
};
struct renew_request {
  std::string owner;
  std::uint64_t token;
  std::chrono::milliseconds ttl;
};
/// One entry of a batch renewal: a renew of `key` with its own condition and TTL.
struct renew_batch_entry {
  std::string key;
  std::string owner;
  std::uint64_t token;
  std::chrono::milliseconds ttl;
};
/// `POST /v1/renew`: 1 to max_renew_batch entries, no key twice.
struct renew_batch_request {
  std::vector<renew_batch_entry> leases;
};
struct release_request {
  std::string owner;
  std::uint64_t token;
};
/// `PUT /v1/locks/{key}/record`: replaces the lock's record, for the holder `owner` with `token`.
struct record_write_request {
  std::string owner;
  std::uint64_t token;
  std::string value;
};
/// `POST /v1/locks/{key}/proclaim`: replaces the value of the lease `owner` holds with `token`.
struct proclaim_request {
  std::string owner;
  std::uint64_t token;
  std::string value;
};

/// `POST /v1/locks/{key}/break`: an operator ends the lease of the key; with `token`, only that lease.
struct break_request {
  std::optional<std::uint64_t> token;
};

std::variant<acquire_request, api_error> parse_acquire(std::string_view body, const ttl_bounds& bounds);
std::variant<renew_request, api_error> parse_renew(std::string_view body, const ttl_bounds& bounds);
std::variant<release_request, api_error> parse_release(std::string_view body);
/// `PUT /v1/locks/{key}/record`: `value` is required (any JSON string up to max_record_bytes, control
/// characters included; over it: 413 `record_too_large`).
std::variant<record_write_request, api_error> parse_record_write(std::string_view body);
/// `value` is required (an empty string included): a proclaim without one is a client bug, not a request to
/// clear the value.
std::variant<proclaim_request, api_error> parse_proclaim(std::string_view body);
/// `{}` or `{"token":T}` (an integer >= 1).
std::variant<break_request, api_error> parse_break(std::string_view body);
/// A batch is refused as a whole (400, naming the entry) when any entry is malformed: each is checked as
/// a single renew's body is, and its key as a key in a path is. A key given twice is malformed too.
std::variant<renew_batch_request, api_error> parse_renew_batch(std::string_view body,
                                                               const ttl_bounds& bounds);

/// What a request target names.
struct lock_target {
  /// `record_read` is what the path `/v1/locks/{key}/record` names; with method PUT the router makes it
  /// `record_write` (with_method).
  enum class kind {
    acquire,
    renew,
    release,
    get,
    healthz,
    metrics,
    capabilities,
    renew_batch,
    proclaim,
    record_read,
    record_write,
    list,
    break_lease
  };
  kind what;
  /// Percent-decoded; empty for healthz, metrics, capabilities and renew_batch. For a listing
  /// (`GET /v1/locks?prefix=P`), the prefix P (empty: every key), so access to it is checked as to a key.
  std::string key;
  /// Long-poll parameters of GET /v1/locks/{key}; wait_ms is already clamped to max_wait_ms. An acquire's
  /// wait_ms (feature acquire_queue) is how long it may wait in the key's queue, clamped alike.
  std::optional<std::uint64_t> wait_ms;
  std::optional<std::uint64_t> token;
  /// `value`: with feature proclaim, a long-poll also answers once the holder's value differs from this
  /// one (percent-decoded; checked as a value in a body is).
  std::optional<std::string> value{};
  /// A listing's cursor (`after`: list the keys after this one; none: from the first) and page size
  /// (`limit`: 1 to max_list_limit; none: default_list_limit).
  std::optional<std::string> after{};
  std::optional<std::uint64_t> limit{};
};

/// The route an origin-form target names, from the shape of its path alone: the key and the query are not
/// looked at. 400 for a target that is not an origin-form URL, 404 not_found for a path that names no route.
/// A server answers these before 405 (a known route, the wrong method), and that before a bad key or query.
std::variant<lock_target::kind, api_error> parse_route(std::string_view target);

/// Decodes an origin-form target ("/v1/locks/a%2Fb/acquire?wait_ms=5"): parse_route(), then the key (400),
/// then the query (400: a bad `wait_ms` or `token`, or either given twice; other parameters are ignored).
std::variant<lock_target, api_error> parse_target(std::string_view target);

/// parse_route() and parse_target() of one target with one parse of the URL, for a server that answers their
/// errors at different points of its order of checks: `route` as parse_route() gives it, `target` as
/// parse_target() does.
struct request_target {
  std::variant<lock_target::kind, api_error> route;
  std::variant<lock_target, api_error> target;
};
request_target parse_request_target(std::string_view target);

/// The body of GET /v1/capabilities: the protocol version, the optional features this server has, and the
/// limits a client needs to size a batch renewal (`max_body_bytes`: the server's body limit).
std::string capabilities_body(std::size_t max_body_bytes, std::chrono::milliseconds max_lock_delay,
                              std::uint32_t max_permits = 1000);

/// The HTTP methods a target kind accepts, as an `Allow` header lists them ("POST", "GET" or "GET, PUT").
std::string_view method_for(lock_target::kind k);
/// The kind a request with `method` to a path of kind `k` is (record_write for a PUT of a record), or
/// nullopt when the route does not take that method (405).
std::optional<lock_target::kind> with_method(lock_target::kind k, std::string_view method);

/// Whether a `Host` header value names this machine's loopback interface: `localhost`, an IPv4 address in
/// 127.0.0.0/8 or `[::1]`, each with or without a port. A browser sends the name it resolved, so a page of
/// another site that rebinds its DNS name to 127.0.0.1 still sends that name, never one of these.
bool is_loopback_host(std::string_view host);

/// Whether a `Content-Type` value is `application/json`, with any parameters (`; charset=utf-8`), any case.
/// A browser may send a cross-site POST without asking first only with a form or `text/plain` type.
bool is_json_content_type(std::string_view content_type);

}  // namespace baton::server
