// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE http_lease
#include <boost/test/unit_test.hpp>

#include "batond_fixture.hpp"
#include "coro.hpp"
#include "http_client.hpp"
#include "lease_opts.hpp"

#include "baton/client.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>

#include <array>
#include <atomic>
#include <future>
#include <vector>

#include <signal.h>

using namespace baton;
using namespace baton::test;
using namespace std::chrono_literals;
namespace asio = boost::asio;
using clock_type = std::chrono::steady_clock;

namespace {

client_config config_for(const batond_process& s) {
  client_config c;
  c.server_url = s.url();
  c.request_timeout = 1000ms;
  c.identity = "test";
  return c;
}

}  // namespace

BOOST_AUTO_TEST_CASE(lease_is_renewed_while_held_and_released_on_request) {
  temp_dir dir;
  batond_process server(dir.path());
  asio::io_context ioc;
  client c(ioc.get_executor(), config_for(server));
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto r = co_await c.async_try_acquire("jobs/renewed", lease_opts(600ms, 150ms));
    BOOST_REQUIRE(r.acquired.has_value());
    lease& l = *r.acquired;
    BOOST_TEST(l.active());
    BOOST_TEST(l.owner().rfind("test#", 0) == 0u);
    auto first_deadline = l.deadline();
    co_await sleep_for(1500ms);  // 2.5 TTLs: only renewal keeps it
    BOOST_TEST(l.active());
    BOOST_TEST(c.stats().renews >= 3u);
    BOOST_TEST((l.deadline() > first_deadline));
    auto holder = co_await c.async_get("jobs/renewed");
    BOOST_REQUIRE(holder.has_value());
    BOOST_TEST(holder->token == l.token());
    BOOST_TEST(holder->owner == l.owner());
    BOOST_TEST((co_await l.async_release() == release_outcome::released));
    BOOST_TEST((l.state() == lease_state::released));
    BOOST_TEST(!l.active());
    BOOST_TEST(!(co_await c.async_get("jobs/renewed")).has_value());
    // A second release is safe and says the lock is already free.
    BOOST_TEST((co_await l.async_release() == release_outcome::already_free));
  }());
}

BOOST_AUTO_TEST_CASE(try_acquire_of_a_held_lock_reports_the_holder) {
  temp_dir dir;
  batond_process server(dir.path());
  asio::io_context ioc;
  client a(ioc.get_executor(), config_for(server));
  client b(ioc.get_executor(), config_for(server));
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto ra = co_await a.async_try_acquire("k", lease_opts(5000ms));
    BOOST_REQUIRE(ra.acquired.has_value());
    auto rb = co_await b.async_try_acquire("k", lease_opts(5000ms));
    BOOST_TEST(!rb.acquired.has_value());
    BOOST_TEST(rb.holder.owner == ra.acquired->owner());
    BOOST_TEST(rb.holder.token == ra.acquired->token());
    // Two acquisitions in one process never share an owner.
    auto rc = co_await a.async_try_acquire("other", lease_opts(5000ms));
    BOOST_TEST(rc.acquired->owner() != ra.acquired->owner());
    co_await ra.acquired->async_release();
    co_await rc.acquired->async_release();
  }());
}

BOOST_AUTO_TEST_CASE(two_clients_acquiring_at_once_get_exactly_one_lease) {
  temp_dir dir;
  batond_process server(dir.path());
  asio::io_context ioc;
  std::vector<std::unique_ptr<client>> clients;
  for (int i = 0; i < 8; ++i)
    clients.push_back(std::make_unique<client>(ioc.get_executor(), config_for(server)));
  int winners = 0, done = 0;
  std::vector<lease> held;
  for (auto& cl : clients)
    asio::co_spawn(
        ioc,
        [&, c = cl.get()]() -> asio::awaitable<void> {
          auto r = co_await c->async_try_acquire("race", lease_opts(5000ms));
          if (r.acquired) {
            ++winners;
            held.push_back(std::move(*r.acquired));
          }
          ++done;
        },
        asio::detached);
  for (int i = 0; i < 600 && done < 8; ++i)
    ioc.run_for(50ms);
  BOOST_TEST(done == 8);
  BOOST_TEST(winners == 1);
}

