// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE protocol
#include <boost/test/unit_test.hpp>

#include "protocol.hpp"

#include <string>
#include <vector>

using namespace baton::server;
using namespace std::chrono_literals;
using kind = lock_target::kind;

namespace {
const ttl_bounds bounds{};

lock_target target_ok(std::string_view t) {
  auto r = parse_target(t);
  BOOST_REQUIRE_MESSAGE(std::holds_alternative<lock_target>(r), t);
  return std::get<lock_target>(r);
}
api_error target_err(std::string_view t) {
  auto r = parse_target(t);
  BOOST_REQUIRE_MESSAGE(std::holds_alternative<api_error>(r), t);
  return std::get<api_error>(r);
}
template <class R>
api_error err(const R& r) {
  BOOST_REQUIRE(std::holds_alternative<api_error>(r));
  return std::get<api_error>(r);
}
using any_request = std::variant<acquire_request, renew_request, release_request, api_error>;
template <class R>
any_request to_any(std::variant<R, api_error> r) {
  return std::visit([](auto&& x) -> any_request { return std::move(x); }, std::move(r));
}
}  // namespace

BOOST_AUTO_TEST_CASE(targets_route_to_operations_and_decode_the_key) {
  BOOST_TEST((target_ok("/v1/locks/jobs/acquire").what == kind::acquire));
  BOOST_TEST(target_ok("/v1/locks/jobs/acquire").key == "jobs");
  BOOST_TEST((target_ok("/v1/locks/jobs/renew").what == kind::renew));
  BOOST_TEST((target_ok("/v1/locks/jobs/release").what == kind::release));
  BOOST_TEST((target_ok("/v1/locks/a%2Fb").what == kind::get));
  BOOST_TEST(target_ok("/v1/locks/a%2Fb").key == "a/b");
  BOOST_TEST(target_ok("/v1/locks/caf%C3%A9/acquire").key == "caf\xC3\xA9");
  BOOST_TEST((target_ok("/healthz").what == kind::healthz));
  BOOST_TEST((target_ok("/metrics").what == kind::metrics));
}

BOOST_AUTO_TEST_CASE(long_poll_parameters_are_parsed_and_clamped) {
  auto t = target_ok("/v1/locks/k?wait_ms=5000&token=7");
  BOOST_TEST(*t.wait_ms == 5000u);
  BOOST_TEST(*t.token == 7u);
  BOOST_TEST(*target_ok("/v1/locks/k?wait_ms=999999999").wait_ms == max_wait_ms);
  BOOST_TEST(!target_ok("/v1/locks/k").wait_ms.has_value());
  BOOST_TEST(target_err("/v1/locks/k?wait_ms=-1").status == 400);
  BOOST_TEST(target_err("/v1/locks/k?wait_ms=abc").status == 400);
  BOOST_TEST(target_err("/v1/locks/k?wait_ms=1&token=x").status == 400);
}

BOOST_AUTO_TEST_CASE(a_queued_acquire_reads_only_its_wait_and_clamps_it) {
  auto t = target_ok("/v1/locks/k/acquire?wait_ms=5000&token=x&value=y");
  BOOST_TEST((t.what == kind::acquire));
  BOOST_TEST(*t.wait_ms == 5000u);
  BOOST_TEST(!t.token.has_value());  // the long-poll's parameters mean nothing here: ignored
  BOOST_TEST(!t.value.has_value());
  BOOST_TEST(*target_ok("/v1/locks/k/acquire?wait_ms=999999999").wait_ms == max_wait_ms);
  BOOST_TEST(!target_ok("/v1/locks/k/acquire").wait_ms.has_value());
  BOOST_TEST(target_err("/v1/locks/k/acquire?wait_ms=soon").status == 400);
  BOOST_TEST(target_err("/v1/locks/k/acquire?wait_ms=1&wait_ms=2").status == 400);
  BOOST_TEST(!target_ok("/v1/locks/k/renew?wait_ms=5000").wait_ms.has_value());  // other routes ignore it
}

BOOST_AUTO_TEST_CASE(bad_keys_and_unknown_routes_are_refused) {
  BOOST_TEST(target_err("/v1/locks//acquire").status == 400);
  BOOST_TEST(target_err("/v1/locks/a%01b/acquire").status == 400);
  BOOST_TEST(target_err("/v1/locks/" + std::string(513, 'k') + "/acquire").status == 400);
  BOOST_TEST(target_ok("/v1/locks/" + std::string(512, 'k') + "/acquire").key.size() == 512u);
  // Keys travel back in JSON strings: they must be valid UTF-8 (no stray, overlong or surrogate forms).
  BOOST_TEST(target_err("/v1/locks/%FF/acquire").status == 400);
  BOOST_TEST(target_err("/v1/locks/caf%C3/acquire").status == 400);
  BOOST_TEST(target_err("/v1/locks/%C0%AF/acquire").status == 400);
  BOOST_TEST(target_err("/v1/locks/%ED%A0%80/acquire").status == 400);
  BOOST_TEST(target_err("/v1/locks/%F4%90%80%80/acquire").status == 400);
  BOOST_TEST(target_ok("/v1/locks/%F0%9F%94%92/acquire").key == "\xF0\x9F\x94\x92");
  BOOST_TEST(target_ok("/v1/locks/%E2%82%AC").key == "\xE2\x82\xAC");
  BOOST_TEST(target_err("/v1/locks/k/steal").status == 404);
  BOOST_TEST(target_err("/v2/locks/k/acquire").status == 404);
  BOOST_TEST(target_err("/").status == 404);
  BOOST_TEST(target_err("/v1/locks/k/acquire/x").status == 404);
  BOOST_TEST(target_err("/v1/locks/%zz/acquire").status == 400);
  BOOST_TEST(target_err("not-a-path").status == 400);
}

