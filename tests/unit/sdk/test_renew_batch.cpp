// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE renew_batch
#include <boost/test/unit_test.hpp>

// Batch renewal in the client (docs/sdk.md, "Batch renewal"): renewals falling due within the window leave
// in one backend renew_batch() call; each lease gets its own answer; a lease's deadline is counted from when
// its renewal fell due, never from when the batch left; stopping a renewal that waits in a batch does not
// hold up its release; a window of 0 sends every renewal alone.

#include "coro.hpp"
#include "lease_opts.hpp"

#include "baton/client.hpp"
#include "baton/testing.hpp"

#include <boost/asio/io_context.hpp>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

using namespace baton;
using namespace std::chrono_literals;
namespace asio = boost::asio;
using baton::test::lease_opts;
using baton::test::run_coro;
using baton::test::sleep_for;
using baton::testing::memory_backend;

namespace {

// memory_backend, counting single renews and batches (and their sizes), and noting for each entry of a
// batch when it left.
class counting_backend final : public backend {
 public:
  explicit counting_backend(std::shared_ptr<memory_backend> s) : s_(std::move(s)) {}
  int renews = 0;
  int batches = 0;
  std::size_t batched_entries = 0;
  std::size_t largest_batch = 0;
  std::vector<lease_clock::time_point> batch_sent, renew_sent;
  std::vector<std::vector<std::string>> batch_keys;  // each batch's keys, in order

  asio::awaitable<acquire_reply> acquire(std::string key, std::string owner, milliseconds ttl,
                                         std::string value, milliseconds timeout) override {
    co_return co_await s_->acquire(std::move(key), std::move(owner), ttl, std::move(value), timeout);
  }
  asio::awaitable<renew_reply> renew(std::string key, std::string owner, std::uint64_t token,
                                     milliseconds ttl, milliseconds timeout) override {
    ++renews;
    renew_sent.push_back(lease_clock::now());
    co_return co_await s_->renew(std::move(key), std::move(owner), token, ttl, timeout);
  }
  asio::awaitable<release_reply> release(std::string key, std::string owner, std::uint64_t token,
                                         milliseconds timeout) override {
    co_return co_await s_->release(std::move(key), std::move(owner), token, timeout);
  }
  asio::awaitable<std::vector<renew_reply>> renew_batch(std::span<const renew_entry> entries,
                                                        milliseconds timeout) override {
    ++batches;
    batched_entries += entries.size();
    largest_batch = std::max(largest_batch, entries.size());
    batch_sent.push_back(lease_clock::now());
    auto& keys = batch_keys.emplace_back();
    for (const auto& e : entries)
      keys.push_back(e.key);
    std::vector<renew_reply> out;
    for (const auto& e : entries)
      out.push_back(co_await s_->renew(e.key, e.owner, e.token, e.ttl, timeout));
    co_return out;
  }
  asio::awaitable<get_reply> get(std::string key, std::optional<wait_for_change> wait,
                                 milliseconds timeout) override {
    co_return co_await s_->get(std::move(key), wait, timeout);
  }
  void close() override {}

 private:
  std::shared_ptr<memory_backend> s_;
};

client_config config(milliseconds window) {
  client_config cfg;
  cfg.identity = "batch";
  cfg.request_timeout = 2000ms;
  cfg.renew_batch_window = window;
  return cfg;
}

// Every lease renews every 300 ms, without jitter; its TTL (10 s) leaves ample room on a loaded machine.
lease_options renewing() {
  auto o = lease_opts(10s, 300ms);
  o.jitter = 0;
  return o;
}

struct fixture {
  explicit fixture(milliseconds window) : c(ioc.get_executor(), config(window), backend) {}
  asio::io_context ioc;
  std::shared_ptr<memory_backend> server = std::make_shared<memory_backend>(ioc.get_executor());
  std::shared_ptr<counting_backend> backend = std::make_shared<counting_backend>(server);
  client c;

  // Acquires n leases (keys k0..), each in its own coroutine, as fast as the client can.
  asio::awaitable<std::vector<lease>> acquire_all(int n) {
    std::vector<std::shared_ptr<test::background<lease>>> started;
    for (int i = 0; i < n; ++i)
      started.push_back(test::start_background(ioc, c.async_acquire("k" + std::to_string(i), renewing())));
    std::vector<lease> out;
    for (auto& s : started) {
      while (!s->done)
        co_await sleep_for(1ms);
      if (s->error) std::rethrow_exception(s->error);
      out.push_back(std::move(*s->value));
    }
    co_return out;
  }
};

}  // namespace

