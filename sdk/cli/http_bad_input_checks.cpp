// SPDX-License-Identifier: Apache-2.0
// `baton conformance` over HTTP: bad inputs are answered with the documented error, and the server still
// serves after them.

#include "http_checks.hpp"

namespace baton::cli::http_conformance {
namespace {

void malformed_json(const suite& s) {
  suite::expect_error(
      bad(s, http::verb::post, suite::path(s.key("bad-json"), "/acquire"), R"({"owner":"x","ttl_ms":)"), 400,
      "bad_request", "truncated JSON");
  suite::expect_error(bad(s, http::verb::post, suite::path(s.key("bad-json"), "/acquire"), "[1,2,3]"), 400,
                      "bad_request", "a JSON array instead of an object");
}

void missing_field(const suite& s) {
  const auto key = s.key("missing-field");
  suite::expect_error(bad(s, http::verb::post, suite::path(key, "/acquire"), R"({"ttl_ms":1000})"), 400,
                      "bad_request", "acquire without owner");
  suite::expect_error(bad(s, http::verb::post, suite::path(key, "/acquire"), R"({"owner":"x"})"), 400,
                      "bad_request", "acquire without ttl_ms");
  suite::expect_error(bad(s, http::verb::post, suite::path(key, "/renew"), R"({"owner":"x","ttl_ms":1000})"),
                      400, "bad_request", "renew without token");
}

void ttl_out_of_range(const suite& s) {
  const auto key = s.key("ttl-range");
  suite::expect_error(bad(s, http::verb::post, suite::path(key, "/acquire"), R"({"owner":"x","ttl_ms":0})"),
                      400, "bad_request", "acquire with ttl_ms 0");
  suite::expect_error(
      bad(s, http::verb::post, suite::path(key, "/acquire"), R"({"owner":"x","ttl_ms":-1000})"), 400,
      "bad_request", "acquire with ttl_ms -1000");
  auto c = s.open();
  suite::expect_error(s.get(c, key), 404, "not_held", "GET after the refused acquires (nothing may change)");
}

void unknown_route(const suite& s) {
  suite::expect_error(bad(s, http::verb::get, "/v1/no-such-route"), 404, "not_found",
                      "GET /v1/no-such-route");
  suite::expect_error(bad(s, http::verb::post, suite::path(s.key("route"), "/frobnicate"), "{}"), 404,
                      "not_found", "POST /v1/locks/{key}/frobnicate");
}

void wrong_method(const suite& s) {
  auto r = bad(s, http::verb::get, suite::path(s.key("method"), "/acquire"));
  suite::expect_error(r, 405, "method_not_allowed", "GET on the acquire route");
  expect(r.allow.find("POST") != std::string::npos,
         "405 without an Allow header naming POST: Allow: " + r.allow);
}

void body_too_large(const suite& s) {
  const auto key = s.key("large-body");
  std::string body = R"({"owner":"x","ttl_ms":1000,"pad":")" + std::string(70 * 1024, 'a') + "\"}";
  auto r = bad(s, http::verb::post, suite::path(key, "/acquire"), std::move(body));
  suite::expect_error(r, 413, "body_too_large", "a 70 KiB acquire body");
  auto c = s.open();
  suite::expect_error(s.get(c, key), 404, "not_held", "GET after the refused acquire (nothing may change)");
}

void still_serves(const suite& s) {
  auto c = s.open();
  auto h = c.request(http::verb::get, "/healthz", {}, s.timeout());
  expect(h.status == 200 && h.str("status") == "ok",
         "GET /healthz: expected 200 {\"status\":\"ok\"}, got " + h.describe());
  const auto key = s.key("still-serves");
  auto a = s.must_acquire(c, key, "owner-a", 30'000);
  auto r = s.release(c, key, "owner-a", a.token());
  expect(r.status == 200, "release: expected 200, got " + r.describe());
}

constexpr check group[] = {
    {"malformed JSON is 400 bad_request", malformed_json},
    {"missing field is 400 bad_request", missing_field},
    {"ttl out of range is 400 bad_request", ttl_out_of_range},
    {"unknown route is 404 not_found", unknown_route},
    {"wrong method is 405 method_not_allowed", wrong_method},
    {"body over 64 KiB is 413 body_too_large", body_too_large},
    {"server still serves after bad inputs", still_serves},
};

}  // namespace

std::span<const check> bad_input_checks() {
  return group;
}

}  // namespace baton::cli::http_conformance
