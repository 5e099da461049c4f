// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE http_semaphore
#include <boost/test/unit_test.hpp>

// baton::semaphore through the HTTP backend against a real batond (feature `semaphores`): at most N
// holders, a release admits the queued waiter into the freed slot, permits_mismatch, a count over
// --max-permits refused before sending, with_permit cancelled at a break, and the CLI's --permits.

#include "batond_fixture.hpp"
#include "coro.hpp"
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

BOOST_AUTO_TEST_CASE(three_permits_hold_three_of_four_and_a_release_admits_the_queued_waiter) {
  temp_dir dir;
  batond_process server(dir.path());
  semaphore_scenarios::three_of_four_and_a_release_admits_the_waiter(server.url(), 30'000ms, 300ms,
                                                                     std::nullopt);
}

BOOST_AUTO_TEST_CASE(the_count_is_fixed_while_in_use_and_one_over_max_permits_is_not_sent) {
  temp_dir dir;
  batond_process server(dir.path(), {"--max-permits", "5"});
  asio::io_context ioc;
  client a(ioc.get_executor(), config(server.url(), "a"));
  client b(ioc.get_executor(), config(server.url(), "b"));
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    lease lock = co_await a.async_acquire("shared", lease_opts(30'000ms));
    semaphore three(b, "shared", 3);
    BOOST_TEST(co_await error_of(three.async_try_acquire(lease_opts(30'000ms))) == error::permits_mismatch);
    BOOST_TEST(co_await error_of(three.async_acquire(lease_opts(30'000ms), 3000ms)) ==
               error::permits_mismatch);
    co_await lock.async_release();
    lease p = co_await three.async_acquire(lease_opts(30'000ms));
    BOOST_TEST(co_await error_of(a.async_try_acquire("shared", lease_opts(30'000ms))) ==
               error::permits_mismatch);
    co_await p.async_release();
    semaphore six(b, "other", 6);
    baton::diagnostics diag;
    auto [ec, l] = co_await six.async_acquire(
        lease_opts(30'000ms), baton::with_diagnostics(diag, asio::as_tuple(asio::use_awaitable)));
    BOOST_TEST(ec == error::invalid_config);
    BOOST_TEST(diag.message().find("at most 5") != std::string::npos, diag.message());
  }());
}

BOOST_AUTO_TEST_CASE(with_permit_work_is_cancelled_when_its_permit_is_broken) {
  temp_dir dir;
  batond_process server(dir.path());
  asio::io_context ioc;
  client a(ioc.get_executor(), config(server.url(), "a"));
  client ops(ioc.get_executor(), config(server.url(), "ops"));
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    semaphore s(a, "pool", 2);
    lease other = co_await s.async_acquire(lease_opts(30'000ms, 200ms));
    std::uint64_t token = 0;
    bool cancelled = false;
    auto work = [&](lease& l) -> asio::awaitable<void> {
      token = l.token();
      asio::steady_timer t(co_await asio::this_coro::executor, 60s);
      auto [ec] = co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
      cancelled = ec == asio::error::operation_aborted;
    };
    auto run = start_background(ioc, [&]() -> asio::awaitable<int> {
      co_await s.async_with_permit(lease_opts(30'000ms, 200ms), work);
      co_return 0;
    }());
    while (token == 0)
      co_await sleep_for(10ms);
    BOOST_TEST(co_await error_of(ops.async_break("pool")) == error::bad_request);  // which permit?
    co_await ops.async_break("pool", token);
    for (int i = 0; i < 250 && !run->done; ++i)
      co_await sleep_for(20ms);
    BOOST_REQUIRE(run->done);
    BOOST_TEST(cancelled);
    BOOST_TEST(error_of(run->error) == error::lease_lost);
    co_await sleep_for(500ms);
    BOOST_TEST(other.active());
    co_await other.async_release();
  }());
}

BOOST_AUTO_TEST_CASE(six_contenders_never_hold_more_than_three_permits) {
  temp_dir dir;
  batond_process server(dir.path());
  semaphore_scenarios::six_contenders_never_exceed_three_permits(server.url(), 10'000ms, 4, 50ms);
}

BOOST_AUTO_TEST_CASE(the_cli_takes_permits_and_lists_each_with_its_slot) {
  temp_dir dir, scratch;
  batond_process server(dir.path());
  const std::string baton = std::string(BATON_BIN_DIR) + "/baton";
  const std::string err = (scratch.path() / "stderr").string();
  auto run = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {baton, "--server", server.url()});
    return run_to_end(std::move(args), err);
  };
  for (int slot = 0; slot < 2; ++slot) {
    auto r = run({"acquire", "cli/pool", "--ttl", "30s", "--permits", "2"});
    BOOST_TEST_REQUIRE(r.code == 0, r.err);
    BOOST_TEST(boost::json::parse(r.out).as_object().at("slot").as_int64() == slot);
  }
  auto full = run({"acquire", "cli/pool", "--ttl", "30s", "--permits", "2"});
  BOOST_TEST(full.code == 75, full.err);
  auto ls = run({"ls", "cli/", "--json"});
  BOOST_TEST_REQUIRE(ls.code == 0, ls.err);
  std::vector<std::int64_t> slots;
  std::size_t start = 0;
  while (start < ls.out.size()) {
    const auto end = ls.out.find('\n', start);
    auto o = boost::json::parse(ls.out.substr(start, end - start)).as_object();
    BOOST_TEST(o.at("kind").as_string() == "permit");
    BOOST_TEST(o.at("permits").as_int64() == 2);
    slots.push_back(o.at("slot").as_int64());
    start = end == std::string::npos ? ls.out.size() : end + 1;
  }
  BOOST_TEST((slots == std::vector<std::int64_t>{0, 1}));
  auto table = run({"ls", "cli/"});
  BOOST_TEST(table.out.find("cli/pool [1/2]") != std::string::npos, table.out);
  auto e = run({"exec", "other/pool", "--ttl", "10s", "--permits", "4", "--", "/bin/sh", "-c",
                "echo $BATON_FENCING_SLOT $BATON_FENCING_PERMITS"});
  BOOST_TEST(e.code == 0, e.err);
  BOOST_TEST(e.out == "0 4\n");
}
