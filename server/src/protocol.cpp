// SPDX-License-Identifier: Apache-2.0
#include "protocol.hpp"

#include <boost/json/basic_parser_impl.hpp>
#include <boost/json/monotonic_resource.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <boost/json/value_stack.hpp>
#include <boost/url/parse.hpp>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstddef>
#include <memory>
#include <memory_resource>
#include <optional>
#include <set>
#include <span>
#include <unordered_set>
#include <vector>

namespace baton::server {
namespace json = boost::json;

namespace {

api_error bad_request(std::string message) {
  return api_error{400, "bad_request", std::move(message)};
}

// "Control characters" are Unicode's (general category Cc): the C0 controls, DEL and the C1 controls
// U+0080-U+009F, where U+0085 is a line break to some readers and U+009B starts a terminal escape. Other
// layout characters (U+2028, U+2029, bidirectional overrides) are allowed and escaped wherever batond and the
// CLI print them. C1 is matched on its UTF-8 form, 0xC2 0x80-0x9F: 0xC2 only ever begins a sequence.
bool has_control_chars(std::string_view s) {
  for (std::size_t i = 0; i < s.size(); ++i) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) return true;
    if (c == 0xc2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) <= 0x9f &&
        static_cast<unsigned char>(s[i + 1]) >= 0x80)
      return true;
  }
  return false;
}

// Well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF). Keys travel back
// to clients inside JSON strings, which can only carry valid UTF-8.
bool valid_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    std::size_t n = 0;
    unsigned char lo = 0x80, hi = 0xbf;  // the allowed range of the second byte
    if (c < 0x80)
      n = 0;
    else if (c >= 0xc2 && c <= 0xdf)
      n = 1;
    else if (c >= 0xe0 && c <= 0xef) {
      n = 2;
      if (c == 0xe0) lo = 0xa0;
      if (c == 0xed) hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      n = 3;
      if (c == 0xf0) lo = 0x90;
      if (c == 0xf4) hi = 0x8f;
    } else
      return false;
    if (s.size() - i - 1 < n) return false;
    for (std::size_t k = 1; k <= n; ++k) {
      auto b = static_cast<unsigned char>(s[i + k]);
      if (k == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xbf)) return false;
    }
    i += n + 1;
  }
  return true;
}

// A basic_parser handler that builds the value as json::parse does and stops at the first object that
// names a member twice. Boost.JSON 1.81 keeps the last of duplicate members without a word, and RFC 8259
// leaves their meaning to each reader: {"owner":"a","owner":"b"} would be owner b to batond while a proxy, a
// log or another server in front of it may read owner a. Refusing the body leaves only one reading.
struct unique_members_handler {
  static constexpr std::size_t max_object_size = json::object::max_size();
  static constexpr std::size_t max_array_size = json::array::max_size();
  static constexpr std::size_t max_key_size = json::string::max_size();
  static constexpr std::size_t max_string_size = json::string::max_size();

  // The member names of the open objects. An object's first names are kept in `flat` (one vector for all
  // open objects, reused: a batch of a hundred small entries allocates nothing for its names) and searched
  // in order; past `few` names it gets a hash set, so a body with thousands of members stays linear.
  static constexpr std::size_t few = 16;
  struct scope {
    std::size_t start;                                      // its first name in `flat`
    std::unique_ptr<std::unordered_set<std::string>> many;  // all its names, once it has more than `few`
  };

  // The names and scopes of a small body live in `names_memory`, inside the parser on the caller's stack;
  // a body with more names than fit spills to the heap (the resource never frees, and is bounded by the
  // body limit).
  alignas(std::max_align_t) std::array<std::byte, 512> names_memory;
  std::pmr::monotonic_buffer_resource names{names_memory.data(), names_memory.size()};
  json::value_stack st;
  std::pmr::vector<std::pmr::string> flat{&names};
  std::pmr::vector<scope> scopes{&names};
  std::pmr::string key{&names};          // the current name, while it arrives in parts
  std::optional<std::string> duplicate;  // the first repeated name, once found

