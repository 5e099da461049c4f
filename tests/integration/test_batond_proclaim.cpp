// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE batond_proclaim
#include <boost/test/unit_test.hpp>

// POST /v1/locks/{key}/proclaim against a real batond (docs/protocol.md, "proclaim").

#include "batond_fixture.hpp"
#include "lock_requests.hpp"

#include <boost/json/serialize.hpp>

#include <algorithm>
#include <chrono>
#include <fstream>
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

// The lock's record (docs/protocol.md, "record") against a real batond: written by the live holder, kept
// beyond the lease's release and a kill -9, refused for a deposed holder, read by anyone.
BOOST_AUTO_TEST_CASE(a_record_is_written_by_the_holder_outlives_its_lease_and_survives_a_kill9) {
  temp_dir dir;
  const std::string state = "{\"jobs\":{\"nightly\":{\"slot\":\"2026-12-05T00:00Z\"}}}\n";
  std::uint64_t token;
  {
    batond_process server(dir.path(), {"--min-ttl-ms", "100"});
    auto c = server.client();
    auto caps = c.get("/v1/capabilities");
    const auto& features = caps.json.at("features").as_array();
    BOOST_TEST((std::find(features.begin(), features.end(), json::value("lock_record")) != features.end()));
    BOOST_TEST(caps.json.at("record_max_bytes").to_number<std::uint64_t>() == 65536u);
    auto none = c.get("/v1/locks/agent/record");
    BOOST_TEST(none.status == 404);
    BOOST_TEST(str(none, "error") == "no_record");
    token = token_of(c.post("/v1/locks/agent/acquire", valued("a", 60000, "10.0.0.1:80")));
    std::this_thread::sleep_for(300ms);
    auto w = c.request("PUT", "/v1/locks/agent/record", record_body("a", token, state));
    BOOST_REQUIRE_MESSAGE(w.status == 200, w.body);
    BOOST_TEST(w.body == R"({"key":"agent","token":)" + std::to_string(token) + R"(,"version":1})");
    // The lease is untouched: no renew, the value kept.
    auto g = c.get("/v1/locks/agent");
    BOOST_TEST(str(g, "value") == "10.0.0.1:80");
    BOOST_TEST(remaining_ms(g) <= 59'800);
    // A retry sets the same value and counts a version.
    BOOST_TEST(c.request("PUT", "/v1/locks/agent/record", record_body("a", token, state))
                   .json.at("version")
                   .to_number<int>() == 2);
    // A larger record than any other body: up to record_max_bytes, however escaped.
    const std::string big(65536, '\n');
    auto large = c.request("PUT", "/v1/locks/big/record", record_body("a", token, big));
    BOOST_TEST(large.status == 409);  // read whole (not 413), then refused: "big" is not held
    BOOST_TEST(str(large, "reason") == "not_held");
    BOOST_TEST(c.post("/v1/locks/agent/release", release_body("a", token)).status == 200);
    auto r = c.get("/v1/locks/agent/record");
    BOOST_REQUIRE_MESSAGE(r.status == 200, r.body);
    BOOST_TEST(str(r, "value") == state);
    BOOST_TEST(token_of(r) == token);
    BOOST_TEST(r.json.at("version").to_number<int>() == 2);
    BOOST_TEST(str(r, "owner") == "a");
    const auto metrics = c.get("/metrics").body;
    BOOST_TEST(metrics.find(R"(baton_operations_total{op="record_write",outcome="ok"} 2)") !=
               std::string::npos);
    BOOST_TEST(metrics.find(R"(baton_requests_total{route="record_read",code="200"} 1)") !=
               std::string::npos);
    server.kill9();
  }
  batond_process server(dir.path());
  auto c = server.client();
  auto r = c.get("/v1/locks/agent/record");
  BOOST_REQUIRE_MESSAGE(r.status == 200, r.body);
  BOOST_TEST(str(r, "value") == state);
  BOOST_TEST(r.json.at("version").to_number<int>() == 2);
  // The next holder writes with its larger token; the old one is refused, even though it wrote last.
  auto next = token_of(c.post("/v1/locks/agent/acquire", acquire_body("b", 60000)));
  BOOST_TEST(next > token);
  auto late = c.request("PUT", "/v1/locks/agent/record", record_body("a", token, "late"));
  BOOST_TEST(late.status == 409);
  BOOST_TEST(str(late, "error") == "lost");
  BOOST_TEST(str(late, "reason") == "owner_mismatch");
  BOOST_TEST(c.request("PUT", "/v1/locks/agent/record", record_body("b", next, "b's"))
                 .json.at("version")
                 .to_number<int>() == 3);
  BOOST_TEST(str(c.get("/v1/locks/agent/record"), "owner") == "b");
}

BOOST_AUTO_TEST_CASE(a_record_write_of_a_deposed_holder_or_a_bad_body_changes_nothing) {
  temp_dir dir;
  batond_process server(dir.path(), {"--min-ttl-ms", "100", "--max-records", "1"});
  auto c = server.client();
  auto put = [&](std::string_view key, std::string_view body) {
    return c.request("PUT", "/v1/locks/" + std::string(key) + "/record", body);
  };
  const auto token = token_of(c.post("/v1/locks/k/acquire", acquire_body("a", 300)));
  BOOST_TEST(put("k", record_body("a", token, "v1")).status == 200);
  auto lost = [&](std::string_view owner, std::uint64_t t, const char* reason) {
    auto r = put("k", record_body(owner, t, "stolen"));
    BOOST_TEST(r.status == 409);
    BOOST_TEST(str(r, "error") == "lost");
    BOOST_TEST(str(r, "reason") == reason);
  };
  lost("b", token, "owner_mismatch");
  lost("a", token + 5, "token_mismatch");
  for (auto bad : {std::string("{\"owner\":\"a\",\"token\":1}"),
                   std::string("{\"owner\":\"a\",\"token\":1,\"value\":5}"), std::string("not json"),
                   std::string("{\"owner\":\"a\",\"token\":\"1\",\"value\":\"v\"}")}) {
    auto r = put("k", bad);
    BOOST_TEST(r.status == 400, bad);
    BOOST_TEST(str(r, "error") == "bad_request");
  }
  auto too_long = put("k", record_body("a", token, std::string(65537, 'x')));
  BOOST_TEST(too_long.status == 413);
  BOOST_TEST(str(too_long, "error") == "record_too_large");
  // Past the route's body limit the connection is answered 413 and closed.
  auto huge = put("k", record_body("a", token, std::string(500'000, 'x')));
  BOOST_TEST(huge.status == 413);
  BOOST_TEST(str(huge, "error") == "body_too_large");
  // The same large body anywhere else is over the general limit.
  BOOST_TEST(c.post("/v1/locks/k/renew", record_body("a", token, std::string(20'000, 'x'))).status == 413);
  // A method the route does not take.
  auto post = c.post("/v1/locks/k/record", record_body("a", token, "v"));
  BOOST_TEST(post.status == 405);
  // A second key's record is over --max-records; the first key's may still be replaced.
  const auto other = token_of(c.post("/v1/locks/o/acquire", acquire_body("a", 60000)));
  auto full = put("o", record_body("a", other, "v"));
  BOOST_TEST(full.status == 507);
  BOOST_TEST(str(full, "error") == "too_many_records");
  BOOST_TEST(c.get("/v1/locks/o/record").status == 404);
  // Once the lease has expired, its holder is refused before anybody else took the key.
  std::this_thread::sleep_for(400ms);
  lost("a", token, "not_held");
  auto r = c.get("/v1/locks/k/record");
  BOOST_TEST(str(r, "value") == "v1");
  BOOST_TEST(r.json.at("version").to_number<int>() == 1);
  // A PUT without a JSON content type is refused before anything (as a POST is).
  auto raw =
      http_client::raw(server.port(),
                       "PUT /v1/locks/k/record HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\n"
                       "Content-Length: 2\r\n\r\n{}");
  BOOST_TEST(raw.status == 415);
}

// With tokens: a record write needs write access to the key (a renew's), a read needs read access (a GET's);
// the holder is the pair (client, owner); and only a request whose header carries a valid token may send a
// body past the general limit, so nobody without a token holds more memory than before.
BOOST_AUTO_TEST_CASE(a_record_needs_a_renews_access_to_write_a_gets_to_read_and_a_token_for_a_large_body) {
  temp_dir dir, scratch;
  const auto tokens = scratch.path() / "tokens";
  // SHA-256 of "record-writer", "record-reader" and "record-other".
  std::ofstream(tokens)
      << "sha256:1788eccb901c9f4e165e262397ee542f14e29b154d6405ba6ab21db9d7a71a96 writer rw:jobs/\n"
      << "sha256:d7899b16327abe3c64316d58506bc1acb080430cad625e8fc434fda687128c7b reader ro:jobs/\n"
      << "sha256:9283b67206d29cd6d1b1335edd7ffca8a625424534048ac60f43c4a165d4a96c other rw:jobs/\n";
  batond_process server(dir.path(), {"--tokens-file", tokens.string()});
  auto writer = server.client(), reader = server.client(), other = server.client();
  writer.set_authorization("Bearer record-writer");
  reader.set_authorization("Bearer record-reader");
  other.set_authorization("Bearer record-other");
  const auto token = token_of(writer.post("/v1/locks/jobs%2Fa/acquire", acquire_body("agent", 60000)));
  const std::string escaped(30'000, '\n');  // 60,000 bytes in JSON: past the general 8 KiB limit
  auto w = writer.request("PUT", "/v1/locks/jobs%2Fa/record", record_body("agent", token, escaped));
  BOOST_REQUIRE_MESSAGE(w.status == 200, w.body);
  auto forbidden = reader.request("PUT", "/v1/locks/jobs%2Fa/record", record_body("agent", token, "x"));
  BOOST_TEST(forbidden.status == 403);
  BOOST_TEST(str(forbidden, "error") == "forbidden");
  // The same owner string from another client is another owner.
  auto stolen = other.request("PUT", "/v1/locks/jobs%2Fa/record", record_body("agent", token, "x"));
  BOOST_TEST(stolen.status == 409);
  BOOST_TEST(str(stolen, "reason") == "owner_mismatch");
  auto r = reader.get("/v1/locks/jobs%2Fa/record");
  BOOST_REQUIRE_MESSAGE(r.status == 200, r.body);
  BOOST_TEST(str(r, "value") == escaped);
  BOOST_TEST(str(r, "client") == "writer");
  // Without a valid token the general body limit holds: 413 before anything about the caller.
  const std::string big = record_body("agent", token, escaped);
  for (const std::string& auth : {std::string(), std::string("Authorization: Bearer wrong\r\n")}) {
    auto raw = http_client::raw(
        server.port(), "PUT /v1/locks/jobs%2Fa/record HTTP/1.1\r\nHost: 127.0.0.1\r\n" + auth +
                           "Content-Type: application/json\r\nContent-Length: " + std::to_string(big.size()) +
                           "\r\n\r\n" + big);
    BOOST_TEST(raw.status == 413, auth);
  }
  BOOST_TEST(reader.get("/v1/locks/jobs%2Fa/record").json.at("version").to_number<int>() == 1);
}
