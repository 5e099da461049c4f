// SPDX-License-Identifier: Apache-2.0
#pragma once
// Test helper for Boost.Test programs: many workers on a thread pool take a few keys in turn with
// async_with_lock, through clients given the pool's own executor, and the test checks what must never happen:
// two holders of a key at once, a key's token that does not increase, a with_lock that fails.

#include "baton/client.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <future>
#include <string>
#include <vector>

namespace baton::test {

struct with_lock_rounds {
  int workers = 0;  // per client
  int rounds = 0;   // with_locks per worker, each on the next key
  int keys = 0;     // "pool/0" to "pool/<keys - 1>"
  lease_options lease;
  std::chrono::milliseconds hold{1};  // the work: a timer, awaited while the key is held
  std::chrono::seconds bound{60};     // for every worker to finish
};

/// Worker w of the `clients.size() * r.workers` uses client w % n (n clients) and takes key
/// (w / n + round) % r.keys in each round. Checks that no key ever had two holders, that each key's tokens
/// increased, that no with_lock failed and that every round ran.
inline void expect_one_holder_per_key(boost::asio::thread_pool& pool, const std::vector<client*>& clients,
                                      const with_lock_rounds& r) {
  namespace asio = boost::asio;
  const int n = static_cast<int>(clients.size());
  std::vector<std::atomic<int>> inside(r.keys);
  std::vector<std::atomic<std::uint64_t>> last_token(r.keys);
  std::atomic<int> overlaps{0}, token_regressions{0}, runs{0}, failures{0};
  std::vector<std::future<void>> done;
  for (int w = 0; w < n * r.workers; ++w) {
    client& c = *clients[w % n];
    done.push_back(asio::co_spawn(
        pool,
        [&, w]() -> asio::awaitable<void> {
          for (int round = 0; round < r.rounds; ++round) {
            const int k = (w / n + round) % r.keys;
            try {
              co_await c.async_with_lock("pool/" + std::to_string(k), r.lease,
                                         [&](lease& l) -> asio::awaitable<void> {
                                           if (inside[k].fetch_add(1) != 0) ++overlaps;
                                           if (l.token() <= last_token[k].exchange(l.token()))
                                             ++token_regressions;
                                           asio::steady_timer t(co_await asio::this_coro::executor, r.hold);
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
    BOOST_REQUIRE((f.wait_for(r.bound) == std::future_status::ready));
  BOOST_TEST(overlaps.load() == 0);
  BOOST_TEST(token_regressions.load() == 0);
  BOOST_TEST(failures.load() == 0);
  BOOST_TEST(runs.load() == n * r.workers * r.rounds);
}

}  // namespace baton::test
