// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE lock_server_health
#include <boost/test/unit_test.hpp>

// The agent's view of its lock server: which outcomes count as failures, and when a failure is logged.

#include "lock_server_health.hpp"

#include "coro.hpp"

#include "baton/client.hpp"
#include "baton/error.hpp"
#include "baton/testing.hpp"

#include <boost/asio/error.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <vector>

using namespace baton::agent;
using namespace std::chrono_literals;
using kind = lock_server_notice::kind;

namespace {
const auto t0 = std::chrono::steady_clock::time_point{} + 1h;
const auto wall0 = std::chrono::system_clock::time_point{} + 24h;
}  // namespace

BOOST_AUTO_TEST_CASE(answers_and_refusals_are_not_failures_transport_and_server_errors_are) {
  BOOST_TEST(!is_lock_server_failure({}));
  BOOST_TEST(!is_lock_server_failure(baton::error::held));
  BOOST_TEST(!is_lock_server_failure(baton::error::lease_lost));
  BOOST_TEST(!is_lock_server_failure(boost::asio::error::operation_aborted));
  for (auto e : {baton::error::connection_failed, baton::error::request_timeout,
                 baton::error::release_timeout, baton::error::acquire_timeout, baton::error::tls_failed,
                 baton::error::unauthorized, baton::error::storage_unavailable, baton::error::server_busy,
                 baton::error::server_error, baton::error::protocol_error})
    BOOST_TEST(is_lock_server_failure(e));
}

BOOST_AUTO_TEST_CASE(the_first_failure_is_logged_at_once_with_its_error) {
  lock_server_health h(30s);
  auto n = h.failed(t0, wall0, "connection refused");
  BOOST_REQUIRE(n);
  BOOST_TEST((n->what == kind::unreachable));
  BOOST_TEST(n->error == "connection refused");
  BOOST_TEST(!h.status().reachable);
  BOOST_TEST(h.status().errors == 1u);
  BOOST_TEST(h.status().last_error == "connection refused");
  BOOST_TEST((h.status().unreachable_since == wall0));
}

BOOST_AUTO_TEST_CASE(failures_that_go_on_are_logged_at_most_once_per_period_with_their_count) {
  lock_server_health h(30s);
  h.failed(t0, wall0, "refused");
  for (int i = 1; i < 30; ++i)
    BOOST_TEST(!h.failed(t0 + i * 1s, wall0, "refused"));
  auto n = h.failed(t0 + 30s, wall0, "timed out");
  BOOST_REQUIRE(n);
  BOOST_TEST((n->what == kind::still_unreachable));
  BOOST_TEST(n->failures == 31u);
  BOOST_TEST(n->down_for == 30s);
  BOOST_TEST(n->error == "timed out");
  BOOST_TEST(!h.failed(t0 + 59s, wall0, "refused"));
  BOOST_TEST(h.failed(t0 + 60s, wall0, "refused").has_value());
  BOOST_TEST(h.status().errors == 33u);
  BOOST_TEST((h.status().unreachable_since == wall0));  // since the first failure, not the latest
}

BOOST_AUTO_TEST_CASE(the_first_answer_after_failures_is_logged_once_and_resets_the_period) {
  lock_server_health h(30s);
  h.failed(t0, wall0, "refused");
  h.failed(t0 + 1s, wall0, "refused");
  auto n = h.answered(t0 + 5s);
  BOOST_REQUIRE(n);
  BOOST_TEST((n->what == kind::reachable));
  BOOST_TEST(n->failures == 2u);
  BOOST_TEST(n->down_for == 5s);
  BOOST_TEST(h.status().reachable);
  BOOST_TEST(!h.status().unreachable_since.has_value());
  BOOST_TEST(h.status().last_error == "refused");  // kept for /readyz: the latest error ever seen
  BOOST_TEST(!h.answered(t0 + 6s));
  // A new outage is logged at once, however soon after the last line.
  auto again = h.failed(t0 + 7s, wall0 + 7s, "reset");
  BOOST_REQUIRE(again);
  BOOST_TEST((again->what == kind::unreachable));
  BOOST_TEST(h.status().errors == 3u);
}