BOOST_AUTO_TEST_CASE(acquire_body_is_validated_field_by_field) {
  auto ok = std::get<acquire_request>(parse_acquire(R"({"owner":"w","ttl_ms":1000,"extra":[1]})", bounds));
  BOOST_TEST(ok.owner == "w");
  BOOST_TEST(ok.ttl.count() == 1000);
  for (const char* body :
       {"", "{", "[]", "null", R"({"ttl_ms":1000})", R"({"owner":"w"})", R"({"owner":5,"ttl_ms":1000})",
        R"({"owner":"","ttl_ms":1000})", R"({"owner":"w","ttl_ms":"1000"})", R"({"owner":"w","ttl_ms":99})",
        R"({"owner":"w","ttl_ms":3600001})", R"({"owner":"w","ttl_ms":1000.5})",
        R"({"owner":"w","ttl_ms":-5})", R"({"owner":"a\u0000b","ttl_ms":1000})",
        R"({"owner":"w","ttl_ms":true})"}) {
    auto e = err(parse_acquire(body, bounds));
    BOOST_TEST(e.status == 400, body);
    BOOST_TEST(e.code == "bad_request");
    BOOST_TEST(!e.message.empty());
  }
  std::string long_owner = R"({"owner":")" + std::string(257, 'o') + R"(","ttl_ms":1000})";
  BOOST_TEST(err(parse_acquire(long_owner, bounds)).status == 400);
}

BOOST_AUTO_TEST_CASE(renew_and_release_require_a_positive_integer_token) {
  auto r = std::get<renew_request>(parse_renew(R"({"owner":"w","token":9,"ttl_ms":500})", bounds));
  BOOST_TEST(r.token == 9u);
  BOOST_TEST(err(parse_renew(R"({"owner":"w","token":0,"ttl_ms":500})", bounds)).status == 400);
  BOOST_TEST(err(parse_renew(R"({"owner":"w","ttl_ms":500})", bounds)).status == 400);
  BOOST_TEST(err(parse_renew(R"({"owner":"w","token":1})", bounds)).status == 400);
  auto rel = std::get<release_request>(parse_release(R"({"owner":"w","token":18446744073709551})"));
  BOOST_TEST(rel.token == 18446744073709551u);
  BOOST_TEST(err(parse_release(R"({"owner":"w","token":18446744073709551615})")).status == 400);
  BOOST_TEST(err(parse_release(R"({"owner":"w","token":"1"})")).status == 400);
}

BOOST_AUTO_TEST_CASE(a_field_named_twice_is_refused_whichever_copy_would_win) {
  // Every route that takes a body. Last-one-wins would make the first two acquires owner "b".
  std::vector<std::pair<std::string, any_request>> cases;
  auto add = [&](std::string body, std::string field, auto parse) { cases.emplace_back(field, parse(body)); };
  auto acquire = [](const std::string& b) { return to_any(parse_acquire(b, bounds)); };
  auto renew = [](const std::string& b) { return to_any(parse_renew(b, bounds)); };
  auto release = [](const std::string& b) { return to_any(parse_release(b)); };
  add(R"({"key":"k","owner":"a","owner":"b","ttl_ms":1000})", "owner", acquire);
  add(R"({"owner":"a","ttl_ms":1000,"owner":"b"})", "owner", acquire);
  add(R"({"owner":"a","ttl_ms":1000,"ttl_ms":1000})", "ttl_ms", acquire);
  add(R"({"owner":"a","token":1,"token":2,"ttl_ms":1000})", "token", renew);
  add(R"({"owner":"a","owner":"a","token":1,"ttl_ms":1000})", "owner", renew);
  add(R"({"owner":"a","token":1,"ttl_ms":500,"ttl_ms":60000})", "ttl_ms", renew);
  add(R"({"owner":"a","token":1,"token":2})", "token", release);
  add(R"({"owner":"b","owner":"a","token":1})", "owner", release);
  // Compared after unescaping: the same name spelt two ways is still the same member.
  add(R"({"owner":"a","\u006fwner":"b","ttl_ms":1000})", "owner", acquire);
  // In fields batond ignores, and in nested objects, too: the body has no single meaning either way.
  add(R"({"owner":"a","ttl_ms":1000,"extra":1,"extra":2})", "extra", acquire);
  add(R"({"owner":"a","token":1,"meta":{"x":1,"x":2}})", "x", release);
  add(R"({"owner":"a","token":1,"ttl_ms":1000,"list":[{"y":1},{"y":2,"y":3}]})", "y", renew);
  for (const auto& [field, result] : cases) {
    auto e = err(result);
    BOOST_TEST(e.status == 400);
    BOOST_TEST(e.code == "bad_request");
    BOOST_TEST(e.message.find("\"" + field + "\"") != std::string::npos, e.message);
    BOOST_TEST(e.message.find("more than once") != std::string::npos, e.message);
  }
}