  // `storage` holds the parser's value stack (the parsed value's own storage is set by st.reset()).
  explicit unique_members_handler(json::storage_ptr storage) : st(std::move(storage)) {}

  // False when the open object already has this name.
  bool add_name(const std::pmr::string& name) {
    scope& sc = scopes.back();
    if (sc.many) return sc.many->emplace(name).second;
    for (std::size_t i = sc.start; i < flat.size(); ++i)
      if (flat[i] == name) return false;
    if (flat.size() - sc.start < few) {
      flat.push_back(name);
      return true;
    }
    sc.many = std::make_unique<std::unordered_set<std::string>>();
    for (std::size_t i = sc.start; i < flat.size(); ++i)
      sc.many->emplace(flat[i]);
    flat.resize(sc.start);
    return sc.many->emplace(name).second;
  }

  bool on_document_begin(boost::system::error_code&) { return true; }
  bool on_document_end(boost::system::error_code&) { return true; }
  bool on_object_begin(boost::system::error_code&) {
    scopes.push_back(scope{flat.size(), nullptr});
    return true;
  }
  bool on_object_end(std::size_t n, boost::system::error_code&) {
    flat.resize(scopes.back().start);
    scopes.pop_back();
    st.push_object(n);
    return true;
  }
  bool on_array_begin(boost::system::error_code&) { return true; }
  bool on_array_end(std::size_t n, boost::system::error_code&) {
    st.push_array(n);
    return true;
  }
  bool on_key_part(json::string_view s, std::size_t, boost::system::error_code&) {
    key.append(s.data(), s.size());
    st.push_chars(s);
    return true;
  }
  bool on_key(json::string_view s, std::size_t, boost::system::error_code& ec) {
    key.append(s.data(), s.size());
    // Names are compared after unescaping, so "owner" and "\u006fwner" are the same member.
    if (!add_name(key)) {
      duplicate.emplace(key);
      ec = boost::system::errc::make_error_code(boost::system::errc::invalid_argument);
      return false;
    }
    key.clear();
    st.push_key(s);
    return true;
  }
  bool on_string_part(json::string_view s, std::size_t, boost::system::error_code&) {
    st.push_chars(s);
    return true;
  }
  bool on_string(json::string_view s, std::size_t, boost::system::error_code&) {
    st.push_string(s);
    return true;
  }
  bool on_number_part(json::string_view, boost::system::error_code&) { return true; }
  bool on_int64(std::int64_t i, json::string_view, boost::system::error_code&) {
    st.push_int64(i);
    return true;
  }
  bool on_uint64(std::uint64_t u, json::string_view, boost::system::error_code&) {
    st.push_uint64(u);
    return true;
  }
  bool on_double(double d, json::string_view, boost::system::error_code&) {
    st.push_double(d);
    return true;
  }
  bool on_bool(bool b, boost::system::error_code&) {
    st.push_bool(b);
    return true;
  }
  bool on_null(boost::system::error_code&) {
    st.push_null();
    return true;
  }
  bool on_comment_part(json::string_view, boost::system::error_code&) { return true; }
  bool on_comment(json::string_view, boost::system::error_code&) { return true; }
};

// Parses the body as a JSON object; unknown fields are ignored, a member named twice in any object is not.
// The object's memory, and the parser's, come from `storage` (default: the heap); it must outlive the object.
std::variant<json::object, api_error> parse_object(std::string_view body, json::storage_ptr storage = {}) {
  if (body.empty()) return bad_request("request body is empty; expected a JSON object");
  json::basic_parser<unique_members_handler> p(json::parse_options{}, storage);
  p.handler().st.reset(std::move(storage));
  boost::system::error_code ec;
  const std::size_t used = p.write_some(false, body.data(), body.size(), ec);
  if (auto& name = p.handler().duplicate)
    return bad_request("request body names the field \"" + *name + "\" more than once");
  if (!ec && used < body.size()) ec = json::error::extra_data;
  if (ec) return bad_request("request body is not valid JSON: " + ec.message());
  json::value v = p.handler().st.release();
  if (!v.is_object()) return bad_request("request body must be a JSON object");
  return std::move(v.as_object());
}

