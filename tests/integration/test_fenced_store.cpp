// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE fenced_store
#include <boost/test/unit_test.hpp>

#include "batond_fixture.hpp"

#include <boost/json/parse.hpp>

#include <signal.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

using namespace baton::test;
using namespace std::chrono_literals;

namespace {

// The real fenced-store on an ephemeral loopback port.
struct fenced_store {
  child_process proc{
      {bin_path("fenced-store"), "--listen", "127.0.0.1:0", "--threads", "2", "--log-level", "warn"}};
  unsigned short port = 0;

  fenced_store() {
    const std::string prefix = "fenced-store listening on ";
    std::string line = proc.read_line(60s);
    BOOST_REQUIRE_MESSAGE(line.rfind(prefix, 0) == 0, "unexpected first line: " << line);
    port = static_cast<unsigned short>(std::stoul(line.substr(line.rfind(':') + 1)));
  }

  // http_client sends no custom headers, so writes go out as raw requests, each on its own connection.
  http_reply put(const std::string& key, std::string_view value, std::optional<std::string> token,
                 std::optional<std::string> resource = std::nullopt,
                 const std::string& more_headers = "") const {
    std::string req = "PUT /items/" + key + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
    if (token) req += "Fencing-Token: " + *token + "\r\n";
    if (resource) req += "Fencing-Resource: " + *resource + "\r\n";
    req += more_headers;
    req += "Content-Length: " + std::to_string(value.size()) + "\r\n\r\n";
    req += value;
    return http_client::raw(port, req);
  }
  http_reply put(const std::string& key, std::string_view value, std::uint64_t token,
                 std::optional<std::string> resource = std::nullopt) const {
    return put(key, value, std::to_string(token), std::move(resource));
  }
  http_reply get(const std::string& target) const { return http_client(port, 60s).get(target); }
};

std::uint64_t num(const http_reply& r, const char* field) {
  return r.json.at(field).to_number<std::uint64_t>();
}
std::string str(const http_reply& r, const char* field) {
  return std::string(r.json.at(field).as_string());
}

}  // namespace

BOOST_AUTO_TEST_CASE(equal_and_higher_tokens_are_accepted_and_a_lower_one_gets_409_with_the_highest) {
  fenced_store s;
  auto a = s.put("k", "v5", 5);
  BOOST_TEST(a.status == 200);
  BOOST_TEST(str(a, "key") == "k");
  BOOST_TEST(num(a, "token") == 5u);
  BOOST_TEST(num(a, "version") == 1u);

  auto b = s.put("k", "v5-again", 5);  // the same holder writing twice
  BOOST_TEST(b.status == 200);
  BOOST_TEST(num(b, "version") == 2u);

  auto c = s.put("k", "v7", 7);
  BOOST_TEST(c.status == 200);
  BOOST_TEST(num(c, "version") == 3u);

  auto stale = s.put("k", "v6", 6);
  BOOST_TEST(stale.status == 409);
  BOOST_TEST(stale.content_type == "application/json");
  BOOST_TEST(str(stale, "error") == "stale_token");
  BOOST_TEST(!str(stale, "message").empty());
  BOOST_TEST(num(stale, "highest_token") == 7u);

  // Another key in the same (default) resource is fenced too: the whole store is one resource.
  BOOST_TEST(s.put("other", "x", 6).status == 409);
}

BOOST_AUTO_TEST_CASE(get_returns_the_value_of_the_last_accepted_write) {
  fenced_store s;
  BOOST_TEST(s.put("item", "first", 3).status == 200);
  BOOST_TEST(s.put("item", "second", 4).status == 200);
  BOOST_TEST(s.put("item", "stale", 2).status == 409);
  auto g = s.get("/items/item");
  BOOST_TEST(g.status == 200);
  BOOST_TEST(str(g, "key") == "item");
  BOOST_TEST(str(g, "value") == "second");
  BOOST_TEST(num(g, "token") == 4u);

  auto missing = s.get("/items/nothing-here");
  BOOST_TEST(missing.status == 404);
  BOOST_TEST(str(missing, "error") == "not_found");
}