BOOST_AUTO_TEST_CASE(the_same_name_in_different_objects_is_not_a_duplicate) {
  auto ok = std::get<acquire_request>(parse_acquire(
      R"({"owner":"w","ttl_ms":1000,"a":{"owner":"x","ttl_ms":5},"b":[{"k":1},{"k":2}]})", bounds));
  BOOST_TEST(ok.owner == "w");
  BOOST_TEST(ok.ttl.count() == 1000);
  // A name that arrives in several parts (escapes split it) is compared whole.
  auto r = std::get<release_request>(parse_release(R"({"own\u0065r":"w","token":3,"owne":1,"ownerx":2})"));
  BOOST_TEST(r.owner == "w");
  BOOST_TEST(r.token == 3u);
  // Malformed JSON is still reported as such.
  BOOST_TEST(err(parse_release(R"({"owner":"w","token":3} x)")).message.find("not valid JSON") !=
             std::string::npos);
  BOOST_TEST(err(parse_release(R"({"owner":"w","token":3)")).message.find("not valid JSON") !=
             std::string::npos);
}

BOOST_AUTO_TEST_CASE(error_body_is_json_with_code_and_message) {
  BOOST_TEST(error_body("bad_request", "say \"why\"") ==
             R"({"error":"bad_request","message":"say \"why\""})");
}