BOOST_AUTO_TEST_CASE(renewals_falling_due_together_leave_in_one_batch) {
  // A window of 100 ms: leases acquired together fall due together, even on a slow machine.
  fixture f(100ms);
  run_coro(f.ioc, [&]() -> asio::awaitable<void> {
    auto leases = co_await f.acquire_all(20);
    // Wait for at least 40 renewals (two rounds), 30 s at most.
    for (int i = 0; i < 3000 && f.c.stats().renews < 40; ++i)
      co_await sleep_for(10ms);
    const auto renews = f.c.stats().renews;
    BOOST_TEST(renews >= 40u);
    for (auto& l : leases)
      BOOST_TEST((l.state() == lease_state::active));
    // Every renewal went in a batch or alone; together they took far fewer requests than renewals.
    BOOST_TEST(f.backend->batched_entries + static_cast<std::size_t>(f.backend->renews) >= renews);
    BOOST_TEST(f.backend->batches >= 1);
    BOOST_TEST(f.backend->largest_batch >= 5u);
    BOOST_TEST(static_cast<std::uint64_t>(f.backend->batches + f.backend->renews) * 2 <= renews);
    for (auto& l : leases)
      co_await l.async_release();
    BOOST_TEST(!f.server->holder("k0"));
  }());
}

// A batch reuses the entries (and their strings' memory) of an earlier, larger one: it carries its own
// leases only, none left over from the earlier batch.
BOOST_AUTO_TEST_CASE(a_smaller_batch_after_a_larger_one_carries_only_its_own_leases) {
  fixture f(100ms);
  run_coro(f.ioc, [&]() -> asio::awaitable<void> {
    auto leases = co_await f.acquire_all(12);
    for (int i = 0; i < 3000 && f.c.stats().renews < 24; ++i)
      co_await sleep_for(10ms);
    BOOST_TEST_REQUIRE(f.backend->largest_batch >= 5u);
    for (std::size_t i = 4; i < leases.size(); ++i)
      co_await leases[i].async_release();
    // Two rounds of the four left, then two more, whose batches are checked.
    auto renews = f.c.stats().renews;
    for (int i = 0; i < 3000 && f.c.stats().renews < renews + 8; ++i)
      co_await sleep_for(10ms);
    const auto first = f.backend->batch_keys.size();
    renews = f.c.stats().renews;
    for (int i = 0; i < 3000 && f.c.stats().renews < renews + 8; ++i)
      co_await sleep_for(10ms);
    BOOST_TEST_REQUIRE(f.backend->batch_keys.size() > first);
    for (auto b = first; b < f.backend->batch_keys.size(); ++b) {
      auto keys = f.backend->batch_keys[b];
      std::sort(keys.begin(), keys.end());
      BOOST_TEST((std::adjacent_find(keys.begin(), keys.end()) == keys.end()));
      for (const auto& k : keys)
        BOOST_TEST((k == "k0" || k == "k1" || k == "k2" || k == "k3"), k);
    }
    for (std::size_t i = 0; i < 4; ++i) {
      BOOST_TEST((leases[i].state() == lease_state::active));
      co_await leases[i].async_release();
    }
  }());
}

BOOST_AUTO_TEST_CASE(a_refused_entry_loses_only_its_own_lease) {
  fixture f(100ms);
  run_coro(f.ioc, [&]() -> asio::awaitable<void> {
    auto leases = co_await f.acquire_all(6);
    f.server->expire("k3");  // batond would answer this entry `lost`/not_held
    for (int i = 0; i < 3000 && leases[3].state() == lease_state::active; ++i)
      co_await sleep_for(10ms);
    BOOST_TEST((leases[3].state() == lease_state::lost));
    // The others were renewed in the same batches and are still held, by the server too.
    const auto renews = f.c.stats().renews;
    for (int i = 0; i < 3000 && f.c.stats().renews < renews + 5; ++i)
      co_await sleep_for(10ms);
    BOOST_TEST(f.backend->batches >= 1);
    for (int i : {0, 1, 2, 4, 5}) {
      BOOST_TEST((leases[i].state() == lease_state::active));
      BOOST_TEST(f.server->holder("k" + std::to_string(i)).value_or(holder_info{}).owner ==
                 leases[i].owner());
    }
    for (auto& l : leases)
      co_await l.async_release();
  }());
}