BOOST_AUTO_TEST_CASE(percent_encoded_key_and_utf8_value_round_trip) {
  fenced_store s;
  BOOST_TEST(s.put("a%2Fb", "caf\xc3\xa9", 1).status == 200);
  auto g = s.get("/items/a%2Fb");
  BOOST_TEST(g.status == 200);
  BOOST_TEST(str(g, "key") == "a/b");
  BOOST_TEST(str(g, "value") == "caf\xc3\xa9");
  // Not representable in a JSON answer.
  BOOST_TEST(s.put("bin", "\xff\xfe", 1).status == 400);
  BOOST_TEST(s.put("%FF", "v", 1).status == 400);
  BOOST_TEST(s.put("k", "v", 1, "\xff").status == 400);
}

BOOST_AUTO_TEST_CASE(missing_or_invalid_fencing_token_is_a_400_with_a_json_error) {
  fenced_store s;
  for (std::optional<std::string> token :
       {std::optional<std::string>{}, std::optional<std::string>{"abc"}, std::optional<std::string>{"0"},
        std::optional<std::string>{"-3"}, std::optional<std::string>{"9223372036854775808"},
        std::optional<std::string>{"12x"}, std::optional<std::string>{""}}) {
    BOOST_TEST_CONTEXT("token header " << (token ? "\"" + *token + "\"" : "absent")) {
      auto r = s.put("k", "v", token);
      BOOST_TEST(r.status == 400);
      BOOST_TEST(str(r, "error") == "bad_request");
      BOOST_TEST(!str(r, "message").empty());
    }
  }
  BOOST_TEST(s.get("/items/k").status == 404);  // none of them wrote
  BOOST_TEST(s.get("/fences").json.at("fences").as_object().empty());
}

BOOST_AUTO_TEST_CASE(separate_resources_are_fenced_independently) {
  fenced_store s;
  BOOST_TEST(s.put("a", "a100", 100, "res-a").status == 200);
  BOOST_TEST(s.put("b", "b3", 3, "res-b").status == 200);  // 3 < 100, but a different resource
  auto stale_b = s.put("b", "b2", 2, "res-b");
  BOOST_TEST(stale_b.status == 409);
  BOOST_TEST(num(stale_b, "highest_token") == 3u);
  BOOST_TEST(s.put("a", "a99", 99, "res-a").status == 409);
  BOOST_TEST(s.put("d", "d1", 1).status == 200);  // the default resource is untouched by both

  auto f = s.get("/fences");
  BOOST_TEST(f.status == 200);
  const auto& fences = f.json.at("fences").as_object();
  BOOST_TEST(fences.size() == 3u);
  BOOST_TEST(fences.at("res-a").to_number<std::uint64_t>() == 100u);
  BOOST_TEST(fences.at("res-b").to_number<std::uint64_t>() == 3u);
  BOOST_TEST(fences.at("default").to_number<std::uint64_t>() == 1u);
  BOOST_TEST(str(s.get("/items/b"), "value") == "b3");
}

// A semaphore's permit (docs/fencing.md): Fencing-Slot fences per (resource, slot), so a stale holder of slot
// 1 is refused while slot 2's older token writes on; Fencing-Permits refuses an older token in a slot at or
// past the count a newer token came with (the key's count shrank while it was idle).
BOOST_AUTO_TEST_CASE(permit_headers_fence_per_slot_and_refuse_a_slot_past_a_newer_count) {
  fenced_store s;
  const auto permit = [&](std::uint64_t token, int slot, int permits) {
    return s.put(
        "p", "v" + std::to_string(token), std::to_string(token), std::string("pool"),
        "Fencing-Slot: " + std::to_string(slot) + "\r\nFencing-Permits: " + std::to_string(permits) + "\r\n");
  };
  BOOST_TEST(permit(5, 1, 4).status == 200);
  BOOST_TEST(permit(9, 1, 4).status == 200);
  BOOST_TEST(permit(7, 2, 4).status == 200);  // slot 2: older than 9, another slot
  BOOST_TEST(permit(8, 3, 4).status == 200);
  auto stale = permit(5, 1, 4);
  BOOST_TEST(stale.status == 409);
  BOOST_TEST(num(stale, "highest_token") == 9u);
  BOOST_TEST(str(stale, "message").find("slot 1 of \"pool\"") != std::string::npos, str(stale, "message"));
  // The key comes back as a key of 2: token 8's slot 3 is shut, though slot 3 saw nothing newer.
  BOOST_TEST(permit(12, 0, 2).status == 200);
  auto past = permit(8, 3, 4);
  BOOST_TEST(past.status == 409);
  BOOST_TEST(num(past, "highest_token") == 12u);
  BOOST_TEST(str(past, "message").find("fewer permits") != std::string::npos, str(past, "message"));
  BOOST_TEST(permit(13, 1, 2).status == 200);
  // The history names the slot and the count.
  auto h = s.get("/history");
  const auto last = h.body.substr(h.body.rfind('\n', h.body.size() - 2) + 1);
  const auto o = boost::json::parse(last).as_object();
  BOOST_TEST(o.at("slot").to_number<int>() == 1);
  BOOST_TEST(o.at("permits").to_number<int>() == 2);
  // Bad permit headers are 400s that change nothing.
  for (const std::string bad :
       {"Fencing-Slot: 2\r\nFencing-Permits: 2\r\n", "Fencing-Slot: x\r\n", "Fencing-Permits: 0\r\n",
        "Fencing-Slot: 1\r\nFencing-Slot: 1\r\n", "Fencing-Permits: 70000\r\n"}) {
    auto r = s.put("p", "bad", std::string("99"), std::string("pool"), bad);
    BOOST_TEST(r.status == 400, bad);
    BOOST_TEST(str(r, "error") == "bad_request", bad);
  }
  BOOST_TEST(str(s.get("/items/p"), "value") == "v13");
}