BOOST_AUTO_TEST_CASE(clients_on_a_thread_pool_keep_one_holder_per_key_against_batond) {
  // Two clients given a four-thread pool's executor (no strand of the test's), 20 workers each on the pool's
  // threads, 3 rounds of with_lock over 2 keys: HTTP connections, renewals, long-polls and releases all run
  // concurrently. At most one holder per key at a time, and each key's tokens increase.
  temp_dir dir;
  batond_process server(dir.path());
  asio::thread_pool pool(4);
  client a(pool.get_executor(), config_for(server));
  client b(pool.get_executor(), config_for(server));
  constexpr int workers = 20, rounds = 3, keys = 2;
  std::array<std::atomic<int>, keys> inside{};
  std::array<std::atomic<std::uint64_t>, keys> last_token{};
  std::atomic<int> overlaps{0}, token_regressions{0}, runs{0}, failures{0};
  std::vector<std::future<void>> done;
  for (int w = 0; w < 2 * workers; ++w) {
    client& c = w % 2 == 0 ? a : b;
    done.push_back(asio::co_spawn(
        pool,
        [&, w]() -> asio::awaitable<void> {
          for (int round = 0; round < rounds; ++round) {
            const int k = (w / 2 + round) % keys;
            try {
              co_await c.async_with_lock("pool/" + std::to_string(k), lease_opts(10'000ms),
                                         [&](lease& l) -> asio::awaitable<void> {
                                           if (inside[k].fetch_add(1) != 0) ++overlaps;
                                           if (l.token() <= last_token[k].exchange(l.token()))
                                             ++token_regressions;
                                           asio::steady_timer t(co_await asio::this_coro::executor, 2ms);
                                           co_await t.async_wait(asio::use_awaitable);
                                           inside[k].fetch_sub(1);
                                           ++runs;
                                         });
            } catch (const std::exception& e) {
              ++failures;
              BOOST_TEST_MESSAGE("with_lock failed: " << e.what());
            }
          }
        },
        asio::use_future));
  }
  for (auto& f : done)
    BOOST_REQUIRE((f.wait_for(120s) == std::future_status::ready));
  BOOST_TEST(overlaps.load() == 0);
  BOOST_TEST(token_regressions.load() == 0);
  BOOST_TEST(failures.load() == 0);
  BOOST_TEST(runs.load() == 2 * workers * rounds);
  auto stop_a = asio::co_spawn(pool, a.async_shutdown(5s), asio::use_future);
  auto stop_b = asio::co_spawn(pool, b.async_shutdown(5s), asio::use_future);
  BOOST_REQUIRE((stop_a.wait_for(30s) == std::future_status::ready &&
                 stop_b.wait_for(30s) == std::future_status::ready));
  pool.join();
  BOOST_TEST(a.stats().acquires + b.stats().acquires == static_cast<std::uint64_t>(2 * workers * rounds));
}

// Issue 25, defect 9: a 404 counted as transient, so a URL with /v1 in it (requests went to /v1/v1/...) was
// retried without end and acquire() hung. An answer that is not the lock protocol's is a permanent error.
BOOST_AUTO_TEST_CASE(a_wrong_url_fails_at_once_with_a_clear_error) {
  temp_dir dir;
  batond_process server(dir.path());
  asio::io_context ioc;
  auto cfg = config_for(server);
  cfg.server_url = server.url() + "/v1";
  client c(ioc.get_executor(), cfg);
  const auto started = clock_type::now();
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    try {
      (void)co_await c.async_acquire("k", lease_opts(5000ms));
      BOOST_FAIL("acquire through a wrong URL succeeded");
    } catch (const baton::exception& e) {
      BOOST_TEST((e.code() == error::protocol_error), e.what());
      BOOST_TEST(std::string(e.what()).find("no Baton lock protocol at this URL") != std::string::npos,
                 e.what());
    }
  }());
  // One request and its answer: no retry loop (the old behaviour never ended).
  BOOST_TEST(std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - started).count() <
             10'000);

  // A host and port without a scheme: a hint, not Boost.URL's "mismatch".
  client_config no_scheme;
  no_scheme.server_url = "127.0.0.1:7070";
  try {
    client bad(ioc.get_executor(), no_scheme);
    BOOST_FAIL("a URL without a scheme was accepted");
  } catch (const baton::exception& e) {
    BOOST_TEST((e.code() == error::invalid_config));
    BOOST_TEST(std::string(e.what()).find("has no scheme: write http://127.0.0.1:7070") != std::string::npos,
               e.what());
  }
}

