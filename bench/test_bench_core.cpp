// SPDX-License-Identifier: Apache-2.0
// Tests of the load generator's pure parts: if these are wrong, every figure in docs/benchmarks.md is.
#define BOOST_TEST_MODULE bench_core
#include <boost/test/unit_test.hpp>

#include "http_response.hpp"
#include "latency_histogram.hpp"
#include "open_loop.hpp"
#include "resp_reply.hpp"
#include "target.hpp"

#include <algorithm>
#include <vector>

using namespace baton::bench;

BOOST_AUTO_TEST_CASE(histogram_is_exact_below_64_us_and_within_two_percent_above) {
  for (std::uint64_t v = 0; v < 64; ++v)
    BOOST_TEST(latency_histogram::midpoint_of(latency_histogram::index_of(v)) == v);
  for (std::uint64_t v : {64ull, 100ull, 999ull, 1'000ull, 4'999ull, 123'456ull, 10'000'000ull}) {
    double mid = latency_histogram::midpoint_of(latency_histogram::index_of(v));
    BOOST_TEST(std::abs(mid - static_cast<double>(v)) / static_cast<double>(v) < 0.02,
               "v=" << v << " mid=" << mid);
  }
  // Buckets are ordered: a larger value never lands in an earlier bucket.
  for (std::uint64_t v = 1; v < 1'000'000; v += 7)
    BOOST_TEST(latency_histogram::index_of(v) >= latency_histogram::index_of(v - 1));
}

BOOST_AUTO_TEST_CASE(histogram_quantiles_follow_the_samples) {
  latency_histogram h;
  for (std::uint64_t v = 1; v <= 1000; ++v)
    h.record(v * 10);  // 10 µs .. 10 ms, uniform
  BOOST_TEST(h.count() == 1000u);
  BOOST_TEST(std::abs(h.quantile_micros(0.50) - 5000) < 100);
  BOOST_TEST(std::abs(h.quantile_micros(0.99) - 9900) < 200);
  BOOST_TEST(h.quantile_micros(1.0) <= 10000);
  latency_histogram other;
  other.record(50'000);
  h.merge(other);
  BOOST_TEST(h.max_micros() == 50'000u);
  BOOST_TEST(latency_histogram{}.quantile_micros(0.99) == 0);
}

BOOST_AUTO_TEST_CASE(response_with_content_length_is_framed_by_it) {
  std::string scratch;
  http_response r;
  std::string in = "HTTP/1.1 200 OK\r\nServer: batond\r\ncontent-length: 5\r\n\r\nhelloHTTP/1.1";
  BOOST_TEST((parse_http_response(in, scratch, r) == parse_status::complete));
  BOOST_TEST(r.status == 200);
  BOOST_TEST(r.body == "hello");
  BOOST_TEST(r.consumed == in.size() - 8);
  BOOST_TEST(!r.close);
}

BOOST_AUTO_TEST_CASE(partial_responses_ask_for_more_bytes) {
  std::string scratch;
  http_response r;
  std::string full = "HTTP/1.1 409 Conflict\r\nContent-Length: 4\r\nConnection: close\r\n\r\nheld";
  for (std::size_t n = 0; n < full.size(); ++n)
    BOOST_TEST((parse_http_response(full.substr(0, n), scratch, r) == parse_status::need_more), "n=" << n);
  BOOST_TEST((parse_http_response(full, scratch, r) == parse_status::complete));
  BOOST_TEST(r.status == 409);
  BOOST_TEST(r.close);
}

BOOST_AUTO_TEST_CASE(chunked_response_is_decoded) {
  // The shape of etcd's /v3/lease/keepalive answer through the gateway.
  std::string scratch;
  http_response r;
  std::string in =
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n6\r\n{\"a\":1\r\n2;ext=1\r\n}\n\r\n0\r\n\r\n";
  BOOST_TEST((parse_http_response(in, scratch, r) == parse_status::complete));
  BOOST_TEST(r.body == "{\"a\":1}\n");
  BOOST_TEST(r.consumed == in.size());
  BOOST_TEST((parse_http_response(in.substr(0, in.size() - 2), scratch, r) == parse_status::need_more));
}

BOOST_AUTO_TEST_CASE(garbage_is_malformed) {
  std::string scratch;
  http_response r;
  BOOST_TEST((parse_http_response("SSH-2.0-OpenSSH\r\n\r\n", scratch, r) == parse_status::malformed));
  BOOST_TEST((parse_http_response("HTTP/1.1 200 OK\r\n\r\n", scratch, r) == parse_status::malformed));
  BOOST_TEST((parse_http_response("HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", scratch, r) ==
              parse_status::malformed));
  BOOST_TEST(
      (parse_http_response(std::string(20000, 'x'), scratch, r, 16 * 1024) == parse_status::malformed));
}

namespace {
connection_state state_for(std::size_t id) {
  connection_state s;
  s.id = id;
  s.owner = "bench-" + std::to_string(id);
  s.lease_id = "7587";
  return s;
}
}  // namespace

BOOST_AUTO_TEST_CASE(batond_acquire_renew_release_use_the_returned_token) {
  auto t = make_batond_target({"127.0.0.1:7070"});
  auto s = state_for(3);
  std::string out;
  BOOST_TEST(!t->next_request(op_kind::setup, s, out));
  BOOST_TEST(!t->next_request(op_kind::renew, s, out));  // nothing held yet
  BOOST_TEST(t->next_request(op_kind::acquire, s, out));
  BOOST_TEST(out.starts_with("POST /v1/locks/bench%2F3%2F0/acquire HTTP/1.1\r\nHost: 127.0.0.1:7070\r\n"));
  BOOST_TEST(out.ends_with("\r\n\r\n{\"owner\":\"bench-3\",\"ttl_ms\":3600000}"));
  auto r = t->on_response(op_kind::acquire, s, 200,
                          R"({"key":"bench/3/0","owner":"bench-3","token":42,"ttl_ms":3600000})");
  BOOST_TEST((r.what == step_result::kind::done));
  BOOST_REQUIRE(s.held.size() == 1u);
  BOOST_TEST(s.held[0].token == 42u);

  BOOST_TEST(t->next_request(op_kind::renew, s, out));
  BOOST_TEST(out.ends_with("{\"owner\":\"bench-3\",\"token\":42,\"ttl_ms\":3600000}"));
  BOOST_TEST(t->next_request(op_kind::release, s, out));
  BOOST_TEST(out.starts_with("POST /v1/locks/bench%2F3%2F0/release "));
  BOOST_TEST(out.ends_with("{\"owner\":\"bench-3\",\"token\":42}"));
  BOOST_TEST(
      (t->on_response(op_kind::release, s, 200, R"({"released":true})").what == step_result::kind::done));
  BOOST_TEST(!t->next_request(op_kind::release, s, out));  // each lock is released exactly once

  auto refused = t->on_response(op_kind::acquire, s, 409, R"({"error":"held"})");
  BOOST_TEST((refused.what == step_result::kind::failed));
  BOOST_TEST(refused.error == "http_409");
}

BOOST_AUTO_TEST_CASE(batond_cycle_is_two_requests) {
  auto t = make_batond_target({"h:1"});
  auto s = state_for(0);
  std::string out;
  BOOST_TEST(t->next_request(op_kind::cycle, s, out));
  BOOST_TEST(out.starts_with("POST /v1/locks/bench%2Fcycle%2F0/acquire "));
  BOOST_TEST((t->on_response(op_kind::cycle, s, 200, R"({"token":9})").what == step_result::kind::more));
  BOOST_TEST(t->next_request(op_kind::cycle, s, out));
  BOOST_TEST(out.ends_with("{\"owner\":\"bench-0\",\"token\":9}"));
  BOOST_TEST(
      (t->on_response(op_kind::cycle, s, 200, R"({"released":true})").what == step_result::kind::done));
  BOOST_TEST(s.cycle_step == 0);
}

BOOST_AUTO_TEST_CASE(etcd_acquire_is_a_create_if_absent_txn_and_its_revision_the_token) {
  auto t = make_etcd_target({"127.0.0.1:2379"});
  auto s = state_for(0);
  std::string out;
  BOOST_TEST(t->next_request(op_kind::setup, s, out));
  BOOST_TEST(out.starts_with("POST /v3/lease/grant "));
  BOOST_TEST(out.ends_with("{\"TTL\":\"3600\"}"));
  BOOST_TEST((t->on_response(op_kind::setup, s, 200,
                             R"({"header":{"revision":"1"},"ID":"4111120335666468101","TTL":"3600"})")
                  .what == step_result::kind::done));
  BOOST_TEST(s.lease_id == "4111120335666468101");

  BOOST_TEST(t->next_request(op_kind::acquire, s, out));
  // base64("bench/0/0") == "YmVuY2gvMC8w", base64("bench-0") == "YmVuY2gtMA=="
  BOOST_TEST(
      out.find(
          R"({"compare":[{"key":"YmVuY2gvMC8w","target":"CREATE","result":"EQUAL","create_revision":"0"}])") !=
      std::string::npos);
  BOOST_TEST(
      out.find(
          R"("request_put":{"key":"YmVuY2gvMC8w","value":"YmVuY2gtMA==","lease":"4111120335666468101"})") !=
      std::string::npos);
  auto held = t->on_response(op_kind::acquire, s, 200,
                             R"({"header":{"cluster_id":"1","revision":"2"},"responses":[]})");
  BOOST_TEST((held.what == step_result::kind::failed));
  BOOST_TEST(held.error == "refused");
  BOOST_TEST(s.held.empty());
  BOOST_TEST(t->next_request(op_kind::acquire, s, out));
  BOOST_TEST(
      (t->on_response(op_kind::acquire, s, 200,
                      R"({"header":{"cluster_id":"1","revision":"17"},"succeeded":true,"responses":[]})")
           .what == step_result::kind::done));
  BOOST_REQUIRE(s.held.size() == 1u);
  BOOST_TEST(s.held[0].key_number == 1u);
  BOOST_TEST(s.held[0].token == 17u);

  BOOST_TEST(t->next_request(op_kind::renew, s, out));
  BOOST_TEST(out.ends_with("{\"ID\":\"4111120335666468101\"}"));
  BOOST_TEST((
      t->on_response(op_kind::renew, s, 200, R"({"result":{"header":{},"ID":"4111120335666468101"}})").what ==
      step_result::kind::failed));  // a lease etcd no longer knows comes back without TTL

  BOOST_TEST(t->next_request(op_kind::release, s, out));
  BOOST_TEST(out.find(R"("key":"YmVuY2gvMC8x","target":"CREATE","result":"EQUAL","create_revision":"17")") !=
             std::string::npos);
  BOOST_TEST(out.find(R"("request_delete_range":{"key":"YmVuY2gvMC8x"})") != std::string::npos);
}

namespace {
using namespace std::chrono_literals;
using tp = open_loop_schedule::clock::time_point;
const tp t0 = tp{} + 1000s;  // any fixed point: the schedule never reads a clock
}  // namespace

BOOST_AUTO_TEST_CASE(open_loop_spreads_the_rate_evenly_over_connections) {
  // 1,000/s over 4 connections: connection i sends at i, i+4, i+8, ... ms, so together one request per ms.
  std::vector<tp> all;
  for (std::size_t i = 0; i < 4; ++i) {
    open_loop_schedule s(t0, 1000, 4, i);
    for (std::uint64_t k = 0; k < 250; ++k)
      all.push_back(s.intended(k));
  }
  std::sort(all.begin(), all.end());
  for (std::size_t n = 0; n < all.size(); ++n)
    BOOST_TEST((all[n] - t0 == std::chrono::milliseconds(n)), "n=" << n);
  // Computed from the start each time: no drift after a million requests.
  open_loop_schedule one(t0, 3, 1, 0);  // a period of 1/3 s, not exact in nanoseconds
  BOOST_TEST(std::chrono::abs(one.intended(3'000'000) - (t0 + 1'000'000s)) < 1us);
}

BOOST_AUTO_TEST_CASE(open_loop_waits_for_the_intended_time_when_early) {
  open_loop_schedule s(t0, 100, 1, 0);  // every 10 ms
  BOOST_TEST((s.send_at(t0 - 5ms) == t0));
  auto r = s.on_send(t0);
  BOOST_TEST((r.intended == t0));
  BOOST_TEST(!r.late);
  BOOST_TEST((s.send_at(t0 + 2ms) == t0 + 10ms));  // answered early: wait for the next slot
  BOOST_TEST(s.sent() == 1u);
}

BOOST_AUTO_TEST_CASE(open_loop_counts_a_stall_against_every_request_it_delayed) {
  // One connection at 100/s; the first request takes 35 ms (a stall), the rest 1 ms. A closed loop would
  // record 35 ms once and then 1 ms; counted from the intended times, the three requests that should have
  // gone out during the stall carry the wait they suffered.
  open_loop_schedule s(t0, 100, 1, 0, 1ms);
  tp now = t0;
  std::vector<std::uint64_t> latencies;
  std::vector<bool> late;
  for (int k = 0; k < 5; ++k) {
    now = s.send_at(now);
    auto r = s.on_send(now);
    now += k == 0 ? 35ms : 1ms;
    latencies.push_back(latency_micros(r.intended, now));
    late.push_back(r.late);
  }
  BOOST_TEST((latencies == std::vector<std::uint64_t>{35'000, 26'000, 17'000, 8'000, 1'000}));
  BOOST_TEST((late == std::vector<bool>{false, true, true, true, false}));
}

BOOST_AUTO_TEST_CASE(open_loop_late_means_more_than_the_threshold) {
  open_loop_schedule s(t0, 1000, 1, 0, 1ms);
  BOOST_TEST(!s.on_send(t0 + 1ms).late);  // exactly the threshold: on time
  BOOST_TEST(s.on_send(t0 + 1ms + 1us + 1ms).late);
  BOOST_TEST(latency_micros(t0 + 5ms, t0 + 4ms) == 0u);  // never negative
}

BOOST_AUTO_TEST_CASE(open_loop_counts_requests_due_before_the_end) {
  open_loop_schedule s(t0, 1000, 4, 1);  // intended at 1, 5, 9, ... ms
  BOOST_TEST(s.due_before(t0) == 0u);
  BOOST_TEST(s.due_before(t0 + 1ms) == 0u);  // due before, not at
  BOOST_TEST(s.due_before(t0 + 1ms + 1ns) == 1u);
  BOOST_TEST(s.due_before(t0 + 9ms) == 2u);
  BOOST_TEST(s.due_before(t0 + 9ms + 1ns) == 3u);
  BOOST_TEST(s.due_before(t0 + 1s) == 250u);
  open_loop_schedule odd(t0, 7, 3, 2);
  for (std::uint64_t k = 1; k < 50; ++k) {
    BOOST_TEST(odd.due_before(odd.intended(k)) == k);
    BOOST_TEST(odd.due_before(odd.intended(k) + 1ns) == k + 1);
  }
}

BOOST_AUTO_TEST_CASE(resp_replies_are_framed) {
  resp_reply r;
  BOOST_TEST((parse_resp_reply("+OK\r\n:1", r) == parse_status::complete));
  BOOST_TEST(r.type == '+');
  BOOST_TEST(r.payload == "OK");
  BOOST_TEST(r.consumed == 5u);
  BOOST_TEST((parse_resp_reply(":0\r\n", r) == parse_status::complete));
  BOOST_TEST(r.type == ':');
  BOOST_TEST(r.payload == "0");
  BOOST_TEST((parse_resp_reply("$-1\r\n", r) == parse_status::complete));
  BOOST_TEST(r.type == '_');
  BOOST_TEST(r.consumed == 5u);
  BOOST_TEST((parse_resp_reply("$5\r\nhello\r\n", r) == parse_status::complete));
  BOOST_TEST(r.payload == "hello");
  BOOST_TEST(r.consumed == 11u);
  BOOST_TEST((parse_resp_reply("-ERR wrong\r\n", r) == parse_status::complete));
  BOOST_TEST(r.type == '-');
  const std::string full = "$5\r\nhello\r\n";
  for (std::size_t n = 0; n < full.size(); ++n)
    BOOST_TEST((parse_resp_reply(full.substr(0, n), r) == parse_status::need_more), "n=" << n);
  BOOST_TEST((parse_resp_reply("*1\r\n:1\r\n", r) == parse_status::malformed));
  BOOST_TEST((parse_resp_reply(":x\r\n", r) == parse_status::malformed));
  BOOST_TEST((parse_resp_reply("$5\r\nhelloXX", r) == parse_status::malformed));
  BOOST_TEST((parse_resp_reply(std::string(20000, '+'), r, 16 * 1024) == parse_status::malformed));
}

BOOST_AUTO_TEST_CASE(redis_lock_is_set_nx_px_and_scripts_that_check_the_owner) {
  auto t = make_redis_target({"127.0.0.1:6379"});
  auto s = state_for(2);
  std::string out;
  BOOST_TEST(!t->next_request(op_kind::setup, s, out));
  BOOST_TEST(t->next_request(op_kind::acquire, s, out));
  BOOST_TEST(out ==
             "*6\r\n$3\r\nSET\r\n$9\r\nbench/2/0\r\n$7\r\nbench-2\r\n$2\r\nNX\r\n$2\r\nPX\r\n"
             "$7\r\n3600000\r\n");
  // The reply is framed as RESP, its type passed as the status.
  http_response res;
  std::string scratch;
  BOOST_TEST((t->parse_response("$-1\r\n", scratch, res) == parse_status::complete));
  auto refused = t->on_response(op_kind::acquire, s, res.status, res.body);
  BOOST_TEST((refused.what == step_result::kind::failed));
  BOOST_TEST(refused.error == "refused");
  BOOST_TEST(t->next_request(op_kind::acquire, s, out));
  BOOST_TEST((t->parse_response("+OK\r\n", scratch, res) == parse_status::complete));
  BOOST_TEST((t->on_response(op_kind::acquire, s, res.status, res.body).what == step_result::kind::done));
  BOOST_REQUIRE(s.held.size() == 1u);
  BOOST_TEST(s.held[0].key_number == 1u);

  BOOST_TEST(t->next_request(op_kind::renew, s, out));
  BOOST_TEST(out.starts_with("*6\r\n$4\r\nEVAL\r\n"));
  BOOST_TEST(out.find("redis.call('pexpire',KEYS[1],ARGV[2])") != std::string::npos);
  BOOST_TEST(out.ends_with("$1\r\n1\r\n$9\r\nbench/2/1\r\n$7\r\nbench-2\r\n$7\r\n3600000\r\n"));
  BOOST_TEST((t->on_response(op_kind::renew, s, ':', "1").what == step_result::kind::done));
  BOOST_TEST((t->on_response(op_kind::renew, s, ':', "0").what == step_result::kind::failed));

  BOOST_TEST(t->next_request(op_kind::release, s, out));
  BOOST_TEST(out.starts_with("*5\r\n$4\r\nEVAL\r\n"));
  BOOST_TEST(out.find("redis.call('del',KEYS[1])") != std::string::npos);
  BOOST_TEST(out.ends_with("$9\r\nbench/2/1\r\n$7\r\nbench-2\r\n"));
  BOOST_TEST((t->on_response(op_kind::release, s, ':', "1").what == step_result::kind::done));
  BOOST_TEST(!t->next_request(op_kind::release, s, out));
  auto error = t->on_response(op_kind::release, s, '-', "ERR");
  BOOST_TEST(error.error == "redis_error");

  BOOST_TEST(t->next_request(op_kind::cycle, s, out));
  BOOST_TEST(out.find("bench/cycle/2") != std::string::npos);
  BOOST_TEST((t->on_response(op_kind::cycle, s, '+', "OK").what == step_result::kind::more));
  BOOST_TEST(t->next_request(op_kind::cycle, s, out));
  BOOST_TEST(out.starts_with("*5\r\n$4\r\nEVAL\r\n"));
  BOOST_TEST((t->on_response(op_kind::cycle, s, ':', "1").what == step_result::kind::done));
  BOOST_TEST(s.cycle_step == 0);
}
