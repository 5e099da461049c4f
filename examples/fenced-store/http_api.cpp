// SPDX-License-Identifier: Apache-2.0
#include "http_api.hpp"

#include "baton/common/log.hpp"

#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>
#include <boost/url/parse.hpp>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <iterator>
#include <optional>
#include <variant>
#include <vector>

namespace fenced_store {
namespace http = boost::beast::http;
namespace json = boost::json;

namespace {

// Baton tokens are JSON integers from 1 to 2^63-1 (docs/protocol.md); the header carries the same range.
constexpr std::uint64_t max_token = static_cast<std::uint64_t>(INT64_MAX);

struct api_error {
  unsigned status;
  std::string code;
  std::string message;
};

api_error bad_request(std::string message) {
  return {400, "bad_request", std::move(message)};
}

response make_response(unsigned status, std::string body, unsigned version, bool keep_alive,
                       std::string_view content_type = "application/json") {
  response res{static_cast<http::status>(status), version};
  res.set(http::field::server, "fenced-store");
  res.set(http::field::content_type, content_type);
  res.keep_alive(keep_alive);
  res.body() = std::move(body);
  res.prepare_payload();
  return res;
}

bool has_control_chars(std::string_view s) {
  for (unsigned char c : s)
    if (c < 0x20 || c == 0x7f) return true;
  return false;
}

// A multi-byte UTF-8 sequence: lead byte pattern, continuation bytes, smallest code point it may encode.
struct utf8_form {
  unsigned char mask, lead;
  std::size_t extra;
  std::uint32_t min;
};
constexpr utf8_form utf8_forms[] = {{0xE0, 0xC0, 1, 0x80}, {0xF0, 0xE0, 2, 0x800}, {0xF8, 0xF0, 3, 0x10000}};

// Values, keys and resource names travel back inside JSON strings, which must be UTF-8; checking on the way
// in keeps every answer valid JSON. Rejects overlong forms, surrogates and code points above U+10FFFF (RFC
// 3629).
bool is_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    const auto* f = std::find_if(std::begin(utf8_forms), std::end(utf8_forms),
                                 [c](const utf8_form& f) { return (c & f.mask) == f.lead; });
    if (f == std::end(utf8_forms) || s.size() - i <= f->extra) return false;
    std::uint32_t cp = c & ~f->mask & 0xFFu;
    for (std::size_t k = 1; k <= f->extra; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3Fu);
    }
    if (cp < f->min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += f->extra + 1;
  }
  return true;
}

std::optional<api_error> check_name(std::string_view what, std::string_view name) {
  if (name.empty() || name.size() > max_name_bytes)
    return bad_request(std::string(what) + " must be 1 to " + std::to_string(max_name_bytes) + " bytes long");
  if (has_control_chars(name)) return bad_request(std::string(what) + " must not contain control characters");
  if (!is_utf8(name)) return bad_request(std::string(what) + " must be UTF-8 text");
  return std::nullopt;
}

std::variant<std::uint64_t, api_error> parse_token(const request& req) {
  const auto count = req.count("Fencing-Token");
  if (count == 0) return bad_request("missing Fencing-Token header: every write must carry its lock's token");
  if (count > 1) return bad_request("more than one Fencing-Token header");
  const std::string_view text = req["Fencing-Token"];
  std::uint64_t token = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), token);
  if (ec != std::errc{} || end != text.data() + text.size() || text.empty() || token < 1 || token > max_token)
    return bad_request("Fencing-Token must be an integer from 1 to " + std::to_string(max_token) +
                       (is_utf8(text) ? ", got \"" + std::string(text) + "\"" : std::string()));
  return token;
}

std::variant<std::string, api_error> parse_resource(const request& req) {
  const auto count = req.count("Fencing-Resource");
  if (count == 0) return std::string(default_resource);
  if (count > 1) return bad_request("more than one Fencing-Resource header");
  std::string resource(req["Fencing-Resource"]);
  if (auto e = check_name("Fencing-Resource", resource)) return std::move(*e);
  return resource;
}

// Fencing-Slot and Fencing-Permits (a semaphore's permit, docs/fencing.md): optional, each at most once; the
// slot must be below the count when both are given.
std::variant<baton::fence, api_error> parse_permit(const request& req, std::uint64_t token) {
  baton::fence f{token, 0, 0};
  const auto number = [&](std::string_view name, std::uint32_t lo, std::uint32_t hi,
                          std::uint32_t& out) -> std::optional<api_error> {
    const auto count = req.count(name);
    if (count == 0) return std::nullopt;
    if (count > 1) return bad_request("more than one " + std::string(name) + " header");
    const std::string_view text = req[name];
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
    if (ec != std::errc{} || end != text.data() + text.size() || text.empty() || out < lo || out > hi)
      return bad_request(std::string(name) + " must be an integer from " + std::to_string(lo) + " to " +
                         std::to_string(hi));
    return std::nullopt;
  };
  if (auto e = number("Fencing-Slot", 0, 65534, f.slot)) return std::move(*e);
  if (auto e = number("Fencing-Permits", 1, 65535, f.permits)) return std::move(*e);
  if (f.permits != 0 && f.slot >= f.permits)
    return bad_request("Fencing-Slot " + std::to_string(f.slot) + " must be below Fencing-Permits " +
                       std::to_string(f.permits));
  return f;
}

enum class route { items, fences, history, healthz };

struct target {
  route what;
  std::string key;  // items only, percent-decoded
};