// The memory of one parsed body: a single acquire, renew or release (and the parser's stack) fits in the
// inline buffer, on the caller's stack; a larger body continues on the heap, all freed at once.
struct body_arena {
  alignas(std::max_align_t) std::array<unsigned char, 2048> memory;
  json::monotonic_resource resource{memory.data(), memory.size()};
};

std::optional<api_error> get_string(const json::object& o, std::string_view name, std::size_t max_bytes,
                                    std::string& out) {
  auto it = o.find(name);
  if (it == o.end()) return bad_request("missing field \"" + std::string(name) + "\"");
  if (!it->value().is_string()) return bad_request("field \"" + std::string(name) + "\" must be a string");
  const auto& s = it->value().get_string();
  if (s.empty() || s.size() > max_bytes)
    return bad_request("field \"" + std::string(name) + "\" must be 1 to " + std::to_string(max_bytes) +
                       " bytes long");
  if (has_control_chars(s))
    return bad_request("field \"" + std::string(name) + "\" must not contain control characters");
  out.assign(s.data(), s.size());
  return std::nullopt;
}

// Reads a JSON integer in [min, max]. Numbers with a fraction or exponent are refused, since a token or a
// TTL that is not exactly an integer is a client bug worth reporting.
std::optional<api_error> get_uint(const json::object& o, std::string_view name, std::uint64_t min,
                                  std::uint64_t max, std::uint64_t& out) {
  auto it = o.find(name);
  if (it == o.end()) return bad_request("missing field \"" + std::string(name) + "\"");
  const json::value& v = it->value();
  // The message is built only for a refusal: a renew batch reads two integers per entry.
  auto refused = [&] {
    return bad_request("field \"" + std::string(name) + "\" must be an integer from " + std::to_string(min) +
                       " to " + std::to_string(max));
  };
  if (v.is_int64()) {
    if (v.get_int64() < 0 || static_cast<std::uint64_t>(v.get_int64()) < min ||
        static_cast<std::uint64_t>(v.get_int64()) > max)
      return refused();
    out = static_cast<std::uint64_t>(v.get_int64());
    return std::nullopt;
  }
  if (v.is_uint64()) {
    if (v.get_uint64() < min || v.get_uint64() > max) return refused();
    out = v.get_uint64();
    return std::nullopt;
  }
  return refused();
}

std::optional<api_error> get_ttl(const json::object& o, const ttl_bounds& b, std::chrono::milliseconds& out) {
  std::uint64_t v = 0;
  if (auto e = get_uint(o, "ttl_ms", static_cast<std::uint64_t>(b.min.count()),
                        static_cast<std::uint64_t>(b.max.count()), v))
    return e;
  out = std::chrono::milliseconds(static_cast<std::int64_t>(v));
  return std::nullopt;
}

constexpr std::uint64_t max_token = static_cast<std::uint64_t>(INT64_MAX);

// What is wrong with a key, or nullptr: the same rules for a key in a path and one in a batch's body.
const char* key_fault(std::string_view key) {
  if (key.empty() || key.size() > max_key_bytes) return "must be 1 to 512 bytes";
  if (!valid_utf8(key)) return "must be valid UTF-8";
  if (has_control_chars(key)) return "must not contain control characters";
  return nullptr;
}
static_assert(max_key_bytes == 512);

std::optional<std::uint64_t> parse_decimal(std::string_view s) {
  std::uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || p != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

}  // namespace

