// SPDX-License-Identifier: Apache-2.0
// Counting semaphores against a real batond (docs/protocol.md, "semaphores"): permits, the refusal that
// lists every holder, a queued acquire let in by a release, kill -9 and restart, and malformed counts.
#define BOOST_TEST_MODULE batond_semaphores
#include <boost/test/unit_test.hpp>

#include "batond_fixture.hpp"
#include "lock_requests.hpp"

#include <boost/json/serialize.hpp>

#include <chrono>
#include <string>
#include <thread>

using namespace baton::test;
using namespace std::chrono_literals;

namespace {

std::string permit_body(std::string_view owner, std::int64_t ttl_ms, boost::json::value permits) {
  return boost::json::serialize(
      boost::json::object{{"owner", owner}, {"ttl_ms", ttl_ms}, {"permits", permits}});
}

std::int64_t num(const http_reply& r, const char* field) {
  return r.json.at(field).to_number<std::int64_t>();
}

std::string str(const http_reply& r, const char* field) {
  return std::string(r.json.at(field).as_string());
}

}  // namespace

BOOST_AUTO_TEST_CASE(three_permits_four_owners_a_release_lets_the_queued_one_in_and_kill9_keeps_them) {
  temp_dir dir;
  std::uint64_t tokens[3] = {};
  std::uint64_t queued_token = 0;
  {
    batond_process server(dir.path());
    auto c = server.client();
    auto caps = c.get("/v1/capabilities");
    BOOST_REQUIRE(caps.status == 200);
    BOOST_TEST(serialize(caps.json.at("features")).find("\"semaphores\"") != std::string::npos);
    BOOST_TEST(num(caps, "permits_max") == 1000);

    std::uint64_t last = 0;
    for (int i = 0; i < 3; ++i) {
      auto g = c.post("/v1/locks/pool/acquire", permit_body("o" + std::to_string(i), 60'000, 3));
      BOOST_REQUIRE(g.status == 200);
      BOOST_TEST(num(g, "permits") == 3);
      BOOST_TEST(num(g, "slot") == i);
      tokens[i] = token_of(g);
      BOOST_TEST(tokens[i] > last);
      last = tokens[i];
    }
    // The fourth is refused `held`, naming every holder in slot order.
    auto full = c.post("/v1/locks/pool/acquire", permit_body("o3", 60'000, 3));
    BOOST_REQUIRE(full.status == 409);
    BOOST_TEST(str(full, "error") == "held");
    BOOST_TEST(num(full, "permits") == 3);
    const auto& holders = full.json.at("holders").as_array();
    BOOST_REQUIRE(holders.size() == 3u);
    for (std::size_t i = 0; i < 3; ++i) {
      BOOST_TEST(holders[i].at("slot").to_number<std::int64_t>() == static_cast<std::int64_t>(i));
      BOOST_TEST(holders[i].at("token").to_number<std::uint64_t>() == tokens[i]);
    }
    // Another count, or a plain acquire: permits_mismatch, nothing changes.
    auto other = c.post("/v1/locks/pool/acquire", permit_body("o3", 60'000, 2));
    BOOST_TEST(other.status == 409);
    BOOST_TEST(str(other, "error") == "permits_mismatch");
    BOOST_TEST(num(other, "permits") == 3);
    BOOST_TEST(str(c.post("/v1/locks/pool/acquire", acquire_body("o3", 60'000)), "error") ==
               "permits_mismatch");

    // The fourth waits in the queue; o1's release lets it into slot 1. The release is sent only once the
    // listing shows the waiter in the key's queue, so the grant can only come from the queue (a waiter that
    // arrived after the release would be granted at once, with queued_ms 0).
    http_reply waited;
    std::thread waiter([&] {
      http_client wc(server.port());
      waited = wc.post("/v1/locks/pool/acquire?wait_ms=30000", permit_body("o3", 60'000, 3));
    });
    std::int64_t waiters = 0;
    for (int i = 0; i < 1000 && waiters == 0; ++i) {  // bounded: 10 s
      auto l = c.get("/v1/locks?prefix=pool");
      BOOST_REQUIRE(l.status == 200);
      waiters = l.json.at("locks").as_array().at(0).at("waiters").to_number<std::int64_t>();
      if (waiters == 0) std::this_thread::sleep_for(10ms);
    }
    BOOST_REQUIRE(waiters == 1);
    std::this_thread::sleep_for(20ms);  // a lower bound: the grant comes at least this long after arrival
    BOOST_TEST(c.post("/v1/locks/pool/release", release_body("o1", tokens[1])).status == 200);
    waiter.join();
    BOOST_REQUIRE(waited.status == 200);
    BOOST_TEST(num(waited, "slot") == 1);
    BOOST_TEST(num(waited, "queued_ms") >= 20);
    queued_token = token_of(waited);
    BOOST_TEST(queued_token > last);
    // Renew names the permit by its token; another holder's token is owner_mismatch.
    BOOST_TEST(c.post("/v1/locks/pool/renew", renew_body("o0", tokens[0], 60'000)).status == 200);
    auto wrong = c.post("/v1/locks/pool/renew", renew_body("o0", queued_token, 60'000));
    BOOST_TEST(wrong.status == 409);
    BOOST_TEST(str(wrong, "reason") == "owner_mismatch");
    // A listing shows each permit of the key, in slot order.
    auto list = c.get("/v1/locks?prefix=pool");
    BOOST_REQUIRE(list.status == 200);
    const auto& locks = list.json.at("locks").as_array();
    BOOST_REQUIRE(locks.size() == 3u);
    BOOST_TEST(locks[1].at("kind").as_string() == "permit");
    BOOST_TEST(locks[1].at("slot").to_number<int>() == 1);
    BOOST_TEST(locks[1].at("owner").as_string() == "o3");
    server.kill9();
  }
  batond_process server(dir.path());
  auto c = server.client();
  auto g = c.get("/v1/locks/pool");
  BOOST_REQUIRE(g.status == 200);
  BOOST_TEST(num(g, "permits") == 3);
  const auto& holders = g.json.at("holders").as_array();
  BOOST_REQUIRE(holders.size() == 3u);
  BOOST_TEST(holders[0].at("token").to_number<std::uint64_t>() == tokens[0]);
  BOOST_TEST(holders[1].at("token").to_number<std::uint64_t>() == queued_token);
  BOOST_TEST(holders[1].at("owner").as_string() == "o3");
  BOOST_TEST(holders[2].at("token").to_number<std::uint64_t>() == tokens[2]);
  // Still full, still 3 permits; and a new grant's token is larger than any before the crash.
  BOOST_TEST(c.post("/v1/locks/pool/acquire", permit_body("o4", 60'000, 3)).status == 409);
  BOOST_TEST(str(c.post("/v1/locks/pool/acquire", permit_body("o4", 60'000, 2)), "error") ==
             "permits_mismatch");
  BOOST_TEST(c.post("/v1/locks/pool/release", release_body("o2", tokens[2])).status == 200);
  auto after = c.post("/v1/locks/pool/acquire", permit_body("o4", 60'000, 3));
  BOOST_REQUIRE(after.status == 200);
  BOOST_TEST(num(after, "slot") == 2);
  BOOST_TEST(token_of(after) > queued_token);
}

BOOST_AUTO_TEST_CASE(malformed_permits_are_400_and_change_nothing) {
  temp_dir dir;
  batond_process server(dir.path(), {"--max-permits", "5"});
  auto c = server.client();
  BOOST_TEST(c.get("/v1/capabilities").json.at("permits_max").to_number<int>() == 5);
  auto held = c.post("/v1/locks/k/acquire", permit_body("a", 60'000, 2));
  BOOST_REQUIRE(held.status == 200);
  for (const auto& bad : {boost::json::value(0), boost::json::value(-1), boost::json::value(1.5),
                          boost::json::value("3"), boost::json::value(6), boost::json::value(nullptr)}) {
    auto r = c.post("/v1/locks/k/acquire", permit_body("b", 60'000, bad));
    BOOST_TEST(r.status == 400, serialize(bad));
    BOOST_TEST(str(r, "error") == "bad_request");
    BOOST_TEST(str(r, "message").find("permits") != std::string::npos);
    auto over = c.post("/v1/locks/fresh/acquire", permit_body("b", 60'000, bad));
    BOOST_TEST(over.status == 400, serialize(bad));
  }
  BOOST_TEST(str(c.post("/v1/locks/k/acquire", permit_body("b", 60'000, 6)), "message").find("1 to 5") !=
             std::string::npos);
  // Nothing changed: one holder of k, "fresh" free, no token taken.
  auto g = c.get("/v1/locks/k");
  BOOST_REQUIRE(g.status == 200);
  BOOST_TEST(g.json.at("holders").as_array().size() == 1u);
  BOOST_TEST(c.get("/v1/locks/fresh").status == 404);
  auto next = c.post("/v1/locks/k/acquire", permit_body("b", 60'000, 2));
  BOOST_REQUIRE(next.status == 200);
  BOOST_TEST(token_of(next) == token_of(held) + 1);
  // A break of a key of permits must name the permit.
  auto unnamed = c.post("/v1/locks/k/break", "{}");
  BOOST_TEST(unnamed.status == 400);
  BOOST_TEST(str(unnamed, "message").find("token") != std::string::npos);
  BOOST_TEST(c.post("/v1/locks/k/break", "{\"token\":" + std::to_string(token_of(next)) + "}").status == 200);
  BOOST_TEST(c.get("/v1/locks/k").json.at("holders").as_array().size() == 1u);
}

BOOST_AUTO_TEST_CASE(batond_refuses_a_max_permits_out_of_range) {
  for (const char* bad : {"0", "65536", "-3"}) {
    temp_dir dir;
    const auto refused = run_to_end({bin_path("batond"), "--data-dir", dir.path().string(), "--listen",
                                     "127.0.0.1:0", "--max-permits", bad},
                                    (dir.path() / "batond.err").string(), 30s);
    BOOST_TEST(refused.code == 2, bad);
    BOOST_TEST(refused.err.find("--max-permits must be 1 to 65535") != std::string::npos, refused.err);
  }
}
