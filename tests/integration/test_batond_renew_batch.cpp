// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE batond_renew_batch
#include <boost/test/unit_test.hpp>

// POST /v1/renew against a real batond (docs/protocol.md, "renew batch").

#include "batond_fixture.hpp"
#include "lock_requests.hpp"

#include <boost/json/serialize.hpp>

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

using namespace baton::test;
using namespace std::chrono_literals;
namespace json = boost::json;

namespace {

struct lease {
  std::string key, owner;
  std::uint64_t token;
  int ttl_ms;
};

std::string batch_body(const std::vector<lease>& leases) {
  json::array a;
  for (const auto& l : leases)
    a.push_back(json::object{{"key", l.key}, {"owner", l.owner}, {"token", l.token}, {"ttl_ms", l.ttl_ms}});
  return json::serialize(json::object{{"leases", std::move(a)}});
}

std::uint64_t acquire(http_client& c, const std::string& key, std::string_view owner, int ttl_ms) {
  auto r = c.post("/v1/locks/" + key + "/acquire", acquire_body(owner, ttl_ms));
  BOOST_REQUIRE_MESSAGE(r.status == 200, r.body);
  return token_of(r);
}

std::int64_t remaining_ms(http_client& c, const std::string& key) {
  auto r = c.get("/v1/locks/" + key);
  BOOST_REQUIRE_MESSAGE(r.status == 200, key + ": " + r.body);
  return r.json.at("ttl_remaining_ms").to_number<std::int64_t>();
}

const json::array& results(const http_reply& r) {
  BOOST_REQUIRE_MESSAGE(r.status == 200, r.body);
  return r.json.at("results").as_array();
}

std::string field(const json::value& v, const char* name) {
  return std::string(v.at(name).as_string());
}

}  // namespace

BOOST_AUTO_TEST_CASE(capabilities_advertise_the_batch_and_its_limits) {
  temp_dir dir;
  batond_process server(dir.path(), {"--max-body-bytes", "65536"});
  auto r = server.client().get("/v1/capabilities");
  BOOST_REQUIRE(r.status == 200);
  const auto& features = r.json.at("features").as_array();
  BOOST_TEST(std::find(features.begin(), features.end(), json::value("renew_batch")) != features.end());
  BOOST_TEST(r.json.at("renew_batch_max").to_number<int>() == 1000);
  BOOST_TEST(r.json.at("max_body_bytes").to_number<int>() == 65536);
}

