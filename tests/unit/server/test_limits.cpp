// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE limits
#include <boost/test/unit_test.hpp>

#include "limits.hpp"
#include "lock_table.hpp"

#include "baton/common/log.hpp"

#include <stdexcept>

using namespace baton::server;
using namespace std::chrono_literals;

namespace {
const time_point t0{std::chrono::hours(1000)};
}

BOOST_AUTO_TEST_CASE(a_bucket_serves_its_burst_then_refuses_with_the_time_until_the_next_token) {
  token_bucket b(10, 3, t0);  // 10 per second: one token every 100 ms
  BOOST_TEST(!b.take(t0).has_value());
  BOOST_TEST(!b.take(t0).has_value());
  BOOST_TEST(!b.take(t0).has_value());
  auto wait = b.take(t0);
  BOOST_REQUIRE(wait.has_value());
  BOOST_TEST(wait->count() == 100);
  auto later = b.take(t0 + 40ms);
  BOOST_REQUIRE(later.has_value());
  BOOST_TEST(later->count() == 60);
  BOOST_TEST(!b.take(t0 + 100ms).has_value());
  BOOST_TEST(b.take(t0 + 100ms).has_value());
}

BOOST_AUTO_TEST_CASE(a_bucket_refills_to_its_burst_and_no_further) {
  token_bucket b(2, 2, t0);
  BOOST_TEST(!b.take(t0).has_value());
  BOOST_TEST(!b.take(t0).has_value());
  BOOST_TEST(!b.full(t0));
  BOOST_TEST(b.full(t0 + 1s));
  // An hour idle still allows only the burst.
  time_point t = t0 + 1h;
  BOOST_TEST(!b.take(t).has_value());
  BOOST_TEST(!b.take(t).has_value());
  BOOST_TEST(b.take(t).has_value());
}

BOOST_AUTO_TEST_CASE(a_clock_that_steps_back_adds_no_tokens) {
  token_bucket b(1, 1, t0);
  BOOST_TEST(!b.take(t0).has_value());
  BOOST_TEST(b.take(t0 - 10s).has_value());
  BOOST_TEST(b.take(t0 + 500ms).has_value());
  BOOST_TEST(!b.take(t0 + 1s).has_value());
}

BOOST_AUTO_TEST_CASE(refused_requests_do_not_consume_tokens) {
  token_bucket b(1, 1, t0);
  BOOST_TEST(!b.take(t0).has_value());
  for (int i = 0; i < 100; ++i)
    BOOST_TEST(b.take(t0 + std::chrono::milliseconds(i)).has_value());
  BOOST_TEST(!b.take(t0 + 1s).has_value());
}

BOOST_AUTO_TEST_CASE(each_client_has_its_own_bucket) {
  rate_limiter r(1, 2);
  BOOST_TEST(!r.admit("10.0.0.1", t0).has_value());
  BOOST_TEST(!r.admit("10.0.0.1", t0).has_value());
  auto refused = r.admit("10.0.0.1", t0);
  BOOST_REQUIRE(refused.has_value());
  BOOST_TEST(refused->count() == 1000);
  BOOST_TEST(!r.admit("10.0.0.2", t0).has_value());
  BOOST_TEST(!r.admit("name:alice", t0).has_value());
  BOOST_TEST(!r.admit("10.0.0.1", t0 + 1s).has_value());
  BOOST_TEST(r.tracked() == 3u);
}

BOOST_AUTO_TEST_CASE(a_rate_of_zero_turns_the_limit_off_and_tracks_nobody) {
  rate_limiter r(0, 0);
  for (int i = 0; i < 1000; ++i)
    BOOST_TEST(!r.admit("10.0.0.1", t0).has_value());
  BOOST_TEST(r.tracked() == 0u);
}

BOOST_AUTO_TEST_CASE(a_burst_of_zero_means_one_second_of_the_rate) {
  rate_limiter r(5, 0);
  for (int i = 0; i < 5; ++i)
    BOOST_TEST(!r.admit("c", t0).has_value());
  BOOST_TEST(r.admit("c", t0).has_value());
}

BOOST_AUTO_TEST_CASE(the_table_is_bounded_idle_clients_are_forgotten_and_the_rest_share_one_bucket) {
  rate_limiter r(1, 1, 2);
  BOOST_TEST(!r.admit("a", t0).has_value());
  BOOST_TEST(!r.admit("b", t0).has_value());
  BOOST_TEST(r.tracked() == 2u);
  // Table full, nobody idle: "c" and "d" share the overflow bucket (one token between them).
  BOOST_TEST(!r.admit("c", t0).has_value());
  BOOST_TEST(r.admit("d", t0).has_value());
  BOOST_TEST(r.tracked() == 2u);
  // Two seconds on, "a" and "b" are full again and make room.
  BOOST_TEST(!r.admit("e", t0 + 2s).has_value());
  BOOST_TEST(r.tracked() == 1u);
  // A refused client stays refused: a new table entry does not reset it.
  BOOST_TEST(!r.admit("e", t0 + 3s).has_value());
  BOOST_TEST(r.admit("e", t0 + 3s).has_value());
}