BOOST_AUTO_TEST_CASE(acquire_waits_on_the_long_poll_and_takes_over_at_release) {
  temp_dir dir;
  batond_process server(dir.path());
  asio::io_context ioc;
  client a(ioc.get_executor(), config_for(server));
  client b(ioc.get_executor(), config_for(server));
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto first = co_await a.async_acquire("handover", lease_opts(30000ms));
    std::optional<lease> second;
    auto started = clock_type::now();
    double waited = 0;
    asio::co_spawn(
        co_await asio::this_coro::executor,
        [&]() -> asio::awaitable<void> {
          second.emplace(co_await b.async_acquire("handover", lease_opts(30000ms)));
          waited = std::chrono::duration<double>(clock_type::now() - started).count();
        },
        asio::detached);
    co_await sleep_for(300ms);
    BOOST_TEST(!second.has_value());
    co_await first.async_release();
    for (int i = 0; i < 200 && !second; ++i)
      co_await sleep_for(50ms);
    BOOST_REQUIRE(second.has_value());
    BOOST_TEST(second->token() > first.token());
    BOOST_TEST(waited < 6.0);  // far below the 30 s TTL: the release woke it
    co_await second->async_release();
  }());
}

namespace {
// The sum of batond's baton_requests_total series for `route`, and its one gauge `name`.
double requests_of(const batond_process& server, const std::string& route) {
  const auto text = server.client().get("/metrics").body;
  double sum = 0;
  const std::string prefix = "baton_requests_total{route=\"" + route + "\"";
  for (std::size_t at = text.find(prefix); at != std::string::npos; at = text.find(prefix, at + 1))
    sum += std::stod(text.substr(text.find(' ', at) + 1));
  return sum;
}
double gauge_of(const batond_process& server, const std::string& name) {
  const auto text = server.client().get("/metrics").body;
  const auto at = text.find("\n" + name + " ");
  return at == std::string::npos ? -1 : std::stod(text.substr(at + name.size() + 2));
}
}  // namespace