namespace {
// Why `v` cannot be a lease's value, or null. JSON strings are UTF-8 already (the parser refuses anything
// else), and a query parameter is checked for it here; control characters are refused as in owners, so a
// value is safe to print in a log.
const char* value_fault(std::string_view v) {
  static const std::string too_long = "must be at most " + std::to_string(max_value_bytes) + " bytes long";
  if (v.size() > max_value_bytes) return too_long.c_str();
  if (!valid_utf8(v)) return "must be UTF-8";
  if (has_control_chars(v)) return "must not contain control characters";
  return nullptr;
}

// The `value` member of `o` (which must be there): a string, possibly empty.
std::optional<api_error> get_value(const json::object& o, std::string& out) {
  auto it = o.find("value");
  if (it == o.end()) return bad_request("missing field \"value\"");
  if (!it->value().is_string()) return bad_request("field \"value\" must be a string");
  const auto& s = it->value().get_string();
  if (auto why = value_fault(s)) return bad_request("field \"value\" " + std::string(why));
  out.assign(s.data(), s.size());
  return std::nullopt;
}
}  // namespace

std::string error_body(std::string_view code, std::string_view message) {
  std::string out;
  out.reserve(24 + code.size() + message.size());
  out += R"({"error":)";
  append_json_string(out, code);
  out += R"(,"message":)";
  append_json_string(out, message);
  out += '}';
  return out;
}

std::variant<acquire_request, api_error> parse_acquire(std::string_view body, const ttl_bounds& bounds) {
  body_arena arena;
  auto parsed = parse_object(body, &arena.resource);
  if (auto* e = std::get_if<api_error>(&parsed)) return std::move(*e);
  const auto& o = std::get<json::object>(parsed);
  acquire_request r;
  if (auto e = get_string(o, "owner", max_owner_bytes, r.owner)) return std::move(*e);
  if (auto e = get_ttl(o, bounds, r.ttl)) return std::move(*e);
  if (o.contains("value"))
    if (auto e = get_value(o, r.value)) return std::move(*e);
  if (o.contains("lock_delay_ms")) {
    std::uint64_t delay = 0;
    const auto max = static_cast<std::uint64_t>(bounds.max_lock_delay.count());
    if (get_uint(o, "lock_delay_ms", 0, max, delay))
      return bad_request("field \"lock_delay_ms\" must be an integer from 0 to " + std::to_string(max) +
                         ", this server's maximum lock-delay (lock_delay_max_ms in /v1/capabilities)");
    r.lock_delay = std::chrono::milliseconds(static_cast<std::int64_t>(delay));
  }
  if (o.contains("permits")) {
    std::uint64_t permits = 0;
    if (get_uint(o, "permits", 1, bounds.max_permits, permits))
      return bad_request("field \"permits\" must be an integer from 1 to " +
                         std::to_string(bounds.max_permits) +
                         ", this server's maximum (permits_max in /v1/capabilities)");
    r.permits = static_cast<std::uint32_t>(permits);
  }
  return r;
}

std::variant<renew_request, api_error> parse_renew(std::string_view body, const ttl_bounds& bounds) {
  body_arena arena;
  auto parsed = parse_object(body, &arena.resource);
  if (auto* e = std::get_if<api_error>(&parsed)) return std::move(*e);
  const auto& o = std::get<json::object>(parsed);
  renew_request r;
  if (auto e = get_string(o, "owner", max_owner_bytes, r.owner)) return std::move(*e);
  if (auto e = get_uint(o, "token", 1, max_token, r.token)) return std::move(*e);
  if (auto e = get_ttl(o, bounds, r.ttl)) return std::move(*e);
  return r;
}

