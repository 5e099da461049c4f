// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE batond_proclaim
#include <boost/test/unit_test.hpp>

// POST /v1/locks/{key}/proclaim against a real batond (docs/protocol.md, "proclaim").

#include "batond_fixture.hpp"
#include "lock_requests.hpp"

#include <boost/json/serialize.hpp>

#include <chrono>
#include <string>
#include <thread>

using namespace baton::test;
using namespace std::chrono_literals;
namespace json = boost::json;

namespace {

std::string str(const http_reply& r, const char* field) {
  return std::string(r.json.at(field).as_string());
}

std::string valued(std::string_view owner, int ttl_ms, std::string_view value) {
  return json::serialize(json::object{{"owner", owner}, {"ttl_ms", ttl_ms}, {"value", value}});
}

std::int64_t remaining_ms(const http_reply& r) {
  return r.json.at("ttl_remaining_ms").to_number<std::int64_t>();
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_proclaim_replaces_the_value_keeps_token_and_expiry_and_survives_a_kill9) {
  temp_dir dir;
  std::uint64_t token;
  {
    batond_process server(dir.path());
    auto c = server.client();
    token = token_of(c.post("/v1/locks/leader/acquire", valued("a", 60000, "10.0.0.1:80")));
    std::this_thread::sleep_for(300ms);
    auto p = c.post("/v1/locks/leader/proclaim", proclaim_body("a", token, "10.0.0.2:80"));
    BOOST_REQUIRE_MESSAGE(p.status == 200, p.body);
    BOOST_TEST(p.body == R"({"key":"leader","owner":"a","token":)" + std::to_string(token) +
                             R"(,"value":"10.0.0.2:80"})");
    auto g = c.get("/v1/locks/leader");
    BOOST_TEST(str(g, "value") == "10.0.0.2:80");
    BOOST_TEST(token_of(g) == token);
    BOOST_TEST(remaining_ms(g) <= 59'800);  // not a renew: the lease still ends 60 s after its acquire
    auto held = c.post("/v1/locks/leader/acquire", valued("b", 60000, "10.0.0.9:80"));
    BOOST_TEST(held.status == 409);
    BOOST_TEST(str(held, "value") == "10.0.0.2:80");
    // An empty value is a value too.
    BOOST_TEST(c.post("/v1/locks/leader/proclaim", proclaim_body("a", token, "")).status == 200);
    BOOST_TEST(str(c.get("/v1/locks/leader"), "value").empty());
    BOOST_TEST(c.post("/v1/locks/leader/proclaim", proclaim_body("a", token, "10.0.0.3:80")).status == 200);
    // No token was taken: the next grant follows the first directly.
    BOOST_TEST(token_of(c.post("/v1/locks/other/acquire", acquire_body("x", 60000))) == token + 1);
    const auto metrics = c.get("/metrics").body;
    BOOST_TEST(metrics.find(R"(baton_operations_total{op="proclaim",outcome="ok"} 3)") != std::string::npos);
    BOOST_TEST(metrics.find(R"(baton_requests_total{route="proclaim",code="200"} 3)") != std::string::npos);
    server.kill9();  // the answer promised durability: the page cache is all a kill -9 keeps, and enough
  }
  batond_process server(dir.path());
  auto c = server.client();
  auto g = c.get("/v1/locks/leader");
  BOOST_REQUIRE(g.status == 200);
  BOOST_TEST(token_of(g) == token);
  BOOST_TEST(str(g, "value") == "10.0.0.3:80");
  BOOST_TEST(c.post("/v1/locks/leader/renew", renew_body("a", token, 60000)).status == 200);
}

BOOST_AUTO_TEST_CASE(a_proclaim_is_refused_as_a_renew_is_and_a_bad_one_gets_400) {
  temp_dir dir;
  batond_process server(dir.path());
  auto c = server.client();
  auto lost = [&](std::string_view owner, std::uint64_t token) {
    auto r = c.post("/v1/locks/k/proclaim", proclaim_body(owner, token, "stolen"));
    BOOST_TEST(r.status == 409);
    BOOST_TEST(str(r, "error") == "lost");
    return str(r, "reason");
  };
  BOOST_TEST(lost("a", 1) == "not_held");
  auto first = token_of(c.post("/v1/locks/k/acquire", valued("a", 60000, "mine")));
  BOOST_TEST(lost("b", first) == "owner_mismatch");
  BOOST_TEST(lost("a", first + 100) == "token_mismatch");
  auto second = token_of(c.post("/v1/locks/k/acquire", valued("a", 60000, "mine again")));
  BOOST_TEST(lost("a", first) == "token_mismatch");  // superseded by the re-acquire
  BOOST_TEST(str(c.get("/v1/locks/k"), "value") == "mine again");

  auto bad = [&](const std::string& body) {
    auto r = c.post("/v1/locks/k/proclaim", body);
    BOOST_TEST(r.status == 400, body);
    BOOST_TEST(str(r, "error") == "bad_request");
  };
  bad(proclaim_body("a", second, std::string(1025, 'v')));
  bad(proclaim_body("a", second, "two\nlines"));
  bad(json::serialize(json::object{{"owner", "a"}, {"token", second}}));
  bad(json::serialize(json::object{{"owner", "a"}, {"token", second}, {"value", 80}}));
  bad(R"({"owner":"a","token":1,"value":"x","value":"y"})");
  bad("not json");
  BOOST_TEST(c.get("/v1/locks/k/proclaim").status == 405);
  BOOST_TEST(c.post("/v1/locks/%00/proclaim", proclaim_body("a", second, "v")).status == 400);
  BOOST_TEST(str(c.get("/v1/locks/k"), "value") == "mine again");
  BOOST_TEST(token_of(c.get("/v1/locks/k")) == second);
}

BOOST_AUTO_TEST_CASE(a_long_poll_naming_the_value_it_saw_wakes_on_a_proclaim_and_a_token_watch_does_not) {
  temp_dir dir;
  batond_process server(dir.path());
  auto c = server.client();
  auto t = token_of(c.post("/v1/locks/lp/acquire", valued("a", 60000, "old:80")));
  const auto token = std::to_string(t);
  http_reply by_value, by_token;
  std::chrono::steady_clock::duration value_waited{}, token_waited{};
  std::thread value_watch([&] {
    http_client wc(server.port());
    auto start = std::chrono::steady_clock::now();
    by_value = wc.get("/v1/locks/lp?wait_ms=30000&token=" + token + "&value=old%3A80");
    value_waited = std::chrono::steady_clock::now() - start;
  });
  std::thread token_watch([&] {
    http_client wc(server.port());
    auto start = std::chrono::steady_clock::now();
    by_token = wc.get("/v1/locks/lp?wait_ms=2000&token=" + token);
    token_waited = std::chrono::steady_clock::now() - start;
  });
  std::this_thread::sleep_for(300ms);
  BOOST_TEST(c.post("/v1/locks/lp/proclaim", proclaim_body("a", t, "new:80")).status == 200);
  value_watch.join();
  token_watch.join();
  BOOST_TEST(by_value.status == 200);
  BOOST_TEST(str(by_value, "value") == "new:80");
  BOOST_TEST(value_waited < 5s);  // woken by the proclaim, not by wait_ms
  BOOST_TEST(str(by_token, "value") == "new:80");
  BOOST_TEST(token_waited >= 1900ms);  // the holder did not change: answered at wait_ms
  // A value that differs from the holder's answers at once.
  auto at_once = c.get("/v1/locks/lp?wait_ms=30000&token=" + token + "&value=old%3A80");
  BOOST_TEST(str(at_once, "value") == "new:80");
}