BOOST_AUTO_TEST_CASE(waiting_acquires_queue_at_batond_and_take_the_lock_in_arrival_order) {
  // Feature acquire_queue: each waiter sends one request, which the server answers with its grant when its
  // turn comes; no waiter is woken for a hand-off that is not its own, and none is overtaken.
  temp_dir dir;
  batond_process server(dir.path());
  asio::io_context ioc;
  client holder_client(ioc.get_executor(), config_for(server));
  constexpr int waiters = 5;
  std::vector<std::unique_ptr<client>> clients;
  for (int i = 0; i < waiters; ++i)
    clients.push_back(std::make_unique<client>(ioc.get_executor(), config_for(server)));
  std::vector<int> order;
  std::uint64_t last_token = 0;
  bool tokens_rise = true;
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto held = co_await holder_client.async_acquire("fifo", lease_opts(30000ms));
    const double acquires_before = requests_of(server, "acquire");
    for (int i = 0; i < waiters; ++i) {
      asio::co_spawn(
          co_await asio::this_coro::executor,
          [&, i]() -> asio::awaitable<void> {
            auto l =
                co_await clients[static_cast<std::size_t>(i)]->async_acquire("fifo", lease_opts(30000ms));
            order.push_back(i);
            tokens_rise = tokens_rise && l.token() > last_token;
            last_token = l.token();
            co_await sleep_for(20ms);
            co_await l.async_release();
          },
          asio::detached);
      // The next waiter arrives once this one is in the queue.
      for (int tries = 0; tries < 200 && gauge_of(server, "baton_acquire_queue_waiting") < i + 1; ++tries)
        co_await sleep_for(20ms);
      BOOST_REQUIRE(gauge_of(server, "baton_acquire_queue_waiting") == i + 1);
    }
    last_token = held.token();
    co_await held.async_release();
    for (int tries = 0; tries < 500 && order.size() < waiters; ++tries)
      co_await sleep_for(20ms);
    BOOST_TEST(requests_of(server, "acquire") - acquires_before == waiters);  // one request per waiter
  }());
  BOOST_TEST(order == (std::vector<int>{0, 1, 2, 3, 4}), boost::test_tools::per_element());
  BOOST_TEST(tokens_rise);
  BOOST_TEST(requests_of(server, "wait") == 0);  // no long-poll at all
}

BOOST_AUTO_TEST_CASE(a_waiting_acquire_cancelled_in_the_queue_leaves_no_lock_behind) {
  temp_dir dir;
  batond_process server(dir.path());
  asio::io_context ioc;
  client a(ioc.get_executor(), config_for(server));
  client b(ioc.get_executor(), config_for(server));
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    using namespace asio::experimental::awaitable_operators;
    auto held = co_await a.async_acquire("leave", lease_opts(30000ms));
    // b waits in the queue, then gives up (its caller's cancellation): its request leaves the queue.
    auto r = co_await (b.async_acquire("leave", lease_opts(30000ms), asio::as_tuple(asio::use_awaitable)) ||
                       sleep_for(500ms));
    BOOST_TEST(r.index() == 1u);
    for (int tries = 0; tries < 200 && gauge_of(server, "baton_acquire_queue_waiting") != 0; ++tries)
      co_await sleep_for(20ms);
    BOOST_TEST(gauge_of(server, "baton_acquire_queue_waiting") == 0);
    co_await held.async_release();
    co_await sleep_for(200ms);
    // Nobody holds the key: nothing was granted to the waiter that left.
    BOOST_TEST(server.client().get("/v1/locks/leave").status == 404);
  }());
}

BOOST_AUTO_TEST_CASE(acquire_with_a_wait_timeout_gives_up) {
  temp_dir dir;
  batond_process server(dir.path());
  asio::io_context ioc;
  client a(ioc.get_executor(), config_for(server));
  client b(ioc.get_executor(), config_for(server));
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto held = co_await a.async_acquire("busy", lease_opts(30000ms));
    try {
      co_await b.async_acquire("busy", lease_opts(30000ms), 300ms);
      BOOST_FAIL("acquire should have timed out");
    } catch (const exception& e) {
      BOOST_TEST((e.code() == error::wait_timeout));
    }
    co_await held.async_release();
  }());
}