BOOST_AUTO_TEST_CASE(answers_alone_log_nothing_and_the_server_counts_as_reachable) {
  lock_server_health h;
  BOOST_TEST(!h.status().reachable);  // nothing known before the first request
  BOOST_TEST(!h.answered(t0));
  BOOST_TEST(h.status().reachable);
  BOOST_TEST(h.status().errors == 0u);
}

BOOST_AUTO_TEST_CASE(the_observed_backend_passes_a_published_value_through_and_reports_the_outcome) {
  boost::asio::io_context ioc;
  auto inner = std::make_shared<baton::testing::memory_backend>(ioc.get_executor());
  std::vector<boost::system::error_code> seen;
  auto observed = observe_backend(
      inner, [&](const boost::system::error_code& ec, const std::string&) { seen.push_back(ec); });
  baton::acquire_reply granted, refused;
  baton::test::run_coro(ioc, [&]() -> boost::asio::awaitable<void> {
    granted = co_await observed->acquire("k", "a#1", 5000ms, R"({"identity":"a"})", 1000ms);
    refused = co_await observed->acquire("k", "b#2", 5000ms, "", 1000ms);
  }());
  // Without the five-argument form the backend's default refuses any value with invalid_config.
  BOOST_TEST(!granted.ec);
  BOOST_REQUIRE(inner->holder("k"));
  BOOST_TEST(inner->holder("k")->value == R"({"identity":"a"})");
  BOOST_TEST((refused.ec == baton::error::held));
  BOOST_TEST(refused.holder.value == R"({"identity":"a"})");
  BOOST_TEST(seen.size() == 2u);
}

// Issue 25, defect 8: the agent's wrapper forwarded reload_tls but not renew_batch, so every renewal behind
// it went alone. It derives from baton::forwarding_backend now; a client behind it sends its renewals in
// batches.
BOOST_AUTO_TEST_CASE(a_client_behind_the_observed_backend_renews_in_batches) {
  boost::asio::io_context ioc;
  auto server = std::make_shared<baton::testing::memory_backend>(ioc.get_executor());
  // Counts what reaches the server's side of the wrapper.
  struct counting final : baton::forwarding_backend {
    using forwarding_backend::forwarding_backend;
    int singles = 0, batches = 0;
    boost::asio::awaitable<baton::renew_reply> renew(std::string k, std::string o, std::uint64_t t,
                                                     baton::milliseconds ttl,
                                                     baton::milliseconds to) override {
      ++singles;
      return forwarding_backend::renew(std::move(k), std::move(o), t, ttl, to);
    }
    boost::asio::awaitable<std::vector<baton::renew_reply>> renew_batch(std::span<const baton::renew_entry> e,
                                                                        baton::milliseconds to) override {
      ++batches;
      co_return co_await forwarding_backend::renew_batch(e, to);  // memory_backend: one by one, counted above
    }
  };
  auto inner = std::make_shared<counting>(server);
  int observed = 0;
  auto wrapped =
      observe_backend(inner, [&](const boost::system::error_code&, const std::string&) { ++observed; });
  baton::client_config cfg;
  cfg.identity = "agent";
  cfg.request_timeout = 2000ms;
  cfg.renew_batch_window = 100ms;
  baton::client c(ioc.get_executor(), cfg, wrapped);
  baton::test::run_coro(ioc, [&]() -> boost::asio::awaitable<void> {
    std::vector<baton::lease> leases;
    for (int i = 0; i < 10; ++i) {
      baton::lease_options o;
      o.ttl = 10s;
      o.renew_every = 300ms;
      o.jitter = 0;
      leases.push_back(co_await c.async_acquire("k" + std::to_string(i), o));
    }
    for (int i = 0; i < 3000 && c.stats().renews < 20; ++i) {
      boost::asio::steady_timer t(ioc, 10ms);
      co_await t.async_wait(boost::asio::use_awaitable);
    }
    for (auto& l : leases)
      co_await l.async_release();
  }());
  BOOST_TEST(c.stats().renews >= 20u);
  BOOST_TEST(inner->batches >= 1, "no renewal reached the wrapped backend as a batch");
  BOOST_TEST(observed > 0);
}
