// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE semaphore
#include <boost/test/unit_test.hpp>

// baton::semaphore as users spell it, against baton::testing::memory_backend: at most N holders, the lowest
// free slot, the same owner's slot kept, the count fixed while in use, with_permit's work cancelled at the
// loss, the fence per slot, and a thread pool.

#include "coro.hpp"
#include "lease_opts.hpp"

#include "baton/client.hpp"
#include "baton/fence.hpp"
#include "baton/semaphore.hpp"
#include "baton/testing.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_future.hpp>

#include <atomic>
#include <future>
#include <stdexcept>
#include <thread>
#include <vector>

using namespace baton;
using namespace std::chrono_literals;
namespace asio = boost::asio;
using baton::test::error_of;
using baton::test::lease_opts;
using baton::test::run_coro;
using baton::test::sleep_for;
using baton::test::start_background;
using baton::testing::memory_backend;

namespace {

client_config test_config() {
  return baton::test::quick_client_config("sem-test");
}

struct fixture {
  asio::io_context ioc;
  std::shared_ptr<memory_backend> server = std::make_shared<memory_backend>(ioc.get_executor());
  client c{ioc.get_executor(), test_config(), server};
  semaphore pool{c, "pools/encoder", 3};
};

}  // namespace

BOOST_FIXTURE_TEST_CASE(three_permits_admit_three_holders_in_slot_order_and_refuse_the_fourth, fixture) {
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    std::vector<lease> held;
    for (std::uint32_t i = 0; i < 3; ++i) {
      // Longer TTLs for later holders: the refusal names the permit that expires first.
      held.push_back(co_await pool.async_acquire({.ttl = std::chrono::milliseconds(30'000 + 1'000 * i)}));
      BOOST_TEST(held.back().slot() == i);
      BOOST_TEST(held.back().permits() == 3u);
      if (i > 0) BOOST_TEST(held.back().token() > held[i - 1].token());
    }
    acquire_result r = co_await pool.async_try_acquire({.ttl = 30s});
    BOOST_TEST(!r.acquired.has_value());
    BOOST_TEST(r.permits == 3u);
    BOOST_REQUIRE(r.holders.size() == 3u);
    for (std::uint32_t i = 0; i < 3; ++i) {
      BOOST_TEST(r.holders[i].slot == i);
      BOOST_TEST(r.holders[i].token == held[i].token());
      BOOST_TEST(r.holders[i].owner == held[i].owner());
    }
    BOOST_TEST(r.holder.token == held[0].token());
    BOOST_TEST(server->holders("pools/encoder").size() == 3u);
    // The fence carries the slot.
    const baton::fence f = held[2].fence();
    BOOST_TEST(f.slot == 2u);
    BOOST_TEST(f.token == held[2].token());
    BOOST_TEST(f.permits == 3u);
    for (auto& l : held)
      BOOST_TEST((co_await l.async_release() == release_outcome::released));
    BOOST_TEST(server->holders("pools/encoder").empty());
  }());
}

BOOST_FIXTURE_TEST_CASE(a_release_admits_the_waiter_into_the_freed_slot, fixture) {
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    lease a = co_await pool.async_acquire({.ttl = 30s});
    lease b = co_await pool.async_acquire({.ttl = 30s});
    lease d = co_await pool.async_acquire({.ttl = 30s});
    auto waiter = start_background(ioc, pool.async_acquire({.ttl = 30s}));
    co_await sleep_for(150ms);
    BOOST_TEST(!waiter->done);   // full: it waits
    co_await b.async_release();  // slot 1 frees
    for (int i = 0; i < 200 && !waiter->done; ++i)
      co_await sleep_for(10ms);
    BOOST_REQUIRE(waiter->done);
    BOOST_REQUIRE(waiter->value.has_value());
    BOOST_TEST(waiter->value->slot() == 1u);
    BOOST_TEST(waiter->value->token() > d.token());
    BOOST_TEST(server->holders("pools/encoder").size() == 3u);
    co_await waiter->value->async_release();
    co_await a.async_release();
    co_await d.async_release();
  }());
}