BOOST_AUTO_TEST_CASE(history_lists_every_attempt_in_order) {
  fenced_store s;
  s.put("h", "1", 10);
  s.put("h", "2", 9);
  s.put("h", "3", 11);
  auto h = s.get("/history");
  BOOST_TEST(h.status == 200);
  std::vector<boost::json::value> lines;
  std::size_t start = 0;
  for (auto nl = h.body.find('\n'); nl != std::string::npos; start = nl + 1, nl = h.body.find('\n', start))
    lines.push_back(boost::json::parse(h.body.substr(start, nl - start)));
  BOOST_REQUIRE(lines.size() == 3u);
  const bool expected[] = {true, false, true};
  const std::uint64_t tokens[] = {10, 9, 11};
  std::int64_t last_ts = 0;
  for (std::size_t i = 0; i < 3; ++i) {
    const auto& o = lines[i].as_object();
    BOOST_TEST(o.at("accepted").as_bool() == expected[i]);
    BOOST_TEST(o.at("token").to_number<std::uint64_t>() == tokens[i]);
    BOOST_TEST(o.at("key").as_string() == "h");
    BOOST_TEST(o.at("ts_us").as_int64() >= last_ts);
    last_ts = o.at("ts_us").as_int64();
  }
}

BOOST_AUTO_TEST_CASE(bad_requests_get_json_errors_and_the_server_keeps_serving) {
  fenced_store s;
  auto unknown = s.get("/nope");
  BOOST_TEST(unknown.status == 404);
  BOOST_TEST(str(unknown, "error") == "not_found");

  auto wrong_method = http_client(s.port, 60s).request("DELETE", "/items/k");
  BOOST_TEST(wrong_method.status == 405);
  BOOST_TEST(str(wrong_method, "error") == "method_not_allowed");

  auto empty_key = s.put("", "v", 1);
  BOOST_TEST(empty_key.status == 400);

  // Refused from the header alone: the body is never sent.
  auto too_large = http_client::raw(
      s.port, "PUT /items/k HTTP/1.1\r\nHost: x\r\nFencing-Token: 1\r\nContent-Length: 2000000\r\n\r\n");
  BOOST_TEST(too_large.status == 413);
  BOOST_TEST(str(too_large, "error") == "body_too_large");

  auto garbage = http_client::raw(s.port, "NOT HTTP AT ALL\r\n\r\n");
  BOOST_TEST(garbage.status == 400);
  BOOST_TEST(str(garbage, "error") == "bad_request");

  auto health = s.get("/healthz");
  BOOST_TEST(health.status == 200);
  BOOST_TEST(str(health, "status") == "ok");
}

BOOST_AUTO_TEST_CASE(sigterm_exits_zero) {
  fenced_store s;
  BOOST_TEST(s.put("k", "v", 1).status == 200);
  s.proc.signal(SIGTERM);
  BOOST_TEST(s.proc.wait(60s) == 0);
}