std::variant<renew_batch_request, api_error> parse_renew_batch(std::string_view body,
                                                               const ttl_bounds& bounds) {
  // The parsed body lives only in this function: its memory comes from one arena, freed at once.
  body_arena arena;
  auto parsed = parse_object(body, &arena.resource);
  if (auto* e = std::get_if<api_error>(&parsed)) return std::move(*e);
  const auto& o = std::get<json::object>(parsed);
  auto it = o.find("leases");
  if (it == o.end()) return bad_request("missing field \"leases\"");
  if (!it->value().is_array()) return bad_request("field \"leases\" must be an array");
  const auto& leases = it->value().get_array();
  if (leases.empty() || leases.size() > max_renew_batch)
    return bad_request("field \"leases\" must hold 1 to " + std::to_string(max_renew_batch) + " entries");
  renew_batch_request r;
  r.leases.reserve(leases.size());
  std::set<std::pair<std::string_view, std::uint64_t>> named;
  for (std::size_t i = 0; i < leases.size(); ++i) {
    // Every error names its entry, so a client can tell which of a hundred leases it built wrong.
    auto at = [i](const api_error& e) {
      return bad_request("leases[" + std::to_string(i) + "]: " + e.message);
    };
    if (!leases[i].is_object()) return at(bad_request("must be a JSON object"));
    const auto& entry = leases[i].get_object();
    renew_batch_entry& b = r.leases.emplace_back();
    auto k = entry.find("key");
    if (k == entry.end()) return at(bad_request("missing field \"key\""));
    if (!k->value().is_string()) return at(bad_request("field \"key\" must be a string"));
    b.key.assign(k->value().get_string().data(), k->value().get_string().size());
    if (auto why = key_fault(b.key)) return at(bad_request("field \"key\" " + std::string(why)));
    if (auto e = get_string(entry, "owner", max_owner_bytes, b.owner)) return at(*e);
    if (auto e = get_uint(entry, "token", 1, max_token, b.token)) return at(*e);
    if (auto e = get_ttl(entry, bounds, b.ttl)) return at(*e);
    // Two entries for one lease would make the answer depend on their order within one request; a client
    // holds one lease per (key, token), so a repeated pair is a client bug. One key with two tokens is two
    // permits of a semaphore (docs/protocol.md, "semaphores"), or a stale token beside the live one: each
    // is decided on its own, in any order.
    if (!named.emplace(std::string_view(k->value().get_string()), b.token).second)
      return at(bad_request("key \"" + b.key + "\" with token " + std::to_string(b.token) +
                            " appears more than once in the batch"));
  }
  return r;
}

std::variant<release_request, api_error> parse_release(std::string_view body) {
  body_arena arena;
  auto parsed = parse_object(body, &arena.resource);
  if (auto* e = std::get_if<api_error>(&parsed)) return std::move(*e);
  const auto& o = std::get<json::object>(parsed);
  release_request r;
  if (auto e = get_string(o, "owner", max_owner_bytes, r.owner)) return std::move(*e);
  if (auto e = get_uint(o, "token", 1, max_token, r.token)) return std::move(*e);
  return r;
}

std::variant<break_request, api_error> parse_break(std::string_view body) {
  body_arena arena;
  auto parsed = parse_object(body, &arena.resource);
  if (auto* e = std::get_if<api_error>(&parsed)) return std::move(*e);
  const auto& o = std::get<json::object>(parsed);
  break_request r;
  if (o.contains("token")) {
    std::uint64_t token = 0;
    if (auto e = get_uint(o, "token", 1, max_token, token)) return std::move(*e);
    r.token = token;
  }
  return r;
}

std::variant<proclaim_request, api_error> parse_proclaim(std::string_view body) {
  body_arena arena;
  auto parsed = parse_object(body, &arena.resource);
  if (auto* e = std::get_if<api_error>(&parsed)) return std::move(*e);
  const auto& o = std::get<json::object>(parsed);
  proclaim_request r;
  if (auto e = get_string(o, "owner", max_owner_bytes, r.owner)) return std::move(*e);
  if (auto e = get_uint(o, "token", 1, max_token, r.token)) return std::move(*e);
  if (auto e = get_value(o, r.value)) return std::move(*e);
  return r;
}