std::variant<target, api_error> parse_target(std::string_view text) {
  auto parsed = boost::urls::parse_origin_form(text);
  if (!parsed) return bad_request("malformed request target: " + parsed.error().message());
  auto segs = parsed->encoded_segments();
  std::vector<boost::urls::pct_string_view> parts(segs.begin(), segs.end());
  if (parts.size() == 1 && parts[0] == "fences") return target{route::fences, {}};
  if (parts.size() == 1 && parts[0] == "history") return target{route::history, {}};
  if (parts.size() == 1 && parts[0] == "healthz") return target{route::healthz, {}};
  if (parts.size() == 2 && parts[0] == "items") {
    target t{route::items, parts[1].decode()};
    if (auto e = check_name("key", t.key)) return std::move(*e);
    return t;
  }
  return api_error{404, "not_found", "no such route: " + std::string(parsed->encoded_path())};
}

response put_item(item_store& store, const request& req, const std::string& key, bool ka) {
  const unsigned v = req.version();
  auto error = [&](const api_error& e) { return error_response(e.status, e.code, e.message, v, ka); };
  auto token = parse_token(req);
  if (auto* e = std::get_if<api_error>(&token)) return error(*e);
  auto resource = parse_resource(req);
  if (auto* e = std::get_if<api_error>(&resource)) return error(*e);
  const auto t = std::get<std::uint64_t>(token);
  auto permit = parse_permit(req, t);
  if (auto* e = std::get_if<api_error>(&permit)) return error(*e);
  if (!is_utf8(req.body())) return error(bad_request("the value (request body) must be UTF-8 text"));

  const auto& res_name = std::get<std::string>(resource);
  const auto f = std::get<baton::fence>(permit);
  auto r = store.put(res_name, key, req.body(), f);
  if (!r.accepted) {
    baton::log::info(
        "stale_write",
        {{"key", key}, {"resource", res_name}, {"slot", f.slot}, {"token", t}, {"highest", r.highest_token}});
    const std::string where = f.slot == 0 ? "resource \"" + res_name + "\""
                                          : "slot " + std::to_string(f.slot) + " of \"" + res_name + "\"";
    json::object o;
    o["error"] = "stale_token";
    o["message"] = r.past_count
                       ? "token " + std::to_string(t) + " is lower than " + std::to_string(r.highest_token) +
                             ", which came with fewer permits than " + where +
                             " needs: the key's count shrank after this holder's lease"
                       : "token " + std::to_string(t) + " is lower than " + std::to_string(r.highest_token) +
                             ", the highest accepted for " + where + ": a newer lock holder has written";
    o["highest_token"] = r.highest_token;
    return make_response(409, json::serialize(o), v, ka);
  }
  baton::log::debug("write", {{"key", key}, {"resource", res_name}, {"token", t}, {"version", r.version}});
  json::object o;
  o["key"] = key;
  o["token"] = t;
  o["version"] = r.version;
  return make_response(200, json::serialize(o), v, ka);
}

response get_item(const item_store& store, const std::string& key, unsigned v, bool ka) {
  auto it = store.get(key);
  if (!it) return error_response(404, "not_found", "no item with key \"" + key + "\"", v, ka);
  json::object o;
  o["key"] = key;
  o["value"] = it->value;
  o["token"] = it->token;
  return make_response(200, json::serialize(o), v, ka);
}

response get_fences(const item_store& store, unsigned v, bool ka) {
  json::object fences;
  for (const auto& [resource, highest] : store.fences())
    fences[resource] = highest;
  json::object o;
  o["fences"] = std::move(fences);
  return make_response(200, json::serialize(o), v, ka);
}

response get_history(const item_store& store, unsigned v, bool ka) {
  std::uint64_t dropped = 0;
  std::string body;
  for (const auto& h : store.history(dropped)) {
    json::object o;
    o["ts_us"] = h.ts_us;
    o["key"] = h.key;
    o["resource"] = h.resource;
    o["token"] = h.token;
    o["accepted"] = h.accepted;
    o["highest_token"] = h.highest_token;
    if (h.slot != 0 || h.permits != 0) {
      o["slot"] = h.slot;
      o["permits"] = h.permits;
    }
    body += json::serialize(o);
    body += '\n';
  }
  auto res = make_response(200, std::move(body), v, ka, "application/x-ndjson");
  // A checker must know when the oldest writes are missing rather than assume the history is complete.
  res.set("History-Dropped", std::to_string(dropped));
  return res;
}

}  // namespace

response error_response(unsigned status, std::string_view code, std::string_view message, unsigned version,
                        bool keep_alive) {
  json::object o;
  o["error"] = code;
  o["message"] = message;
  return make_response(status, json::serialize(o), version, keep_alive);
}

response handle(item_store& store, const request& req) {
  const unsigned v = req.version();
  const bool ka = req.keep_alive();
  auto parsed = parse_target(req.target());
  if (auto* e = std::get_if<api_error>(&parsed)) return error_response(e->status, e->code, e->message, v, ka);
  const auto& t = std::get<target>(parsed);

  const bool is_get = req.method() == http::verb::get;
  const bool allowed = is_get || (t.what == route::items && req.method() == http::verb::put);
  if (!allowed) {
    const char* allow = t.what == route::items ? "GET, PUT" : "GET";
    auto res = error_response(405, "method_not_allowed",
                              "use " + std::string(allow) + " for " + std::string(req.target()), v, ka);
    res.set(http::field::allow, allow);
    return res;
  }

  switch (t.what) {
    case route::items:
      return is_get ? get_item(store, t.key, v, ka) : put_item(store, req, t.key, ka);
    case route::fences:
      return get_fences(store, v, ka);
    case route::history:
      return get_history(store, v, ka);
    case route::healthz:
      return make_response(200, R"({"status":"ok"})", v, ka);
  }
  return error_response(500, "internal", "unhandled route", v, ka);
}

}  // namespace fenced_store
