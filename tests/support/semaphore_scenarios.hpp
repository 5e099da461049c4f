// SPDX-License-Identifier: Apache-2.0
#pragma once
// The semaphore scenarios that every backend must pass alike, written once: test_http_semaphore runs them
// against batond, test_etcd_semaphore against etcd, each with its server's TTLs.

#include "coro.hpp"
#include "lease_opts.hpp"

#include "baton/backend.hpp"
#include "baton/client.hpp"
#include "baton/semaphore.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace baton::test::semaphore_scenarios {

inline client_config config(const std::string& url, std::string identity) {
  client_config c;
  c.server_url = url;
  c.identity = std::move(identity);
  c.request_timeout = std::chrono::milliseconds(2000);
  c.retry.initial_backoff = std::chrono::milliseconds(10);
  c.retry.max_backoff = std::chrono::milliseconds(100);
  return c;
}

// `n` clients of `url`, identities prefix0, prefix1, ...
inline std::vector<std::unique_ptr<client>> make_clients(boost::asio::io_context& ioc, const std::string& url,
                                                         const std::string& prefix, int n) {
  std::vector<std::unique_ptr<client>> clients;
  for (int i = 0; i < n; ++i)
    clients.push_back(std::make_unique<client>(ioc.get_executor(), config(url, prefix + std::to_string(i))));
  return clients;
}

// Every live permit of `key`, as the server holds it now.
inline boost::asio::awaitable<std::vector<holder_info>> holders(backend& b, std::string key) {
  auto g = co_await b.get(std::move(key), std::nullopt, std::chrono::milliseconds(2000));
  BOOST_REQUIRE(!g.ec);
  co_return g.holders;
}

// Three clients hold the three permits of a key in slot order with growing tokens; a fourth is refused
// (naming all three) and then waits; the release of slot 1 admits it into slot 1 with a larger token. With
// `renewed_past`, the admitted permit is then held that long (past half its TTL: renewed) before the
// releases.
inline void three_of_four_and_a_release_admits_the_waiter(
    const std::string& url, std::chrono::milliseconds ttl, std::chrono::milliseconds settle,
    std::optional<std::chrono::milliseconds> renewed_past) {
  namespace asio = boost::asio;
  using namespace std::chrono_literals;
  asio::io_context ioc;
  auto clients = make_clients(ioc, url, "c", 4);
  auto reader = make_backend(ioc.get_executor(), config(url, "reader"));
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    std::vector<lease> held;
    for (std::uint32_t i = 0; i < 3; ++i) {
      semaphore s(*clients[i], "pools/encoder", 3);
      held.push_back(co_await s.async_acquire(lease_opts(ttl)));
      BOOST_TEST(held.back().slot() == i);
      BOOST_TEST(held.back().permits() == 3u);
      if (i > 0) BOOST_TEST(held.back().token() > held[i - 1].token());
    }
    semaphore fourth(*clients[3], "pools/encoder", 3);
    auto refused = co_await fourth.async_try_acquire(lease_opts(ttl));
    BOOST_TEST(!refused.acquired.has_value());
    BOOST_TEST(refused.permits == 3u);
    BOOST_REQUIRE(refused.holders.size() == 3u);
    BOOST_TEST(refused.holders[2].token == held[2].token());
    auto waiter = start_background(ioc, fourth.async_acquire(lease_opts(ttl)));
    co_await sleep_for(settle);
    BOOST_TEST(!waiter->done);
    BOOST_TEST((co_await holders(*reader, "pools/encoder")).size() == 3u);
    co_await held[1].async_release();
    for (int i = 0; i < 250 && !waiter->done; ++i)
      co_await sleep_for(20ms);
    BOOST_REQUIRE(waiter->done);
    BOOST_REQUIRE(waiter->value.has_value());
    lease& d = *waiter->value;
    BOOST_TEST(d.slot() == 1u);
    BOOST_TEST(d.token() > held[2].token());
    auto now = co_await holders(*reader, "pools/encoder");
    BOOST_REQUIRE(now.size() == 3u);
    BOOST_TEST(now[1].token == d.token());
    BOOST_TEST(now[1].owner == d.owner());
    if (renewed_past) {
      co_await sleep_for(*renewed_past);
      BOOST_TEST(d.active());
    }
    co_await d.async_release();
    co_await held[0].async_release();
    co_await held[2].async_release();
    BOOST_TEST((co_await holders(*reader, "pools/encoder")).empty());
  }());
}

// Six clients take turns `rounds` times each under async_with_permit on a key of 3 permits, each holding
// its permit for `hold`: never more than three at once (at least two, so they did overlap), every grant
// its own token, and the server's view, sampled meanwhile, never more than three holders.
inline void six_contenders_never_exceed_three_permits(const std::string& url, std::chrono::milliseconds ttl,
                                                      int rounds, std::chrono::milliseconds hold) {
  namespace asio = boost::asio;
  using namespace std::chrono_literals;
  asio::io_context ioc;
  auto clients = make_clients(ioc, url, "w", 6);
  auto reader = make_backend(ioc.get_executor(), config(url, "reader"));
  int running = 0, most = 0, finished = 0, most_seen_by_server = 0;
  std::vector<std::uint64_t> tokens;
  for (int i = 0; i < 6; ++i) {
    asio::co_spawn(
        ioc,
        [&, i]() -> asio::awaitable<void> {
          semaphore s(*clients[i], "pools/six", 3);
          for (int round = 0; round < rounds; ++round) {
            co_await s.async_with_permit(lease_opts(ttl), [&](lease& l) -> asio::awaitable<void> {
              tokens.push_back(l.token());
              most = std::max(most, ++running);
              co_await sleep_for(hold);
              --running;
            });
          }
          ++finished;
        },
        asio::detached);
  }
  asio::co_spawn(
      ioc,
      [&]() -> asio::awaitable<void> {
        while (finished < 6) {
          auto g = co_await reader->get("pools/six", std::nullopt, 2000ms);
          if (!g.ec) most_seen_by_server = std::max(most_seen_by_server, static_cast<int>(g.holders.size()));
          co_await sleep_for(10ms);
        }
      },
      asio::detached);
  const auto until = std::chrono::steady_clock::now() + 90s;
  while (finished < 6 && std::chrono::steady_clock::now() < until) {
    ioc.restart();
    ioc.run_for(50ms);
  }
  BOOST_TEST(finished == 6);
  BOOST_TEST(most <= 3);
  BOOST_TEST(most >= 2);
  BOOST_TEST(most_seen_by_server <= 3);
  BOOST_TEST(most_seen_by_server >= 1);
  std::sort(tokens.begin(), tokens.end());
  BOOST_TEST(
      (std::adjacent_find(tokens.begin(), tokens.end()) == tokens.end()));  // every grant its own token
}

}  // namespace baton::test::semaphore_scenarios