std::variant<record_write_request, api_error> parse_record_write(std::string_view body) {
  body_arena arena;
  auto parsed = parse_object(body, &arena.resource);
  if (auto* e = std::get_if<api_error>(&parsed)) return std::move(*e);
  const auto& o = std::get<json::object>(parsed);
  record_write_request r;
  if (auto e = get_string(o, "owner", max_owner_bytes, r.owner)) return std::move(*e);
  if (auto e = get_uint(o, "token", 1, max_token, r.token)) return std::move(*e);
  // Any JSON string: the parser has checked it is UTF-8. Control characters are allowed (a record holds
  // data, such as JSON text with its newlines); whoever prints one escapes it.
  auto it = o.find("value");
  if (it == o.end()) return bad_request("missing field \"value\"");
  if (!it->value().is_string()) return bad_request("field \"value\" must be a string");
  const auto& v = it->value().get_string();
  if (v.size() > max_record_bytes)
    return api_error{413, "record_too_large",
                     "field \"value\" is " + std::to_string(v.size()) + " bytes; a record holds at most " +
                         std::to_string(max_record_bytes) + " (record_max_bytes in /v1/capabilities)"};
  r.value.assign(v.data(), v.size());
  return r;
}

namespace {
// The path's segments, still percent-encoded, or the error for a target that is not origin-form.
std::variant<boost::urls::url_view, api_error> parse_url(std::string_view target) {
  auto parsed = boost::urls::parse_origin_form(target);
  if (!parsed) return bad_request("malformed request target: " + parsed.error().message());
  return *parsed;
}

std::variant<lock_target::kind, api_error> route_of(boost::urls::url_view u) {
  // At most five segments matter (a route has four): more are a path that names no route.
  std::array<boost::urls::pct_string_view, 5> segments;
  std::size_t count = 0;
  for (auto seg : u.encoded_segments()) {
    if (count == segments.size()) break;
    segments[count++] = seg;
  }
  const std::span<const boost::urls::pct_string_view> parts(segments.data(), count);
  using kind = lock_target::kind;
  if (parts.size() == 1 && parts[0] == "metrics") return kind::metrics;
  if (parts.size() == 1 && parts[0] == "healthz") return kind::healthz;
  if (parts.size() == 2 && parts[0] == "v1" && parts[1] == "capabilities") return kind::capabilities;
  if (parts.size() == 2 && parts[0] == "v1" && parts[1] == "renew") return kind::renew_batch;
  if (parts.size() == 2 && parts[0] == "v1" && parts[1] == "locks") return kind::list;
  // A key is one segment whatever it holds (an empty one included: that is a bad key, not another route);
  // a raw '/' in a key makes more segments, and so another route or none.
  if (parts.size() < 3 || parts.size() > 4 || parts[0] != "v1" || parts[1] != "locks")
    return api_error{404, "not_found", "no such route: " + std::string(u.encoded_path())};
  if (parts.size() == 3) return kind::get;
  if (parts[3] == "acquire") return kind::acquire;
  if (parts[3] == "renew") return kind::renew;
  if (parts[3] == "release") return kind::release;
  if (parts[3] == "proclaim") return kind::proclaim;
  if (parts[3] == "record") return kind::record_read;
  if (parts[3] == "break") return kind::break_lease;
  return api_error{404, "not_found", "no such route: " + std::string(u.encoded_path())};
}
}  // namespace

std::variant<lock_target::kind, api_error> parse_route(std::string_view target) {
  auto u = parse_url(target);
  if (auto* e = std::get_if<api_error>(&u)) return std::move(*e);
  return route_of(std::get<boost::urls::url_view>(u));
}