// Each entry is answered as the single renew of the same lease in the same state is, in request order.
BOOST_AUTO_TEST_CASE(a_mixed_batch_is_answered_entry_by_entry_like_single_renews) {
  temp_dir dir;
  batond_process server(dir.path());
  auto c = server.client();
  const auto a = acquire(c, "a", "me", 20000);
  const auto b = acquire(c, "b", "someone", 60000);
  const auto old = acquire(c, "c", "me", 60000);
  const auto current = acquire(c, "c", "me", 60000);  // supersedes `old`
  const std::vector<lease> leases{{"a", "me", a, 60000},    {"b", "me", b, 60000},
                                  {"free", "me", a, 60000}, {"c", "me", old, 60000},
                                  {"c/d", "me", a, 60000},  {"e\xc3\xa9", "me", current + 99, 60000}};
  auto r = c.post("/v1/renew", batch_body(leases));
  BOOST_TEST(r.content_type == "application/json");
  const auto& out = results(r);
  BOOST_REQUIRE(out.size() == leases.size());
  BOOST_TEST(field(out[0], "key") == "a");
  BOOST_TEST(field(out[0], "owner") == "me");
  BOOST_TEST(out[0].at("token").to_number<std::uint64_t>() == a);
  BOOST_TEST(out[0].at("ttl_ms").to_number<int>() == 60000);
  const std::vector<std::string> reasons{"",         "owner_mismatch", "not_held", "token_mismatch",
                                         "not_held", "not_held"};
  for (std::size_t i = 1; i < out.size(); ++i) {
    BOOST_TEST_CONTEXT("entry " << i) {
      BOOST_TEST(field(out[i], "key") == leases[i].key);
      BOOST_TEST(field(out[i], "error") == "lost");
      BOOST_TEST(field(out[i], "reason") == reasons[i]);
      BOOST_TEST(!field(out[i], "message").empty());
      // The single renew says the same.
      auto single = c.post("/v1/locks/" +
                               std::string(i == 4   ? "c%2Fd"
                                           : i == 5 ? "e%C3%A9"
                                                    : leases[i].key) +
                               "/renew",
                           renew_body(leases[i].owner, leases[i].token, leases[i].ttl_ms));
      BOOST_TEST(single.status == 409);
      BOOST_TEST(field(single.json, "reason") == reasons[i]);
    }
  }
  // The success moved the lease from 20 s to 60 s; the refusals changed nothing.
  BOOST_TEST(remaining_ms(c, "a") > 20'000);
  BOOST_TEST(field(c.get("/v1/locks/b").json, "owner") == "someone");
  BOOST_TEST(c.get("/v1/locks/c").json.at("token").to_number<std::uint64_t>() == current);
  BOOST_TEST(c.get("/v1/locks/free").status == 404);
  auto metrics = c.get("/metrics").body;
  BOOST_TEST(
      metrics.find(R"(baton_operations_total{op="renew_batch",outcome="answered"} 1)") != std::string::npos,
      metrics);
  BOOST_TEST(metrics.find(R"(baton_requests_total{route="renew_batch",code="200"} 1)") != std::string::npos);
}

// A malformed batch renews nothing, even its well-formed entries, and gets a JSON error; batond stays up.
BOOST_AUTO_TEST_CASE(a_malformed_batch_is_refused_whole_with_a_json_error_and_changes_nothing) {
  temp_dir dir;
  batond_process server(dir.path(), {"--max-body-bytes", "65536"});
  auto c = server.client();
  const auto t = acquire(c, "k", "me", 30000);
  const std::string good =
      R"({"key":"k","owner":"me","token":)" + std::to_string(t) + R"(,"ttl_ms":3600000})";
  std::string too_many = R"({"leases":[)";
  for (int i = 0; i < 1001; ++i)
    too_many += (i ? "," : "") + std::string(R"({"key":"k)") + std::to_string(i) +
                R"(","owner":"me","token":1,"ttl_ms":1000})";
  too_many += "]}";
  const std::vector<std::string> bodies{
      "",
      "{",
      "[]",
      R"({})",
      R"({"leases":[]})",
      R"({"leases":"k"})",
      R"({"leases":[)" + good + R"(,{"key":"","owner":"me","token":1,"ttl_ms":1000}]})",
      R"({"leases":[)" + good + R"(,{"key":"x","owner":"me","token":0,"ttl_ms":1000}]})",
      R"({"leases":[)" + good + R"(,{"key":"x","owner":"me","token":1,"ttl_ms":5}]})",
      R"({"leases":[)" + good + R"(,{"key":"x","owner":"me\u0007","token":1,"ttl_ms":1000}]})",
      R"({"leases":[)" + good + R"(,{"key":"x","token":1,"ttl_ms":1000}]})",
      R"({"leases":[)" + good + "," + good + "]}",  // the same key and token twice
      R"({"leases":[)" + good + R"(],"leases":[]})",
      too_many,
  };
  for (const auto& body : bodies) {
    auto r = c.post("/v1/renew", body);
    BOOST_TEST_CONTEXT(body.substr(0, 120)) {
      BOOST_TEST(r.status == 400);
      BOOST_TEST(r.content_type == "application/json");
      BOOST_TEST(field(r.json, "error") == "bad_request");
      BOOST_TEST(!field(r.json, "message").empty());
    }
  }
  // Wrong method, wrong content type, a body over the limit: the answers every POST route gives.
  BOOST_TEST(c.get("/v1/renew").status == 405);
  BOOST_TEST(server.client().post("/v1/renew", std::string(70'000, ' ')).status == 413);
  BOOST_TEST(http_client::raw(server.port(),
                              "POST /v1/renew HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                              "Content-Type: text/plain\r\nContent-Length: 2\r\n\r\n{}")
                 .status == 415);
  // Nothing was renewed: the lease still has at most its first 30 s.
  BOOST_TEST(remaining_ms(c, "k") <= 30000);
  BOOST_TEST(c.get("/healthz").status == 200);
  auto ok = c.post("/v1/renew", R"({"leases":[)" + good + "]}");
  BOOST_TEST(results(ok).size() == 1u);
  BOOST_TEST(remaining_ms(c, "k") > 30000);
}

// With tokens, each key needs write access; one key the client may not write refuses the whole batch.
BOOST_AUTO_TEST_CASE(with_tokens_a_batch_with_one_key_out_of_reach_is_refused_whole) {
  temp_dir dir, scratch;
  const auto tokens = scratch.path() / "tokens";
  {
    // The SHA-256 of "writer-token": writes under jobs/, reads under status/.
    std::ofstream out(tokens);
    out << "sha256:3590c0a59f72ce02700194a05f228a725c1f135a6dcb3ded9b2d86ab6a6f52cb writer rw:jobs/ "
           "ro:status/\n";
  }
  batond_process server(dir.path(), {"--tokens-file", tokens.string()});
  auto c = server.client();
  c.set_authorization("Bearer writer-token");
  const auto t = acquire(c, "jobs%2Fa", "me", 30000);
  const lease mine{"jobs/a", "me", t, 60000};
  for (const auto& other : {lease{"status/x", "me", 1, 60000}, lease{"elsewhere", "me", 1, 60000}}) {
    auto r = server.client();
    r.set_authorization("Bearer writer-token");
    auto refused = r.post("/v1/renew", batch_body({mine, other}));
    BOOST_TEST(refused.status == 403);
    BOOST_TEST(field(refused.json, "error") == "forbidden");
    BOOST_TEST(field(refused.json, "message").find(other.key) != std::string::npos, refused.body);
  }
  BOOST_TEST(remaining_ms(c, "jobs%2Fa") <= 30000);
  BOOST_TEST(server.client().post("/v1/renew", batch_body({mine})).status == 401);
  auto ok = c.post("/v1/renew", batch_body({mine}));
  BOOST_TEST(results(ok).size() == 1u);
  BOOST_TEST(remaining_ms(c, "jobs%2Fa") > 30000);
}

// A TTL raised by a batch is durable before the answer: a crash right after restores the lease with it.
BOOST_AUTO_TEST_CASE(a_ttl_raised_by_a_batch_survives_a_crash) {
  temp_dir dir;
  unsigned short port;
  std::uint64_t a, b;
  {
    batond_process server(dir.path());
    port = server.port();
    auto c = server.client();
    a = acquire(c, "a", "me", 10000);
    b = acquire(c, "b", "me", 10000);
    auto r = c.post("/v1/renew", batch_body({{"a", "me", a, 120000}, {"b", "me", b, 120000}}));
    BOOST_REQUIRE(results(r).size() == 2u);
    server.kill9();
  }
  batond_process again(dir.path(), {}, port);
  auto c = again.client();
  // Restored for the largest TTL granted (120 s) from the restart; 10 s if the extends had been lost.
  BOOST_TEST(remaining_ms(c, "a") > 60'000);
  BOOST_TEST(remaining_ms(c, "b") > 60'000);
  auto r = c.post("/v1/renew", batch_body({{"a", "me", a, 1000}, {"b", "me", b + 1, 1000}}));
  const auto& out = results(r);
  BOOST_TEST(out[0].as_object().contains("token"));
  BOOST_TEST(field(out[1], "reason") == "token_mismatch");
}
