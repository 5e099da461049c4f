// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE etcd_semaphore
#include <boost/test/unit_test.hpp>

// baton::semaphore on a real etcd (one member on loopback): slot keys beside the lock's keys, the lowest free
// slot first, waiters admitted in order, the count compared in the grant's txn (docs/design.md,
// "Semaphores on etcd").

#include "coro.hpp"
#include "etcd_cluster.hpp"
#include "lease_opts.hpp"
#include "process.hpp"
#include "semaphore_scenarios.hpp"
#include "temp_dir.hpp"

#include "baton/backend.hpp"
#include "baton/client.hpp"
#include "baton/semaphore.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/parse.hpp>

#include <algorithm>
#include <memory>
#include <vector>

using namespace baton;
using namespace baton::test;
using namespace std::chrono_literals;
namespace asio = boost::asio;

using semaphore_scenarios::config;

BOOST_AUTO_TEST_CASE(three_permits_hold_three_of_four_and_a_release_admits_the_waiter) {
  etcd_cluster etcd(1);
  // etcd's TTLs are whole seconds; the admitted permit is then kept past half its TTL (keep-alives).
  semaphore_scenarios::three_of_four_and_a_release_admits_the_waiter(etcd.url(), 5000ms, 500ms, 2500ms);
}

BOOST_AUTO_TEST_CASE(the_count_is_fixed_while_a_lock_or_permits_hold_the_key) {
  etcd_cluster etcd(1);
  asio::io_context ioc;
  client a(ioc.get_executor(), config(etcd.url(), "a"));
  client b(ioc.get_executor(), config(etcd.url(), "b"));
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    lease lock = co_await a.async_acquire("shared", lease_opts(5000ms));
    semaphore three(b, "shared", 3);
    BOOST_TEST(co_await error_of(three.async_try_acquire(lease_opts(5000ms))) == error::permits_mismatch);
    BOOST_TEST(co_await error_of(three.async_acquire(lease_opts(5000ms), 3000ms)) == error::permits_mismatch);
    co_await lock.async_release();

    lease p = co_await three.async_acquire(lease_opts(5000ms));
    BOOST_TEST(co_await error_of(a.async_try_acquire("shared", lease_opts(5000ms))) ==
               error::permits_mismatch);
    // A waiting lock is refused too, not queued behind the permits.
    BOOST_TEST(co_await error_of(a.async_acquire("shared", lease_opts(5000ms), 3000ms)) ==
               error::permits_mismatch);
    semaphore two(a, "shared", 2);
    BOOST_TEST(co_await error_of(two.async_try_acquire(lease_opts(5000ms))) == error::permits_mismatch);
    co_await p.async_release();
    lease q = co_await two.async_acquire(lease_opts(5000ms));  // free again: the next grant sets the count
    BOOST_TEST(q.permits() == 2u);
    co_await q.async_release();
    lease l2 = co_await a.async_acquire("shared", lease_opts(5000ms));  // and a lock again
    co_await l2.async_release();
  }());
}

BOOST_AUTO_TEST_CASE(the_same_owner_keeps_its_slot_and_a_break_by_token_ends_that_permit_alone) {
  etcd_cluster etcd(1);
  asio::io_context ioc;
  client a(ioc.get_executor(), config(etcd.url(), "a"));
  client ops(ioc.get_executor(), config(etcd.url(), "ops"));
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    semaphore s(a, "pool", 2);
    lease first = co_await s.async_acquire(lease_opts(5000ms, 500ms));
    lease_options named = lease_opts(5000ms, 500ms);
    named.owner = "worker-7";
    lease b = co_await s.async_acquire(named);
    BOOST_TEST(b.slot() == 1u);
    lease b2 = co_await s.async_acquire(named);
    BOOST_TEST(b2.slot() == 1u);
    BOOST_TEST(b2.token() > b.token());
    BOOST_TEST((co_await b.async_release() == release_outcome::already_free));
    BOOST_TEST(co_await error_of(ops.async_break("pool")) == error::bad_request);  // name the permit
    holder_info ended = co_await ops.async_break("pool", b2.token());
    BOOST_TEST(ended.slot == 1u);
    for (int i = 0; i < 100 && b2.active(); ++i)
      co_await sleep_for(20ms);
    BOOST_TEST((b2.state() == lease_state::lost));
    co_await sleep_for(1200ms);  // a renew or two of the other permit
    BOOST_TEST(first.active());  // untouched
    co_await first.async_release();
  }());
}

BOOST_AUTO_TEST_CASE(six_contenders_never_exceed_three_permits) {
  etcd_cluster etcd(1);
  semaphore_scenarios::six_contenders_never_exceed_three_permits(etcd.url(), 5000ms, 3, 100ms);
}

// `baton acquire --permits N` and `baton exec --permits N` against etcd: the slot printed, and handed to the
// command as BATON_FENCING_SLOT beside BATON_FENCING_TOKEN.
BOOST_AUTO_TEST_CASE(the_cli_takes_permits_and_hands_the_slot_to_the_command) {
  etcd_cluster etcd(1);
  temp_dir scratch;
  const std::string baton = std::string(BATON_BIN_DIR) + "/baton";
  const std::string err = (scratch.path() / "stderr").string();
  auto run = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {baton, "--server", etcd.url()});
    return run_to_end(std::move(args), err);
  };
  for (int slot = 0; slot < 2; ++slot) {
    auto r = run({"acquire", "cli-pool", "--ttl", "30s", "--permits", "3"});
    BOOST_TEST_REQUIRE(r.code == 0, r.err);
    const auto j = boost::json::parse(r.out).as_object();
    BOOST_TEST(j.at("slot").as_int64() == slot);
    BOOST_TEST(j.at("permits").as_int64() == 3);
  }
  // The third permit goes to the command, with its slot in the environment.
  auto e = run({"exec", "cli-pool", "--ttl", "10s", "--permits", "3", "--", "/bin/sh", "-c",
                "echo $BATON_FENCING_SLOT $BATON_FENCING_PERMITS $BATON_FENCING_TOKEN"});
  BOOST_TEST_REQUIRE(e.code == 0, e.err);
  BOOST_TEST(e.out.starts_with("2 3 "), e.out);
  // Full now (the two detached permits stay for their TTL): exit 75, and a lock of the key is a mismatch.
  auto third = run({"acquire", "cli-pool", "--ttl", "30s", "--permits", "3"});
  BOOST_TEST(third.code == 0, third.err);  // the exec released its permit: slot 2 is free again
  auto full = run({"acquire", "cli-pool", "--ttl", "30s", "--permits", "3"});
  BOOST_TEST(full.code == 75, full.err);
  auto lock = run({"acquire", "cli-pool", "--ttl", "30s"});
  BOOST_TEST(lock.code == 75, lock.err);
  BOOST_TEST(lock.err.find("permit") != std::string::npos, lock.err);
}