namespace {
// The query of a listing: `prefix` (0 to 512 bytes, a key's characters; none: every key), `after` (a key)
// and `limit` (1 to max_list_limit). Unknown parameters are ignored; a known one given twice is refused.
std::variant<lock_target, api_error> decode_list(boost::urls::url_view u, lock_target t) {
  bool prefix_seen = false;
  for (auto param : u.params()) {
    if (param.key == "prefix" || param.key == "after") {
      const bool is_prefix = param.key == "prefix";
      if (is_prefix ? prefix_seen : t.after.has_value())
        return bad_request("query parameter " + std::string(param.key) + " is given more than once");
      std::string v = param.has_value ? param.value : std::string();
      // An empty prefix is every key; an empty cursor is the start. Otherwise each is checked as a key.
      if (!v.empty())
        if (auto why = key_fault(v))
          return bad_request("query parameter " + std::string(param.key) + " " + why +
                             " after percent-decoding");
      if (is_prefix) {
        prefix_seen = true;
        t.key = std::move(v);
      } else {
        t.after = std::move(v);
      }
      continue;
    }
    if (param.key != "limit") continue;
    if (t.limit) return bad_request("query parameter limit is given more than once");
    auto v = param.has_value ? parse_decimal(param.value) : std::nullopt;
    if (!v || *v < 1 || *v > max_list_limit)
      return bad_request("query parameter limit must be an integer from 1 to " +
                         std::to_string(max_list_limit));
    t.limit = *v;
  }
  return t;
}

// The key and the query of a target whose route is known.
std::variant<lock_target, api_error> decode_target(boost::urls::url_view u, lock_target::kind route) {
  lock_target t{route, {}, {}, {}, {}};
  if (t.what == lock_target::kind::healthz || t.what == lock_target::kind::metrics ||
      t.what == lock_target::kind::capabilities || t.what == lock_target::kind::renew_batch)
    return t;
  if (t.what == lock_target::kind::list) return decode_list(u, std::move(t));

  t.key = (*std::next(u.encoded_segments().begin(), 2)).decode();
  if (auto why = key_fault(t.key)) return bad_request("key " + std::string(why) + " after percent-decoding");
  if (t.what != lock_target::kind::get && t.what != lock_target::kind::acquire) return t;

  // Unknown parameters are ignored, as unknown JSON fields are. A known one given twice is refused, like a
  // JSON member named twice: a proxy or a log may read the first copy where another reader takes the last.
  for (auto param : u.params()) {
    // An acquire reads only wait_ms (feature acquire_queue).
    if (t.what == lock_target::kind::acquire && param.key != "wait_ms") continue;
    if (param.key == "value") {
      if (t.value) return bad_request("query parameter value is given more than once");
      std::string v = param.has_value ? param.value : std::string();
      if (auto why = value_fault(v)) return bad_request("query parameter value " + std::string(why));
      t.value = std::move(v);
      continue;
    }
    std::optional<std::uint64_t>* slot = param.key == "wait_ms" ? &t.wait_ms
                                         : param.key == "token" ? &t.token
                                                                : nullptr;
    if (!slot) continue;
    if (slot->has_value())
      return bad_request("query parameter " + std::string(param.key) + " is given more than once");
    auto v = param.has_value ? parse_decimal(param.value) : std::nullopt;
    if (!v)
      return bad_request("query parameter " + std::string(param.key) + " must be a non-negative integer");
    *slot = param.key == "wait_ms" ? std::min(*v, max_wait_ms) : *v;
  }
  return t;
}
}  // namespace

std::variant<lock_target, api_error> parse_target(std::string_view target) {
  auto parsed = parse_url(target);
  if (auto* e = std::get_if<api_error>(&parsed)) return std::move(*e);
  const auto u = std::get<boost::urls::url_view>(parsed);
  auto route = route_of(u);
  if (auto* e = std::get_if<api_error>(&route)) return std::move(*e);
  return decode_target(u, std::get<lock_target::kind>(route));
}

request_target parse_request_target(std::string_view target) {
  auto parsed = parse_url(target);
  if (auto* e = std::get_if<api_error>(&parsed)) return {*e, std::move(*e)};
  const auto u = std::get<boost::urls::url_view>(parsed);
  auto route = route_of(u);
  if (auto* e = std::get_if<api_error>(&route)) return {*e, std::move(*e)};
  return {route, decode_target(u, std::get<lock_target::kind>(route))};
}