BOOST_FIXTURE_TEST_CASE(the_same_owner_again_keeps_its_slot_with_a_newer_token, fixture) {
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    lease_options first = lease_opts(30'000ms);
    lease a = co_await pool.async_acquire(first);
    lease_options named = lease_opts(30'000ms);
    named.owner = "worker-7";
    lease b = co_await pool.async_acquire(named);
    BOOST_TEST(b.slot() == 1u);
    lease b2 = co_await pool.async_acquire(named);
    BOOST_TEST(b2.slot() == 1u);
    BOOST_TEST(b2.token() > b.token());
    BOOST_TEST(server->holders("pools/encoder").size() == 2u);
    // The superseded token no longer names the permit: its release is already_free, the new one's holds.
    BOOST_TEST((co_await b.async_release() == release_outcome::already_free));
    BOOST_TEST(server->holders("pools/encoder").size() == 2u);
    co_await b2.async_release();
    co_await a.async_release();
  }());
}

BOOST_FIXTURE_TEST_CASE(the_permit_count_is_fixed_while_the_key_is_in_use, fixture) {
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    lease lock = co_await c.async_acquire("pools/encoder", {.ttl = 30s});  // a lock: 1 permit
    auto ec = co_await error_of(pool.async_try_acquire({}));
    BOOST_TEST(ec == error::permits_mismatch);
    // Waiting does not wait on a mismatch: it fails at once.
    ec = co_await error_of(pool.async_acquire({.ttl = 30s}, 5s));
    BOOST_TEST(ec == error::permits_mismatch);
    co_await lock.async_release();

    lease p = co_await pool.async_acquire({});
    ec = co_await error_of(c.async_try_acquire("pools/encoder", {}));
    BOOST_TEST(ec == error::permits_mismatch);
    semaphore two(c, "pools/encoder", 2);
    baton::diagnostics diag;
    auto [e2, r2] = co_await two.async_try_acquire(
        lease_opts(30'000ms), baton::with_diagnostics(diag, asio::as_tuple(asio::use_awaitable)));
    BOOST_TEST(e2 == error::permits_mismatch);
    BOOST_TEST(diag.message().find("3 permits") != std::string::npos, diag.message());
    BOOST_TEST(server->holders("pools/encoder").size() == 1u);  // nothing changed
    co_await p.async_release();
    // Free again: the next grant sets the count.
    lease q = co_await two.async_acquire({});
    BOOST_TEST(q.permits() == 2u);
    co_await q.async_release();
  }());
}

BOOST_FIXTURE_TEST_CASE(a_bad_permit_count_fails_the_operation_not_the_constructor, fixture) {
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    semaphore none(c, "k", 0);
    semaphore too_many(c, "k", 70'000);
    BOOST_TEST(co_await error_of(none.async_acquire()) == error::invalid_config);
    BOOST_TEST(co_await error_of(too_many.async_try_acquire()) == error::invalid_config);
    BOOST_TEST(server->calls().acquire == 0);  // nothing sent
  }());
}

BOOST_FIXTURE_TEST_CASE(with_permit_cancels_the_work_when_the_permit_is_lost, fixture) {
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    lease other = co_await pool.async_acquire({.ttl = 30s});
    bool cancelled = false;
    std::uint64_t token = 0;
    std::uint32_t slot = 99;
    auto work = [&](lease& l) -> asio::awaitable<void> {
      token = l.token();
      slot = l.slot();
      asio::steady_timer t(co_await asio::this_coro::executor, 60s);
      auto [ec] = co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
      cancelled = ec == asio::error::operation_aborted;
    };
    auto run = start_background(ioc, [&]() -> asio::awaitable<int> {
      co_await pool.async_with_permit(lease_opts(30'000ms, 50ms), work);
      co_return 0;
    }());
    while (token == 0)
      co_await sleep_for(5ms);
    BOOST_TEST(slot == 1u);
    server->expire("pools/encoder", token);  // only this permit ends; the next renew is refused
    for (int i = 0; i < 300 && !run->done; ++i)
      co_await sleep_for(10ms);
    BOOST_REQUIRE(run->done);
    BOOST_TEST(cancelled);
    BOOST_TEST(error_of(run->error) == error::lease_lost);
    BOOST_TEST(other.active());  // the other permit is untouched
    co_await other.async_release();
  }());
}