BOOST_AUTO_TEST_CASE(a_batched_renewal_counts_its_deadline_from_when_it_fell_due) {
  // With a 400 ms window the renewal that opens a batch waits 400 ms for others before the batch leaves. The
  // deadline it confirms is counted from when it fell due: at least 400 ms before departure + TTL - margin.
  // Three leases renewing every second: 3 x 400 ms >= 1 s, so they batch.
  fixture f(400ms);
  run_coro(f.ioc, [&]() -> asio::awaitable<void> {
    auto o = lease_opts(10s, 1000ms);
    o.jitter = 0;
    std::vector<lease> leases;
    for (int i = 0; i < 3; ++i)
      leases.push_back(co_await f.c.async_acquire("k" + std::to_string(i), o));
    std::vector<lease_clock::time_point> first;
    for (auto& l : leases)
      first.push_back(l.deadline());
    for (int i = 0; i < 3000 && f.c.stats().renews < 3; ++i)
      co_await sleep_for(10ms);
    BOOST_REQUIRE(f.c.stats().renews >= 3u);
    BOOST_REQUIRE(f.c.stats().renews < 6u);  // the next round falls due a second later
    // The first departure, in a batch or (if the others fell due later than the window) alone.
    auto departed = lease_clock::time_point::max();
    if (!f.backend->batch_sent.empty()) departed = f.backend->batch_sent.front();
    if (!f.backend->renew_sent.empty()) departed = std::min(departed, f.backend->renew_sent.front());
    auto earliest = lease_clock::time_point::max();
    for (std::size_t i = 0; i < leases.size(); ++i) {
      BOOST_TEST((leases[i].deadline() > first[i]));
      earliest = std::min(earliest, leases[i].deadline());
    }
    BOOST_TEST((earliest <= departed - 400ms + o.ttl - o.effective_safety_margin()));
    for (auto& l : leases)
      co_await l.async_release();
  }());
}

BOOST_AUTO_TEST_CASE(a_release_does_not_wait_for_the_batch_its_renewal_waits_in) {
  fixture f(400ms);
  run_coro(f.ioc, [&]() -> asio::awaitable<void> {
    auto leases = co_await f.acquire_all(2);  // 2 x 400 ms >= 300 ms: they batch
    // Let the renewal fall due and join a batch (it waits up to 400 ms there), then release.
    co_await sleep_for(350ms);
    auto r = co_await leases[0].async_release();
    BOOST_TEST((r == release_outcome::released));
    BOOST_TEST(!f.server->holder("k0"));
    BOOST_TEST((leases[0].state() == lease_state::released));
    // The renewal that waited, if it still leaves with its batch, is refused and changes nothing.
    co_await sleep_for(600ms);
    BOOST_TEST(!f.server->holder("k0"));
    BOOST_TEST((leases[0].state() == lease_state::released));
    co_await leases[1].async_release();
  }());
}

BOOST_AUTO_TEST_CASE(a_client_with_few_leases_renews_them_alone) {
  // 5 leases renewing every 300 ms with a 50 ms window: 5 x 50 ms < 300 ms, about one renewal falls due per
  // window, so each goes alone at once instead of waiting for a batch of one.
  fixture f(50ms);
  run_coro(f.ioc, [&]() -> asio::awaitable<void> {
    auto leases = co_await f.acquire_all(5);
    for (int i = 0; i < 3000 && f.c.stats().renews < 10; ++i)
      co_await sleep_for(10ms);
    BOOST_TEST(f.c.stats().renews >= 10u);
    BOOST_TEST(f.backend->batches == 0);
    for (auto& l : leases)
      co_await l.async_release();
  }());
}

BOOST_AUTO_TEST_CASE(a_window_of_zero_renews_every_lease_on_its_own) {
  fixture f(0ms);
  run_coro(f.ioc, [&]() -> asio::awaitable<void> {
    auto leases = co_await f.acquire_all(5);
    for (int i = 0; i < 3000 && f.c.stats().renews < 10; ++i)
      co_await sleep_for(10ms);
    BOOST_TEST(f.c.stats().renews >= 10u);
    BOOST_TEST(f.backend->batches == 0);
    BOOST_TEST(f.backend->renews >= 10);
    for (auto& l : leases)
      co_await l.async_release();
  }());
}

BOOST_AUTO_TEST_CASE(a_window_longer_than_a_quarter_of_the_request_timeout_is_refused) {
  client_config cfg = config(600ms);
  BOOST_CHECK_THROW(cfg.validate(), baton::exception);
  cfg.renew_batch_window = -1ms;
  BOOST_CHECK_THROW(cfg.validate(), baton::exception);
  cfg.renew_batch_window = 500ms;
  BOOST_CHECK_NO_THROW(cfg.validate());
}