std::string capabilities_body(std::size_t max_body_bytes, std::chrono::milliseconds max_lock_delay,
                              std::uint32_t max_permits) {
  // Features are only ever added (docs/protocol.md, "Versions and features"). A server that allows no
  // lock-delay (--max-lock-delay-ms 0) does not claim the feature: a client then refuses to ask for one
  // rather than learn it from a 400.
  const bool lock_delay = max_lock_delay > std::chrono::milliseconds{0};
  return R"({"protocol_version":1,"features":["lease_values","renew_batch","proclaim","lock_record",)"
         R"("acquire_queue","list_locks","break_lease")" +
         std::string(lock_delay ? R"(,"lock_delay")" : "") + R"(,"semaphores"],"lock_delay_max_ms":)" +
         std::to_string(max_lock_delay.count()) + R"(,"permits_max":)" + std::to_string(max_permits) +
         R"(,"renew_batch_max":)" + std::to_string(max_renew_batch) + R"(,"max_body_bytes":)" +
         std::to_string(max_body_bytes) + R"(,"record_max_bytes":)" + std::to_string(max_record_bytes) +
         R"(,"list_max":)" + std::to_string(max_list_limit) + "}";
}

std::string_view method_for(lock_target::kind k) {
  switch (k) {
    case lock_target::kind::acquire:
    case lock_target::kind::renew:
    case lock_target::kind::release:
    case lock_target::kind::renew_batch:
    case lock_target::kind::proclaim:
    case lock_target::kind::break_lease:
      return "POST";
    case lock_target::kind::get:
    case lock_target::kind::list:
    case lock_target::kind::healthz:
    case lock_target::kind::metrics:
    case lock_target::kind::capabilities:
      return "GET";
    case lock_target::kind::record_read:
    case lock_target::kind::record_write:
      return "GET, PUT";
  }
  return "GET";
}

std::optional<lock_target::kind> with_method(lock_target::kind k, std::string_view method) {
  if (k == lock_target::kind::record_read || k == lock_target::kind::record_write) {
    if (method == "GET") return lock_target::kind::record_read;
    if (method == "PUT") return lock_target::kind::record_write;
    return std::nullopt;
  }
  if (method == method_for(k)) return k;
  return std::nullopt;
}

namespace {
bool iequal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
    s.remove_suffix(1);
  return s;
}

bool all_digits(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Four decimal octets, the first 127; no leading `+`, no empty octet, each at most 255.
bool is_ipv4_loopback(std::string_view s) {
  int octets = 0;
  for (std::size_t pos = 0;; ++octets) {
    std::size_t dot = s.find('.', pos);
    std::string_view part = s.substr(pos, dot == std::string_view::npos ? std::string_view::npos : dot - pos);
    if (part.empty() || part.size() > 3 || !all_digits(part)) return false;
    // Checked above: one to three digits. Read by hand, not with std::stoi (a string and strtol per octet
    // of every request's Host: about 1,000 instructions per request).
    int v = 0;
    for (char c : part)
      v = v * 10 + (c - '0');
    if (v > 255 || (octets == 0 && v != 127)) return false;
    if (dot == std::string_view::npos) break;
    pos = dot + 1;
  }
  return octets == 3;
}
}  // namespace

bool is_loopback_host(std::string_view host) {
  host = trim(host);
  std::string_view name = host, port;
  if (host.starts_with('[')) {
    auto close = host.find(']');
    if (close == std::string_view::npos) return false;
    name = host.substr(1, close - 1);
    std::string_view rest = host.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return false;
      port = rest.substr(1);
      if (port.empty() || !all_digits(port)) return false;
    }
    return name == "::1" || iequal(name, "0:0:0:0:0:0:0:1");
  }
  if (auto colon = host.find(':'); colon != std::string_view::npos) {
    name = host.substr(0, colon);
    port = host.substr(colon + 1);
    if (port.empty() || !all_digits(port)) return false;
  }
  return iequal(name, "localhost") || is_ipv4_loopback(name);
}

bool is_json_content_type(std::string_view content_type) {
  return iequal(trim(content_type.substr(0, content_type.find(';'))), "application/json");
}

}  // namespace baton::server