// As an agent writes it: the wait raced with a stop signal (a timer that never fires unless cancelled),
// against a holder that died (its lease is never renewed nor released). Asio's `||` waits for the first
// operation that *succeeds*: an acquire that throws (wait_timeout) would leave the race waiting on the timer
// for ever, so the acquire's error is taken as a value (as_tuple), as docs/sdk.md says.
BOOST_AUTO_TEST_CASE(
    a_raced_acquire_with_a_wait_timeout_gives_up_and_one_that_waits_takes_a_dead_holders_lock) {
  temp_dir dir;
  batond_process server(dir.path());
  asio::io_context ioc;
  client c(ioc.get_executor(), config_for(server));
  http_client raw(server.port());
  BOOST_REQUIRE(raw.post("/v1/locks/dead/acquire", R"({"owner":"dead","ttl_ms":2500})").status == 200);
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    using namespace asio::experimental::awaitable_operators;
    asio::steady_timer never(co_await asio::this_coro::executor, asio::steady_timer::time_point::max());
    const auto started = clock_type::now();
    auto gave_up =
        co_await (c.async_acquire("dead", lease_opts(5000ms), 500ms, asio::as_tuple(asio::use_awaitable)) ||
                  never.async_wait(asio::as_tuple(asio::use_awaitable)));
    BOOST_REQUIRE(gave_up.index() == 0u);
    BOOST_TEST((std::get<0>(std::get<0>(gave_up)) == error::wait_timeout));
    BOOST_TEST((clock_type::now() - started < 2000ms));
    auto got =
        co_await (c.async_acquire("dead", lease_opts(5000ms), 15000ms, asio::as_tuple(asio::use_awaitable)) ||
                  never.async_wait(asio::as_tuple(asio::use_awaitable)));
    BOOST_REQUIRE(got.index() == 0u);
    auto& [ec, l] = std::get<0>(got);
    BOOST_TEST(!ec);
    BOOST_TEST(l.active());
    co_await l.async_release();
  }());
}

BOOST_AUTO_TEST_CASE(server_paused_longer_than_the_ttl_makes_the_client_cancel_work_before_server_expiry) {
  temp_dir dir;
  batond_process server(dir.path());
  asio::io_context ioc;
  client c(ioc.get_executor(), config_for(server));
  std::optional<clock_type::time_point> work_cancelled_at;
  clock_type::time_point acquire_sent;
  std::uint64_t old_token = 0;
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    acquire_sent = clock_type::now();
    // ttl 2 s, renew every 400 ms, local deadline 1.5 s after the acquire was sent.
    auto l = co_await c.async_acquire("paused", lease_opts(2000ms, 400ms, 500ms));
    old_token = l.token();
    server.process().signal(SIGSTOP);  // the server freezes: no renew is answered
    try {
      co_await with_lease(l, [&]() -> asio::awaitable<void> {
        auto [ec] = co_await asio::steady_timer(co_await asio::this_coro::executor, 60s)
                        .async_wait(asio::as_tuple(asio::use_awaitable));
        if (ec == asio::error::operation_aborted) work_cancelled_at = clock_type::now();
      }());
      BOOST_FAIL("with_lease should report the loss");
    } catch (const exception& e) {
      BOOST_TEST((e.code() == error::lease_lost));
    }
    BOOST_TEST((l.state() == lease_state::lost));
    BOOST_TEST(!l.active());
  }());
  server.process().signal(SIGCONT);
  BOOST_REQUIRE(work_cancelled_at.has_value());
  // The server cannot expire the lease before acquire_sent + ttl; the work stopped before that.
  BOOST_TEST((*work_cancelled_at < acquire_sent + 2000ms));
  BOOST_TEST((*work_cancelled_at >= acquire_sent + 1500ms - 1ms));
  // After the server-side expiry someone else gets a newer token.
  asio::io_context ioc2;
  client other(ioc2.get_executor(), config_for(server));
  run_coro(ioc2, [&]() -> asio::awaitable<void> {
    auto l = co_await other.async_acquire("paused", lease_opts(5000ms));
    BOOST_TEST(l.token() > old_token);
    co_await l.async_release();
  }());
}

BOOST_AUTO_TEST_CASE(destroying_an_active_lease_releases_it_in_the_background) {
  temp_dir dir;
  batond_process server(dir.path());
  asio::io_context ioc;
  client c(ioc.get_executor(), config_for(server));
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    {
      auto l = co_await c.async_acquire("dropped", lease_opts(60000ms));
      BOOST_TEST(l.active());
    }
    bool freed = false;
    for (int i = 0; i < 200 && !freed; ++i) {
      co_await sleep_for(20ms);
      freed = !(co_await c.async_get("dropped")).has_value();
    }
    BOOST_TEST(freed);  // well before the 60 s TTL
  }());
}