BOOST_AUTO_TEST_CASE(one_parse_of_a_target_gives_what_parse_route_and_parse_target_give) {
  for (std::string_view t :
       {"/v1/locks/a%2Fb/acquire", "/v1/locks/jobs?wait_ms=70000&token=3", "/v1/locks/%FF",
        "/v1/locks//renew", "/v1/locks/k?wait_ms=x", "/v1/locks/k/steal", "/healthz", "/v1/renew",
        "/v1/capabilities", "http://h/v1/locks/k", "/v1/locks/k?token=1&token=2"}) {
    BOOST_TEST_CONTEXT(t) {
      auto both = parse_request_target(t);
      auto route = parse_route(t);
      auto target = parse_target(t);
      BOOST_TEST(both.route.index() == route.index());
      BOOST_TEST(both.target.index() == target.index());
      if (auto* k = std::get_if<lock_target::kind>(&route))
        BOOST_TEST((std::get<lock_target::kind>(both.route) == *k));
      else
        BOOST_TEST(std::get<api_error>(both.route).message == std::get<api_error>(route).message);
      if (auto* x = std::get_if<lock_target>(&target)) {
        const auto& y = std::get<lock_target>(both.target);
        BOOST_TEST((y.what == x->what && y.key == x->key && y.wait_ms == x->wait_ms && y.token == x->token));
      } else {
        BOOST_TEST(std::get<api_error>(both.target).status == std::get<api_error>(target).status);
        BOOST_TEST(std::get<api_error>(both.target).message == std::get<api_error>(target).message);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(error_body_escapes_what_it_quotes) {
  BOOST_TEST(error_body("bad_request", std::string("got \"a\tb\x01\"")) ==
             R"({"error":"bad_request","message":"got \"a\tb\u0001\""})");
}

BOOST_AUTO_TEST_CASE(loopback_hosts_are_localhost_127_x_and_ipv6_one_with_any_port) {
  for (std::string_view ok : {"localhost", "LocalHost:7070", "127.0.0.1", "127.0.0.1:80", "127.1.2.3:65535",
                              "[::1]", "[::1]:7070", " 127.0.0.1 "})
    BOOST_TEST(is_loopback_host(ok), ok);
  for (std::string_view bad : {"", "evil.example", "evil.example:7070", "localhost.evil.example", "128.0.0.1",
                               "127.0.0", "127.0.0.1.5", "127.0.0.256", "127.0.0.1:", "127.0.0.1:x", "[::1",
                               "[::2]:80", "[::1]7070", "0.0.0.0", "10.0.0.1", "127.0.0.1:80:80"})
    BOOST_TEST(!is_loopback_host(bad), bad);
}

BOOST_AUTO_TEST_CASE(json_content_type_allows_parameters_and_any_case_only) {
  BOOST_TEST(is_json_content_type("application/json"));
  BOOST_TEST(is_json_content_type("Application/JSON; charset=utf-8"));
  BOOST_TEST(is_json_content_type(" application/json ;charset=utf-8"));
  BOOST_TEST(!is_json_content_type(""));
  BOOST_TEST(!is_json_content_type("text/plain"));
  BOOST_TEST(!is_json_content_type("application/x-www-form-urlencoded"));
  BOOST_TEST(!is_json_content_type("application/jsonx"));
  BOOST_TEST(!is_json_content_type("multipart/form-data; boundary=application/json"));
}

BOOST_AUTO_TEST_CASE(acquire_value_is_optional_bounded_and_free_of_control_characters) {
  BOOST_TEST(
      std::get<acquire_request>(parse_acquire(R"({"owner":"w","ttl_ms":1000})", bounds)).value.empty());
  BOOST_TEST(std::get<acquire_request>(parse_acquire(R"({"owner":"w","ttl_ms":1000,"value":""})", bounds))
                 .value.empty());
  auto ok = std::get<acquire_request>(
      parse_acquire(R"({"owner":"w","ttl_ms":1000,"value":"10.0.0.7:8080 \u00e9"})", bounds));
  BOOST_TEST(ok.value == "10.0.0.7:8080 \xc3\xa9");
  std::string longest =
      R"({"owner":"w","ttl_ms":1000,"value":")" + std::string(max_value_bytes, 'v') + R"("})";
  BOOST_TEST(std::get<acquire_request>(parse_acquire(longest, bounds)).value.size() == max_value_bytes);
  std::string too_long =
      R"({"owner":"w","ttl_ms":1000,"value":")" + std::string(max_value_bytes + 1, 'v') + R"("})";
  for (const std::string& body : {too_long, std::string(R"({"owner":"w","ttl_ms":1000,"value":5})"),
                                  std::string(R"({"owner":"w","ttl_ms":1000,"value":null})"),
                                  std::string(R"({"owner":"w","ttl_ms":1000,"value":"a\nb"})"),
                                  std::string(R"({"owner":"w","ttl_ms":1000,"value":"a\u007fb"})"),
                                  std::string("{\"owner\":\"w\",\"ttl_ms\":1000,\"value\":\"\xff\"}"),
                                  std::string(R"({"owner":"w","ttl_ms":1000,"value":"a","value":"b"})")}) {
    auto e = err(parse_acquire(body, bounds));
    BOOST_TEST(e.status == 400, body);
    BOOST_TEST((e.message.find("value") != std::string::npos || e.message.find("JSON") != std::string::npos),
               e.message);
  }
}

BOOST_AUTO_TEST_CASE(the_route_is_decided_by_the_path_alone_before_the_key_and_query) {
  auto route = [](std::string_view t) { return parse_route(t); };
  BOOST_TEST((std::get<kind>(route("/v1/locks/%00/acquire")) == kind::acquire));  // the bad key comes later
  BOOST_TEST((std::get<kind>(route("/v1/locks//release")) == kind::release));
  BOOST_TEST((std::get<kind>(route("/v1/locks/k?wait_ms=soon")) == kind::get));
  BOOST_TEST((std::get<kind>(route("/v1/capabilities")) == kind::capabilities));
  BOOST_TEST(std::get<api_error>(route("/v1/locks/%00/steal")).status == 404);
  BOOST_TEST(std::get<api_error>(route("/v1/locks/a/b/acquire")).status == 404);  // a raw '/' in a key
  BOOST_TEST(std::get<api_error>(route("/v1/capabilities/x")).status == 404);
  BOOST_TEST(std::get<api_error>(route("/v1/locks/%zz")).status == 400);
  // parse_target answers in the same order: an unknown route is 404 even with a bad key.
  BOOST_TEST(target_err("/v1/locks/%00/steal").status == 404);
  BOOST_TEST((target_ok("/v1/capabilities").what == kind::capabilities));
  BOOST_TEST(method_for(kind::capabilities) == "GET");
}

BOOST_AUTO_TEST_CASE(a_long_poll_parameter_given_twice_is_refused_and_unknown_ones_are_ignored) {
  BOOST_TEST(target_err("/v1/locks/k?wait_ms=1&wait_ms=1").status == 400);
  BOOST_TEST(target_err("/v1/locks/k?token=1&wait_ms=5&token=2").status == 400);
  auto t = target_ok("/v1/locks/k?colour=blue&colour=red&wait_ms=0&token=0");
  BOOST_TEST(*t.wait_ms == 0u);
  BOOST_TEST(*t.token == 0u);
  // `token` alone is read (and checked) but makes no long-poll.
  BOOST_TEST(!target_ok("/v1/locks/k?token=9").wait_ms.has_value());
  BOOST_TEST(target_err("/v1/locks/k?token=x").status == 400);
  BOOST_TEST(target_err("/v1/locks/k?wait_ms").status == 400);
  BOOST_TEST(target_err("/v1/locks/k?wait_ms=").status == 400);
  BOOST_TEST(target_err("/v1/locks/k?wait_ms=18446744073709551616").status == 400);
}

BOOST_AUTO_TEST_CASE(control_characters_are_unicodes_c0_del_and_c1) {
  auto owner = [](std::string_view o) {
    return to_any(parse_acquire(R"({"owner":")" + std::string(o) + R"(","ttl_ms":1000})", bounds));
  };
  for (std::string_view bad : {"\\u0000", "\\u001f", "\\u007f", "\\u0080", "\\u0085", "\\u009f", "\xc2\x9b"})
    BOOST_TEST(err(owner(bad)).status == 400, bad);
  for (std::string_view fine : {"\\u00a0", "\\u2028", "\\u2029", "\\u202e", "\xc2\xa0", "\xe2\x80\xa8"})
    BOOST_TEST(std::holds_alternative<acquire_request>(owner(fine)), fine);
  // A lone surrogate is no character at all: the JSON is refused before any field is read.
  BOOST_TEST(err(owner("\\ud800")).status == 400);
  BOOST_TEST(err(owner("\\udc00x")).status == 400);
  BOOST_TEST(target_err("/v1/locks/a%C2%85b").status == 400);
  BOOST_TEST(target_ok("/v1/locks/a%E2%80%A8b").key ==
             "a\xe2\x80\xa8"
             "b");
  BOOST_TEST(err(to_any(parse_acquire(R"({"owner":"o","ttl_ms":1000,"value":"v\u0085"})", bounds))).status ==
             400);
}

BOOST_AUTO_TEST_CASE(capabilities_are_protocol_1_with_its_optional_features_and_limits) {
  BOOST_TEST(
      capabilities_body(8192, 60s, 250) ==
      R"({"protocol_version":1,"features":["lease_values","renew_batch","proclaim","lock_record",)"
      R"("acquire_queue","list_locks","break_lease","lock_delay","semaphores"],"lock_delay_max_ms":60000,)"
      R"("permits_max":250,"renew_batch_max":1000,"max_body_bytes":8192,"record_max_bytes":65536,)"
      R"("list_max":1000})");
}

BOOST_AUTO_TEST_CASE(an_acquire_reads_an_optional_permit_count_within_the_servers_maximum) {
  auto permits_of = [](const std::string& body, const ttl_bounds& b) {
    return std::get<acquire_request>(parse_acquire(body, b)).permits;
  };
  BOOST_TEST(!permits_of(R"({"owner":"w","ttl_ms":1000})", bounds));
  BOOST_TEST(*permits_of(R"({"owner":"w","ttl_ms":1000,"permits":1})", bounds) == 1u);
  BOOST_TEST(*permits_of(R"({"owner":"w","ttl_ms":1000,"permits":3})", bounds) == 3u);
  BOOST_TEST(*permits_of(R"({"owner":"w","ttl_ms":1000,"permits":1000})", bounds) == 1000u);
  ttl_bounds narrow = bounds;
  narrow.max_permits = 7;
  BOOST_TEST(*permits_of(R"({"owner":"w","ttl_ms":1000,"permits":7})", narrow) == 7u);
  // Over the bound: refused, naming the bound and where a client reads it.
  auto over = err(parse_acquire(R"({"owner":"w","ttl_ms":1000,"permits":8})", narrow));
  BOOST_TEST(over.status == 400);
  BOOST_TEST(over.message.find("from 1 to 7") != std::string::npos);
  BOOST_TEST(over.message.find("permits_max") != std::string::npos);
  for (const char* bad :
       {R"({"owner":"w","ttl_ms":1000,"permits":0})", R"({"owner":"w","ttl_ms":1000,"permits":-1})",
        R"({"owner":"w","ttl_ms":1000,"permits":1.5})", R"({"owner":"w","ttl_ms":1000,"permits":"3"})",
        R"({"owner":"w","ttl_ms":1000,"permits":null})", R"({"owner":"w","ttl_ms":1000,"permits":1001})",
        R"({"owner":"w","ttl_ms":1000,"permits":18446744073709551616})"}) {
    auto e = err(parse_acquire(bad, bounds));
    BOOST_TEST(e.status == 400, bad);
    BOOST_TEST(e.message.find("\"permits\"") != std::string::npos, bad);
  }
}

BOOST_AUTO_TEST_CASE(a_server_that_allows_no_lock_delay_does_not_claim_the_feature) {
  BOOST_TEST(capabilities_body(8192, 0s) ==
             R"({"protocol_version":1,"features":["lease_values","renew_batch","proclaim","lock_record",)"
             R"("acquire_queue","list_locks","break_lease","semaphores"],"lock_delay_max_ms":0,)"
             R"("permits_max":1000,"renew_batch_max":1000,"max_body_bytes":8192,"record_max_bytes":65536,)"
             R"("list_max":1000})");
}

BOOST_AUTO_TEST_CASE(an_acquire_reads_an_optional_lock_delay_within_the_servers_maximum) {
  auto delay_of = [](const std::string& body) {
    return std::get<acquire_request>(parse_acquire(body, bounds)).lock_delay.count();
  };
  BOOST_TEST(delay_of(R"({"owner":"w","ttl_ms":1000})") == 0);
  BOOST_TEST(delay_of(R"({"owner":"w","ttl_ms":1000,"lock_delay_ms":0})") == 0);
  BOOST_TEST(delay_of(R"({"owner":"w","ttl_ms":1000,"lock_delay_ms":5000})") == 5000);
  BOOST_TEST(delay_of(R"({"owner":"w","ttl_ms":1000,"lock_delay_ms":60000})") == 60000);
  // Over the bound: refused, naming the bound, not clamped.
  auto over = err(parse_acquire(R"({"owner":"w","ttl_ms":1000,"lock_delay_ms":60001})", bounds));
  BOOST_TEST(over.status == 400);
  BOOST_TEST(over.message.find("from 0 to 60000") != std::string::npos);
  BOOST_TEST(over.message.find("lock_delay_max_ms") != std::string::npos);
  const ttl_bounds tight{100ms, 3'600'000ms, 500ms};
  BOOST_TEST(err(parse_acquire(R"({"owner":"w","ttl_ms":1000,"lock_delay_ms":501})", tight))
                 .message.find("from 0 to 500") != std::string::npos);
  for (const char* bad : {R"({"owner":"w","ttl_ms":1000,"lock_delay_ms":-1})",
                          R"({"owner":"w","ttl_ms":1000,"lock_delay_ms":1.5})",
                          R"({"owner":"w","ttl_ms":1000,"lock_delay_ms":"5s"})",
                          R"({"owner":"w","ttl_ms":1000,"lock_delay_ms":null})",
                          R"({"owner":"w","ttl_ms":1000,"lock_delay_ms":18446744073709551616})"})
    BOOST_TEST(err(parse_acquire(bad, bounds)).status == 400, bad);
}

BOOST_AUTO_TEST_CASE(a_listing_reads_prefix_cursor_and_limit_from_its_query) {
  BOOST_TEST((std::get<kind>(parse_route("/v1/locks")) == kind::list));
  BOOST_TEST(method_for(kind::list) == "GET");
  auto all = target_ok("/v1/locks");
  BOOST_TEST(all.key.empty());
  BOOST_TEST(!all.after.has_value());
  BOOST_TEST(!all.limit.has_value());
  auto t = target_ok("/v1/locks?prefix=jobs%2F&after=jobs%2Fb&limit=1000&colour=red");
  BOOST_TEST(t.key == "jobs/");
  BOOST_TEST(*t.after == "jobs/b");
  BOOST_TEST(*t.limit == 1000u);
  BOOST_TEST(target_ok("/v1/locks?prefix=&after=").key.empty());
}

BOOST_AUTO_TEST_CASE(a_bad_listing_query_is_refused_with_400) {
  for (std::string_view bad :
       {"/v1/locks?limit=0", "/v1/locks?limit=1001", "/v1/locks?limit=-1", "/v1/locks?limit=ten",
        "/v1/locks?limit", "/v1/locks?limit=1&limit=2", "/v1/locks?prefix=a&prefix=b",
        "/v1/locks?after=a&after=b", "/v1/locks?prefix=a%00", "/v1/locks?after=%C3",
        "/v1/locks?limit=18446744073709551617"}) {
    auto e = target_err(bad);
    BOOST_TEST(e.status == 400, bad);
    BOOST_TEST(e.code == "bad_request", bad);
  }
  std::string long_prefix = "/v1/locks?prefix=" + std::string(513, 'a');
  BOOST_TEST(target_err(long_prefix).status == 400);
}

BOOST_AUTO_TEST_CASE(a_break_names_its_key_in_the_path_and_maybe_a_token_in_its_body) {
  BOOST_TEST((target_ok("/v1/locks/a%2Fb/break").what == kind::break_lease));
  BOOST_TEST(target_ok("/v1/locks/a%2Fb/break").key == "a/b");
  BOOST_TEST(method_for(kind::break_lease) == "POST");
  BOOST_TEST(target_err("/v1/locks//break").status == 400);
  BOOST_TEST(!std::get<break_request>(parse_break("{}")).token.has_value());
  BOOST_TEST(*std::get<break_request>(parse_break(R"({"token":7})")).token == 7u);
  for (std::string_view bad : {"", "[]", R"({"token":0})", R"({"token":"7"})", R"({"token":1.5})",
                               R"({"token":-1})", R"({"token":1,"token":2})", "{"})
    BOOST_TEST(err(parse_break(bad)).status == 400, bad);
}

namespace {
std::string entry(std::string_view key, std::string_view rest = R"("owner":"o","token":1,"ttl_ms":1000)") {
  return R"({"key":")" + std::string(key) + R"(",)" + std::string(rest) + "}";
}
std::string batch(std::initializer_list<std::string> entries) {
  std::string s = R"({"leases":[)";
  for (const auto& e : entries)
    s += (s.back() == '[' ? "" : ",") + e;
  return s + "]}";
}
api_error batch_err(const std::string& body) {
  auto r = parse_renew_batch(body, bounds);
  BOOST_REQUIRE_MESSAGE(std::holds_alternative<api_error>(r), body);
  return std::get<api_error>(r);
}
}  // namespace

BOOST_AUTO_TEST_CASE(the_batch_route_is_post_v1_renew_with_no_key) {
  BOOST_TEST((std::get<kind>(parse_route("/v1/renew")) == kind::renew_batch));
  BOOST_TEST((target_ok("/v1/renew?x=1").what == kind::renew_batch));
  BOOST_TEST(target_ok("/v1/renew").key.empty());
  BOOST_TEST(method_for(kind::renew_batch) == "POST");
  BOOST_TEST(target_err("/v1/renew/k").status == 404);
}

BOOST_AUTO_TEST_CASE(a_batch_is_parsed_in_order_with_each_entrys_own_condition_and_ttl) {
  auto r = parse_renew_batch(batch({entry("a/b", R"("owner":"x","token":7,"ttl_ms":100)"),
                                    entry("caf\\u00e9", R"("owner":"y","token":9223372036854775807,)"
                                                        R"("ttl_ms":3600000,"unknown":[1,{}])")}),
                             bounds);
  BOOST_REQUIRE(std::holds_alternative<renew_batch_request>(r));
  const auto& l = std::get<renew_batch_request>(r).leases;
  BOOST_REQUIRE(l.size() == 2u);
  BOOST_TEST(l[0].key == "a/b");  // a key in a body is not percent-encoded: '/' is itself
  BOOST_TEST(l[0].owner == "x");
  BOOST_TEST(l[0].token == 7u);
  BOOST_TEST(l[0].ttl.count() == 100);
  BOOST_TEST(l[1].key == "caf\xC3\xA9");
  BOOST_TEST(l[1].token == 9223372036854775807u);
  BOOST_TEST(l[1].ttl.count() == 3'600'000);
}

BOOST_AUTO_TEST_CASE(a_batch_with_any_malformed_entry_is_refused_as_a_whole_naming_the_entry) {
  const auto good = entry("fine");
  const std::vector<std::pair<std::string, std::string>> bad{
      {entry(""), "key"},
      {entry(std::string(513, 'k')), "key"},
      {entry("a\\u0001"), "key"},
      {entry("a\\u0085"), "key"},
      {R"({"owner":"o","token":1,"ttl_ms":1000})", "key"},
      {R"({"key":5,"owner":"o","token":1,"ttl_ms":1000})", "key"},
      {entry("k", R"("token":1,"ttl_ms":1000)"), "owner"},
      {entry("k", R"("owner":"","token":1,"ttl_ms":1000)"), "owner"},
      {entry("k", R"("owner":"o","token":0,"ttl_ms":1000)"), "token"},
      {entry("k", R"("owner":"o","token":"1","ttl_ms":1000)"), "token"},
      {entry("k", R"("owner":"o","token":9223372036854775808,"ttl_ms":1000)"), "token"},
      {entry("k", R"("owner":"o","token":1,"ttl_ms":99)"), "ttl_ms"},
      {entry("k", R"("owner":"o","token":1,"ttl_ms":3600001)"), "ttl_ms"},
      {entry("k", R"("owner":"o","token":1,"ttl_ms":1000.0)"), "ttl_ms"},
      {"[]", "object"},
      {"7", "object"},
  };
  for (const auto& [e, what] : bad) {
    auto error = batch_err(batch({good, e}));
    BOOST_TEST(error.status == 400, e);
    BOOST_TEST(error.message.find("leases[1]") != std::string::npos, error.message);
    BOOST_TEST(error.message.find(what) != std::string::npos, error.message);
  }
}

BOOST_AUTO_TEST_CASE(a_batch_must_hold_1_to_the_maximum_of_entries_and_no_key_and_token_twice) {
  BOOST_TEST(batch_err(R"({"leases":[]})").status == 400);
  BOOST_TEST(batch_err(R"({})").message.find("leases") != std::string::npos);
  BOOST_TEST(batch_err(R"({"leases":{}})").status == 400);
  BOOST_TEST(batch_err(R"({"leases":null})").status == 400);
  BOOST_TEST(batch_err(R"([])").status == 400);
  BOOST_TEST(batch_err("").status == 400);
  BOOST_TEST(batch_err(R"({"leases":[)").status == 400);
  // A member named twice, in an entry or at the top, as in any body.
  BOOST_TEST(batch_err(batch({R"({"key":"a","key":"b","owner":"o","token":1,"ttl_ms":1000})"})).status ==
             400);
  BOOST_TEST(batch_err(R"({"leases":[],"leases":[)" + entry("a") + "]}").status == 400);
  // The same lease twice (key and token), whatever the other fields say: refused, naming the second entry.
  auto twice =
      batch_err(batch({entry("a"), entry("b"), entry("a", R"("owner":"p","token":1,"ttl_ms":2000)")}));
  BOOST_TEST(twice.message.find("leases[2]") != std::string::npos, twice.message);
  BOOST_TEST(twice.message.find("more than once") != std::string::npos, twice.message);
  BOOST_TEST(twice.message.find("token 1") != std::string::npos, twice.message);
  // One key with two tokens is two leases (two permits of a key of permits): accepted, in order.
  auto permits = parse_renew_batch(
      batch({entry("a"), entry("a", R"("owner":"o","token":2,"ttl_ms":1000)"), entry("b")}), bounds);
  BOOST_REQUIRE(std::holds_alternative<renew_batch_request>(permits));
  const auto& leases = std::get<renew_batch_request>(permits).leases;
  BOOST_REQUIRE(leases.size() == 3u);
  BOOST_TEST(leases[0].key == "a");
  BOOST_TEST(leases[0].token == 1u);
  BOOST_TEST(leases[1].key == "a");
  BOOST_TEST(leases[1].token == 2u);
  // Keys that differ by a byte are different keys, a token that differs is another lease.
  BOOST_TEST(std::holds_alternative<renew_batch_request>(parse_renew_batch(
      batch({entry("a"), entry("ab"), entry("b", R"("owner":"o","token":3,"ttl_ms":1000)")}), bounds)));

  std::vector<std::string> many;
  for (std::size_t i = 0; i < max_renew_batch; ++i)
    many.push_back(entry("k" + std::to_string(i)));
  std::string full = R"({"leases":[)";
  for (const auto& e : many)
    full += (full.back() == '[' ? "" : ",") + e;
  auto at_max = parse_renew_batch(full + "]}", bounds);
  BOOST_TEST(std::get<renew_batch_request>(at_max).leases.size() == max_renew_batch);
  BOOST_TEST(batch_err(full + "," + entry("one-more") + "]}").status == 400);
}

// The duplicate-member check keeps an object's first names in a list and moves to a hash set past 16: a
// name repeated on either side of that switch is found, and nested objects keep their own names.
BOOST_AUTO_TEST_CASE(a_repeated_member_is_found_in_small_and_large_objects) {
  auto body = [](int unknown, const std::string& extra) {
    std::string s = R"({"owner":"o","ttl_ms":1000)";
    for (int i = 0; i < unknown; ++i)
      s += R"(,"f)" + std::to_string(i) + R"(":{"owner":1,"f0":2})";
    return s + extra + "}";
  };
  for (int n : {0, 5, 14, 15, 16, 40}) {
    BOOST_TEST_CONTEXT(n << " unknown fields") {
      BOOST_TEST(std::holds_alternative<acquire_request>(parse_acquire(body(n, ""), bounds)));
      auto e = err(to_any(parse_acquire(body(n, R"(,"owner":"p")"), bounds)));
      BOOST_TEST(e.message.find("\"owner\" more than once") != std::string::npos, e.message);
      if (n > 2) BOOST_TEST(err(to_any(parse_acquire(body(n, R"(,"f2":0)"), bounds))).status == 400);
    }
  }
}

BOOST_AUTO_TEST_CASE(proclaim_takes_owner_token_and_a_required_value_checked_as_an_acquires) {
  auto p = std::get<proclaim_request>(parse_proclaim(R"({"owner":"w","token":7,"value":"10.0.0.1:80"})"));
  BOOST_TEST(p.owner == "w");
  BOOST_TEST(p.token == 7u);
  BOOST_TEST(p.value == "10.0.0.1:80");
  BOOST_TEST(
      std::get<proclaim_request>(parse_proclaim(R"({"owner":"w","token":7,"value":""})")).value.empty());
  auto proclaim_err = [](std::string_view body) { return std::get<api_error>(parse_proclaim(body)); };
  BOOST_TEST(proclaim_err(R"({"owner":"w","token":7})").message == "missing field \"value\"");
  BOOST_TEST(proclaim_err(R"({"owner":"w","token":7,"value":5})").status == 400);
  BOOST_TEST(proclaim_err(R"({"owner":"w","token":7,"value":null})").status == 400);
  BOOST_TEST(proclaim_err(R"({"owner":"w","token":7,"value":"a\nb"})").status == 400);
  BOOST_TEST(proclaim_err(R"({"owner":"w","token":0,"value":"v"})").status == 400);
  BOOST_TEST(proclaim_err(R"({"token":7,"value":"v"})").status == 400);
  BOOST_TEST(proclaim_err(R"({"owner":"w","token":7,"value":"v","value":"w"})").status == 400);
  BOOST_TEST(proclaim_err(R"(["owner"])").status == 400);
  const std::string longest(max_value_bytes, 'v');
  BOOST_TEST(
      std::get<proclaim_request>(parse_proclaim(R"({"owner":"w","token":1,"value":")" + longest + "\"}"))
          .value.size() == max_value_bytes);
  BOOST_TEST(proclaim_err(R"({"owner":"w","token":1,"value":")" + longest + "v\"}").status == 400);
}

BOOST_AUTO_TEST_CASE(proclaim_is_a_post_route_and_a_long_poll_may_name_the_value_it_saw) {
  auto t = target_ok("/v1/locks/a%2Fb/proclaim");
  BOOST_TEST((t.what == kind::proclaim));
  BOOST_TEST(t.key == "a/b");
  BOOST_TEST(method_for(kind::proclaim) == "POST");
  BOOST_TEST(target_err("/v1/locks/%00/proclaim").status == 400);
  BOOST_TEST(target_err("/v1/locks/a/proclaim/x").status == 404);
  auto w = target_ok("/v1/locks/k?wait_ms=100&token=3&value=10.0.0.1%3A80");
  BOOST_REQUIRE(w.value.has_value());
  BOOST_TEST(*w.value == "10.0.0.1:80");
  BOOST_TEST((target_ok("/v1/locks/k?wait_ms=100&value=").value == std::optional<std::string>("")));
  BOOST_TEST((target_ok("/v1/locks/k?wait_ms=100&value").value == std::optional<std::string>("")));
  BOOST_TEST(!target_ok("/v1/locks/k?wait_ms=100").value.has_value());
  BOOST_TEST(target_err("/v1/locks/k?wait_ms=100&value=a&value=a").status == 400);
  BOOST_TEST(target_err("/v1/locks/k?wait_ms=100&value=a%0Ab").status == 400);
  BOOST_TEST(target_err("/v1/locks/k?wait_ms=100&value=%FF").status == 400);
  BOOST_TEST(target_err("/v1/locks/k?value=" + std::string(max_value_bytes + 1, 'v')).status == 400);
}

BOOST_AUTO_TEST_CASE(a_record_write_takes_owner_token_and_any_string_value_up_to_the_record_limit) {
  auto r = std::get<record_write_request>(
      parse_record_write(R"({"owner":"w","token":7,"value":"{\"a\":1}\n\u0000"})"));
  BOOST_TEST(r.owner == "w");
  BOOST_TEST(r.token == 7u);
  BOOST_TEST(r.value == std::string("{\"a\":1}\n\0", 9));  // control characters are data here
  auto record_err = [](std::string_view body) { return std::get<api_error>(parse_record_write(body)); };
  BOOST_TEST(record_err(R"({"owner":"w","token":7})").message == "missing field \"value\"");
  BOOST_TEST(record_err(R"({"owner":"w","token":7,"value":5})").status == 400);
  BOOST_TEST(record_err(R"({"owner":"w","token":0,"value":"v"})").status == 400);
  BOOST_TEST(record_err(R"({"token":7,"value":"v"})").status == 400);
  BOOST_TEST(record_err(R"({"owner":"w","token":7,"value":"v","value":"w"})").status == 400);
  BOOST_TEST(record_err(R"({"owner":"w","token":7,"value":"\ud800"})").status == 400);
  const std::string longest(max_record_bytes, 'v');
  BOOST_TEST(std::get<record_write_request>(
                 parse_record_write(R"({"owner":"w","token":1,"value":")" + longest + "\"}"))
                 .value.size() == max_record_bytes);
  const auto too_long = record_err(R"({"owner":"w","token":1,"value":")" + longest + "v\"}");
  BOOST_TEST(too_long.status == 413);
  BOOST_TEST(too_long.code == "record_too_large");
  // Every byte of the longest value escaped still fits the route's body limit.
  std::string escaped =
      R"({"owner":")" + std::string(max_owner_bytes, 'o') + R"(","token":9223372036854775807,)";
  escaped += R"("value":")";
  for (std::size_t i = 0; i < max_record_bytes; ++i)
    escaped += "\\u0001";
  escaped += "\"}";
  BOOST_TEST(escaped.size() <= max_record_body_bytes);
  BOOST_TEST(std::get<record_write_request>(parse_record_write(escaped)).value.size() == max_record_bytes);
}

BOOST_AUTO_TEST_CASE(the_record_route_reads_with_get_and_writes_with_put) {
  auto t = target_ok("/v1/locks/a%2Fb/record");
  BOOST_TEST((t.what == kind::record_read));
  BOOST_TEST(t.key == "a/b");
  BOOST_TEST(method_for(kind::record_read) == "GET, PUT");
  BOOST_TEST((with_method(kind::record_read, "GET") == kind::record_read));
  BOOST_TEST((with_method(kind::record_read, "PUT") == kind::record_write));
  BOOST_TEST(!with_method(kind::record_read, "POST").has_value());
  BOOST_TEST(!with_method(kind::record_read, "DELETE").has_value());
  BOOST_TEST((with_method(kind::acquire, "POST") == kind::acquire));
  BOOST_TEST(!with_method(kind::acquire, "PUT").has_value());
  BOOST_TEST(target_err("/v1/locks/%00/record").status == 400);
  BOOST_TEST(target_err("/v1/locks/a/record/x").status == 404);
}