BOOST_FIXTURE_TEST_CASE(with_permit_returns_the_work_value_and_releases, fixture) {
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    int n = co_await pool.async_with_permit(
        {.ttl = 10s}, [&](lease& l) -> asio::awaitable<int> { co_return static_cast<int>(l.slot()) + 40; });
    BOOST_TEST(n == 40);
    BOOST_TEST(server->holders("pools/encoder").empty());
  }());
}

BOOST_FIXTURE_TEST_CASE(listing_shows_each_permit_and_break_needs_its_token, fixture) {
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    lease a = co_await pool.async_acquire({.ttl = 30s});
    lease b = co_await pool.async_acquire({.ttl = 30s});
    lock_page page = co_await c.async_list("pools/");
    BOOST_REQUIRE(page.locks.size() == 2u);
    for (std::uint32_t i = 0; i < 2; ++i) {
      BOOST_TEST(page.locks[i].kind == "permit");
      BOOST_TEST(page.locks[i].holder.slot == i);
      BOOST_TEST(page.locks[i].permits == 3u);
    }
    BOOST_TEST(co_await error_of(c.async_break("pools/encoder")) == error::bad_request);
    holder_info ended = co_await c.async_break("pools/encoder", b.token());
    BOOST_TEST(ended.token == b.token());
    BOOST_TEST(ended.slot == 1u);
    BOOST_TEST(server->holders("pools/encoder").size() == 1u);
    co_await a.async_release();
  }());
}

// One client on a thread pool, eight contenders for three permits: never more than three run at once.
BOOST_AUTO_TEST_CASE(at_most_three_of_eight_contenders_hold_at_once_on_a_thread_pool) {
  asio::thread_pool threads(4);
  auto server = std::make_shared<memory_backend>(threads.get_executor());
  client c(threads.get_executor(), test_config(), server);
  semaphore pool(c, "pools/pool", 3);
  // Boost.Test's assertions are not thread-safe: the pool's threads count, the test thread asserts.
  std::atomic<int> running{0}, most{0}, done{0}, bad_slots{0};
  auto contender = [&]() -> asio::awaitable<void> {
    for (int round = 0; round < 3; ++round) {
      co_await pool.async_with_permit({.ttl = 10s}, [&](lease& l) -> asio::awaitable<void> {
        if (l.slot() >= 3u) ++bad_slots;
        const int now = ++running;
        int seen = most.load();
        while (now > seen && !most.compare_exchange_weak(seen, now)) {
        }
        co_await sleep_for(5ms);
        --running;
      });
    }
    ++done;
  };
  std::vector<std::future<void>> all;
  for (int i = 0; i < 8; ++i)
    all.push_back(asio::co_spawn(threads, contender(), asio::use_future));
  for (auto& f : all)
    BOOST_REQUIRE(f.wait_for(60s) == std::future_status::ready);
  for (auto& f : all)
    f.get();
  BOOST_TEST(done.load() == 8);
  BOOST_TEST(bad_slots.load() == 0);
  BOOST_TEST(most.load() <= 3);
  BOOST_TEST(most.load() >= 2);  // they did overlap: the bound was exercised, not a lock in disguise
  threads.join();
}