BOOST_AUTO_TEST_CASE(retry_after_is_whole_seconds_rounded_up_and_at_least_one) {
  BOOST_TEST(retry_after_seconds(0ms) == "1");
  BOOST_TEST(retry_after_seconds(1ms) == "1");
  BOOST_TEST(retry_after_seconds(1000ms) == "1");
  BOOST_TEST(retry_after_seconds(1001ms) == "2");
  BOOST_TEST(retry_after_seconds(59'500ms) == "60");
}

BOOST_AUTO_TEST_CASE(options_out_of_range_are_refused_naming_the_flag) {
  limits_options ok;
  BOOST_CHECK_NO_THROW(validate(ok));
  auto refused = [](auto change, std::string flag) {
    limits_options o;
    change(o);
    try {
      validate(o);
      BOOST_ERROR("accepted a bad " + flag);
    } catch (const std::invalid_argument& e) {
      BOOST_TEST(std::string(e.what()).find(flag) != std::string::npos);
    }
  };
  refused([](auto& o) { o.max_connections = 0; }, "--max-connections");
  refused([](auto& o) { o.max_header_bytes = 100; }, "--max-header-bytes");
  refused([](auto& o) { o.max_body_bytes = 0; }, "--max-body-bytes");
  refused([](auto& o) { o.rate_per_second = -1; }, "--rate-limit");
  refused([](auto& o) { o.rate_burst = -1; }, "--rate-burst");
  refused([](auto& o) { o.max_waiters_per_key = 0; }, "--max-waiters-per-key");
  refused([](auto& o) { o.max_waiters = 0; }, "--max-waiters");
  refused([](auto& o) { o.max_connections_per_address = 0; }, "--max-connections-per-address");
  refused([](auto& o) { o.unauthenticated_timeout = std::chrono::milliseconds(0); },
          "--unauthenticated-timeout-ms");
}

BOOST_AUTO_TEST_CASE(default_waiters_stay_below_default_connections_and_one_address_below_the_total) {
  limits_options o;
  BOOST_TEST(o.max_waiters < o.max_connections);
  BOOST_TEST(o.max_connections_per_address < o.max_connections);
}

// --max-locks and a client's quota are checked against these counts (lock_service), so every change of the
// table keeps them exact.
BOOST_AUTO_TEST_CASE(the_lock_table_counts_leases_per_client_through_every_change) {
  lock_table t;
  const auto now = baton::server::clock::now();
  BOOST_REQUIRE(std::holds_alternative<acquire_granted>(t.acquire("a", "o", 1000ms, now, "x")));
  BOOST_REQUIRE(std::holds_alternative<acquire_granted>(t.acquire("b", "o", 5000ms, now, "x")));
  BOOST_TEST(t.size_of("x") == 2u);
  BOOST_TEST(t.size_of("y") == 0u);
  // Re-granted to its holder: no new lease. Taken over by another client after expiry: moves.
  BOOST_REQUIRE(std::holds_alternative<acquire_granted>(t.acquire("a", "o", 1000ms, now, "x")));
  BOOST_TEST(t.size_of("x") == 2u);
  BOOST_REQUIRE(std::holds_alternative<acquire_granted>(t.acquire("a", "p", 1000ms, now + 2s, "y")));
  BOOST_TEST(t.size_of("x") == 1u);
  BOOST_TEST(t.size_of("y") == 1u);
  auto again = std::get<acquire_granted>(t.acquire("a", "p", 1000ms, now + 2s, "y"));
  BOOST_TEST((t.release("a", "p", again.token, now + 2s, "y").outcome == release_outcome::released));
  BOOST_TEST(t.size_of("y") == 0u);
  BOOST_TEST(t.expire(now + 10s).size() == 1u);
  BOOST_TEST(t.size_of("x") == 0u);
  t.restore("r", "o", 100, 1000ms, now, "z");
  t.restore("r", "o", 101, 1000ms, now, "w");  // a later record of the same key
  BOOST_TEST(t.size_of("z") == 0u);
  BOOST_TEST(t.size_of("w") == 1u);
  t.forget("r", 101);
  BOOST_TEST(t.size_of("w") == 0u);
  BOOST_TEST(t.size() == 0u);
}

BOOST_AUTO_TEST_CASE(the_log_throttle_lets_n_lines_of_an_event_a_second_and_counts_the_rest) {
  baton::log::throttle gate(3);
  const auto start = baton::log::throttle::clock::time_point{} + 1000h;
  for (int i = 0; i < 3; ++i)
    BOOST_TEST(gate.admit("tls_handshake_failed", start + std::chrono::milliseconds(i)).value() == 0u);
  for (int i = 0; i < 5; ++i)
    BOOST_TEST(!gate.admit("tls_handshake_failed", start + 500ms).has_value());
  BOOST_TEST(gate.admit("other_event", start + 500ms).value() == 0u);  // each event has its own budget
  BOOST_TEST(gate.admit("tls_handshake_failed", start + 1000ms).value() == 5u);  // a new window says how many
  BOOST_TEST(gate.admit("tls_handshake_failed", start + 1001ms).value() == 0u);
}