BOOST_AUTO_TEST_CASE(lease_survives_a_server_restart_mid_lease) {
  temp_dir dir;
  auto server = std::make_unique<batond_process>(dir.path());
  const auto port = server->port();
  asio::io_context ioc;
  client c(ioc.get_executor(), config_for(*server));
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto l = co_await c.async_acquire("restarted", lease_opts(4000ms, 300ms, 500ms));
    BOOST_TEST(server->terminate() == 0);
    server = std::make_unique<batond_process>(dir.path(), std::vector<std::string>{}, port);
    co_await sleep_for(4000ms);  // a whole TTL: only renewals through the restart keep it
    BOOST_TEST(l.active());
    auto h = co_await c.async_get("restarted");
    BOOST_REQUIRE(h.has_value());
    BOOST_TEST(h->token == l.token());
    BOOST_TEST((co_await l.async_release() == release_outcome::released));
  }());
}

BOOST_AUTO_TEST_CASE(renew_refused_after_takeover_makes_the_lease_lost_at_once) {
  temp_dir dir;
  batond_process server(dir.path());
  asio::io_context ioc;
  client c(ioc.get_executor(), config_for(server));
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto l = co_await c.async_acquire("stolen", lease_opts(2000ms, 300ms));
    // Someone else releases it with the right owner+token (an operator, say) and another holder takes it.
    http_client raw(server.port());
    raw.post("/v1/locks/stolen/release",
             R"({"owner":")" + l.owner() + R"(","token":)" + std::to_string(l.token()) + "}");
    raw.post("/v1/locks/stolen/acquire", R"({"owner":"thief","ttl_ms":60000})");
    co_await l.async_wait_lost();
    BOOST_TEST((l.state() == lease_state::lost));
    BOOST_TEST(l.loss_reason().find("server refused") != std::string::npos);
    // A stale holder's release cannot free the new holder's lock.
    BOOST_TEST((co_await l.async_release() == release_outcome::not_owner));
    BOOST_TEST((co_await c.async_get("stolen"))->owner == "thief");
  }());
}

// A server that advertises lock_delay but grants a lease without echoing the delay asked for (broken-lockd
// ignores the field) would free the key at once after an expiry, while the caller counts on the delay: the
// acquire fails protocol_error, naming the delay, and the grant is handed back at once.
BOOST_AUTO_TEST_CASE(a_grant_without_the_lock_delay_asked_for_is_refused_and_released) {
  child_process lockd({bin_path("broken-lockd"), "--listen", "127.0.0.1:0", "--bug", "none", "--capabilities",
                       R"({"protocol_version":1,"features":["lock_delay"],"lock_delay_max_ms":60000})"});
  const auto line = lockd.read_line(30s);
  const auto address = line.substr(line.rfind(' ') + 1);
  const auto port = static_cast<unsigned short>(std::stoi(address.substr(address.rfind(':') + 1)));
  asio::io_context ioc;
  client_config config;
  config.server_url = "http://" + address;
  config.request_timeout = 5000ms;
  config.identity = "test";
  client c(ioc.get_executor(), config);
  auto options = lease_opts(60'000ms);
  options.lock_delay = 5000ms;
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    try {
      co_await c.async_try_acquire("delayed", options);
      BOOST_FAIL("a grant without its lock-delay was accepted");
    } catch (const baton::exception& e) {
      BOOST_TEST((e.code() == error::protocol_error));
      BOOST_TEST(std::string(e.what()).find("lock-delay") != std::string::npos, e.what());
    }
  }());
  http_client direct(port);
  auto held = direct.get("/v1/locks/delayed");
  for (int i = 0; i < 100 && held.status == 200; ++i) {  // bounded: 10 s for the background release
    ioc.restart();
    ioc.run_for(100ms);
    held = direct.get("/v1/locks/delayed");
  }
  BOOST_TEST(held.status == 404, held.body);
}