BOOST_AUTO_TEST_CASE(the_fence_keeps_the_highest_token_per_slot) {
  baton::fence_guard guard;
  // Slot 1's holder is replaced (token 5 -> 9); slot 2's holder (token 7) writes on regardless.
  BOOST_TEST(guard.apply("db/rows", baton::fence{5, 1}, [] {}).applied());
  BOOST_TEST(guard.apply("db/rows", baton::fence{9, 1}, [] {}).applied());
  BOOST_TEST(guard.apply("db/rows", baton::fence{7, 2}, [] {}).applied());
  auto stale = guard.apply("db/rows", baton::fence{5, 1}, [] {});
  BOOST_TEST(stale.rejected());
  BOOST_TEST(stale.highest_token == 9u);
  BOOST_TEST(guard.check("db/rows", baton::fence{7, 2}).current);
  // Slot 0 is the resource itself: a lock's token and slot 0's are one sequence.
  BOOST_TEST(guard.apply("db/rows", baton::fence{3, 0}, [] {}).applied());
  BOOST_TEST(guard.highest("db/rows") == 3u);
  BOOST_TEST(guard.highest(baton::fence_guard::slot_resource("db/rows", 1)) == 9u);
}

// A count that shrinks (docs/fencing.md): slot 3 of a key of 4 is never granted again once the key is a key
// of 2, so per-slot fencing alone would let its stalled holder write forever. The guard keeps, per count, the
// highest token applied with it, and refuses an older token in a slot at or past a newer count.
BOOST_AUTO_TEST_CASE(the_fence_refuses_a_slot_past_a_newer_count) {
  baton::fence_guard guard;
  BOOST_TEST(guard.apply("db/rows", baton::fence{10, 3, 4}, [] {}).applied());
  BOOST_TEST(guard.apply("db/rows", baton::fence{10, 2, 4}, [] {}).applied());
  // The key was idle, and came back as a key of 2 permits.
  BOOST_TEST(guard.apply("db/rows", baton::fence{12, 0, 2}, [] {}).applied());
  int ran = 0;
  auto stale = guard.apply("db/rows", baton::fence{10, 3, 4}, [&] { ++ran; });
  BOOST_TEST(stale.rejected());
  BOOST_TEST(stale.highest_token == 12u);
  BOOST_TEST(ran == 0);
  // Slot 2 is the first one past a count of 2; a fence without a count is refused alike.
  BOOST_TEST(guard.apply("db/rows", baton::fence{10, 2, 4}, [] {}).rejected());
  BOOST_TEST(guard.apply("db/rows", baton::fence{10, 3}, [] {}).rejected());
  BOOST_TEST(!guard.check("db/rows", baton::fence{10, 3, 4}).current);
  BOOST_TEST(guard.check("db/rows", baton::fence{10, 3, 4}).highest_token == 12u);
  // A slot within the newer count is fenced per slot only, as before.
  BOOST_TEST(guard.apply("db/rows", baton::fence{11, 1, 4}, [] {}).applied());
  // A newer grant under a larger count does not make the guard forget the smaller one: token 10's slot 3
  // stays refused (12 came with a count of 2), while the new count's slot 3 writes.
  BOOST_TEST(guard.apply("db/rows", baton::fence{20, 0, 4}, [] {}).applied());
  BOOST_TEST(guard.apply("db/rows", baton::fence{10, 3, 4}, [] {}).rejected());
  BOOST_TEST(guard.apply("db/rows", baton::fence{21, 3, 4}, [] {}).applied());
  // A lock of the key (count 1) shuts every slot above 0 to older tokens.
  BOOST_TEST(guard.apply("db/rows", baton::fence{22, 0, 1}, [] {}).applied());
  BOOST_TEST(guard.apply("db/rows", baton::fence{21, 3, 4}, [] {}).rejected());
  BOOST_TEST(guard.apply("db/rows", baton::fence{23, 3, 4}, [] {}).applied());
  // A write that throws records no count: slot 2 stays open to token 23's count (4).
  BOOST_CHECK_THROW(
      guard.apply("db/rows", baton::fence{24, 0, 2}, []() -> int { throw std::runtime_error("x"); }),
      std::runtime_error);
  BOOST_TEST(guard.apply("db/rows", baton::fence{23, 2, 4}, [] {}).applied());
  // A slot at or past its own count is a malformed fence.
  BOOST_CHECK_THROW(guard.apply("db/rows", baton::fence{30, 4, 4}, [] {}), std::invalid_argument);
  BOOST_CHECK_THROW(guard.check("db/rows", baton::fence{30, 4, 4}), std::invalid_argument);
}

// A resource that keeps its fences durably seeds a new guard with them: the counts come back too.
BOOST_AUTO_TEST_CASE(a_seeded_guard_remembers_slots_and_counts) {
  baton::fence_guard guard;
  guard.seed("db/rows", baton::fence{40, 0, 2});
  guard.seed("db/rows", baton::fence{35, 3, 4});
  BOOST_TEST(guard.highest("db/rows") == 40u);
  BOOST_TEST(guard.highest(baton::fence_guard::slot_resource("db/rows", 3)) == 35u);
  BOOST_TEST(guard.apply("db/rows", baton::fence{35, 3, 4}, [] {}).rejected());  // past 40's count of 2
  BOOST_TEST(guard.apply("db/rows", baton::fence{39, 1, 2}, [] {}).applied());   // slot 1: no token yet
  BOOST_TEST(guard.apply("db/rows", baton::fence{39, 0, 2}, [] {}).rejected());  // slot 0 has 40
}

// The count check is made under the slot's lock, right before the write: a write of an older token that
// waits for its slot behind a slow write of its own is checked when its turn comes, not before. Here the
// first token-10 write holds slot 1 while the second waits for it, and a count of 1 comes with token 12
// meanwhile: the second must be refused, whenever it reached the lock.
BOOST_AUTO_TEST_CASE(a_write_waiting_for_its_slot_is_checked_against_the_count_when_it_runs) {
  baton::fence_guard guard;
  std::promise<void> first_in, let_go;
  auto let_go_f = let_go.get_future().share();
  std::thread first([&] {
    guard.apply("r", baton::fence{10, 1, 4}, [&] {
      first_in.set_value();
      let_go_f.wait();
    });
  });
  first_in.get_future().wait();
  auto second = std::async(std::launch::async, [&] {
    return guard.apply("r", baton::fence{10, 1, 4}, [] {});
  });
  std::this_thread::sleep_for(
      50ms);  // the second is most likely waiting for slot 1 by now (either way it must fail)
  BOOST_TEST(guard.apply("r", baton::fence{12, 0, 1}, [] {}).applied());
  let_go.set_value();
  first.join();
  auto r = second.get();
  BOOST_TEST(r.rejected());
  BOOST_TEST(r.highest_token == 12u);
}

// The memory backend keeps lock-delay per slot: a permit that expires keeps its slot from everyone for the
// delay while the other slots are granted; a full key whose free slots are all delayed says so.
BOOST_AUTO_TEST_CASE(memory_backend_keeps_lock_delay_per_slot) {
  asio::io_context ioc;
  auto server = std::make_shared<memory_backend>(ioc.get_executor());
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto ask = [&](std::string owner) {
      acquire_request q;
      q.key = "k";
      q.owner = std::move(owner);
      q.ttl = 1000ms;
      q.lock_delay = 5000ms;
      q.permits = 2;
      q.timeout = 1000ms;
      return server->acquire_with(std::move(q));
    };
    auto a = co_await ask("a");
    auto b = co_await ask("b");
    BOOST_TEST(a.slot == 0u);
    BOOST_TEST(b.slot == 1u);
    server->expire("k", a.token);  // slot 0 in lock-delay until 5000 ms
    auto c = co_await ask("c");
    BOOST_TEST(c.ec == error::held);
    BOOST_TEST(c.holder.lock_delay_remaining == 5000ms);
    BOOST_TEST(c.holders.size() == 1u);
    server->advance(5001ms);  // slot 0's delay is over; b expired at 1000 ms: slot 1 delayed until 6000 ms
    auto d = co_await ask("c");
    BOOST_TEST(!d.ec);
    BOOST_TEST(d.slot == 0u);
    BOOST_TEST(d.token > b.token);
    auto e = co_await ask("e");
    BOOST_TEST(e.ec == error::held);
    BOOST_TEST(e.holder.lock_delay_remaining == 999ms);
  }());
}
