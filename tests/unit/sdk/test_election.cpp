// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE election
#include <boost/test/unit_test.hpp>

// baton::election against baton::testing::memory_backend: two candidates share one in-memory lock server,
// whose long-polls wait on its own hand-moved clock, so "observe does not poll" is a count of requests.

#include "coro.hpp"
#include "lease_opts.hpp"

#include "baton/client.hpp"
#include "baton/election.hpp"
#include "baton/testing.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>

using namespace baton;
using namespace std::chrono_literals;
using namespace boost::asio::experimental::awaitable_operators;
namespace asio = boost::asio;
using baton::test::lease_opts;
using baton::test::run_coro;
using baton::test::sleep_for;
using baton::test::start_background;
using baton::testing::memory_backend;

namespace {

client_config test_config(std::string identity) {
  return baton::test::quick_client_config(std::move(identity));
}

struct fixture {
  asio::io_context ioc;
  std::shared_ptr<memory_backend> server = std::make_shared<memory_backend>(ioc.get_executor());
  client a{ioc.get_executor(), test_config("a"), server};
  client b{ioc.get_executor(), test_config("b"), server};
  election ea{a, "leader"};
  election eb{b, "leader"};
};

}  // namespace

BOOST_FIXTURE_TEST_CASE(the_first_candidate_leads_and_the_second_is_elected_when_it_resigns, fixture) {
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    BOOST_TEST(!(co_await ea.async_leader()).has_value());
    lease la = co_await ea.async_campaign("10.0.0.1:80", lease_opts(30'000ms));
    BOOST_TEST(la.value() == "10.0.0.1:80");
    auto leader = co_await eb.async_leader();
    BOOST_REQUIRE(leader.has_value());
    BOOST_TEST(leader->owner == la.owner());
    BOOST_TEST(leader->token == la.token());
    BOOST_TEST(leader->value == "10.0.0.1:80");

    auto second = start_background(ioc, eb.async_campaign("10.0.0.2:80", lease_opts(30'000ms)));
    co_await sleep_for(100ms);
    BOOST_TEST(!second->done);  // a follower waits while the leader holds its lease
    co_await ea.async_resign();
    BOOST_TEST((la.state() == lease_state::released));
    while (!second->done)
      co_await sleep_for(10ms);
    BOOST_REQUIRE(second->value.has_value());
    lease& lb = *second->value;
    BOOST_TEST(lb.token() > la.token());
    leader = co_await ea.async_leader();
    BOOST_REQUIRE(leader.has_value());
    BOOST_TEST(leader->value == "10.0.0.2:80");
    BOOST_TEST(leader->token == lb.token());
    co_await eb.async_resign();
    BOOST_TEST(!(co_await ea.async_leader()).has_value());
  }());
}

BOOST_FIXTURE_TEST_CASE(observe_completes_at_the_next_change_of_leader_without_polling, fixture) {
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    lease la = co_await ea.async_campaign("A", lease_opts(30'000ms));
    leader_stream leaders = eb.observe();
    auto now = co_await leaders.async_next();  // the current leader, a
    BOOST_REQUIRE(now.has_value());
    BOOST_TEST(now->token == la.token());
    auto gets_before = server->calls().get;
    auto seen = start_background(ioc, leaders.async_next());
    co_await sleep_for(500ms);
    BOOST_TEST(!seen->done);
    // One long-poll that is still waiting: no polling.
    BOOST_TEST(server->calls().get - gets_before <= 1);
    // A renew is no change of leader.
    co_await sleep_for(100ms);
    BOOST_TEST(!seen->done);

    co_await ea.async_resign();
    while (!seen->done)
      co_await sleep_for(10ms);
    BOOST_TEST(!seen->error);
    BOOST_TEST(!seen->value->has_value());  // nobody leads now

    // From "nobody", the next leader.
    auto next = start_background(ioc, leaders.async_next());
    co_await sleep_for(50ms);
    BOOST_TEST(!next->done);
    lease lb = co_await eb.async_campaign("B", lease_opts(30'000ms));
    while (!next->done)
      co_await sleep_for(10ms);
    BOOST_REQUIRE(next->value->has_value());
    BOOST_TEST((*next->value)->token == lb.token());
    BOOST_TEST((*next->value)->value == "B");
    co_await lb.async_release();
  }());
}

// election::observe(): the current leader first, then each change; a change made while the follower was busy
// between two calls is returned at once by the next one, and a stream does not repeat a leader.
BOOST_FIXTURE_TEST_CASE(a_leader_stream_returns_the_current_leader_then_every_change, fixture) {
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    leader_stream leaders = eb.observe();
    auto first = co_await leaders.async_next();
    BOOST_TEST(!first.has_value());  // nobody leads yet

    lease la = co_await ea.async_campaign("A", lease_opts(30'000ms));
    // Elected before the follower asked again: not missed, returned at once.
    auto second = co_await leaders.async_next();
    BOOST_REQUIRE(second.has_value());
    BOOST_TEST(second->token == la.token());
    BOOST_TEST(second->value == "A");

    // The same leader is not returned again: async_next() waits for a change.
    auto gets_before = server->calls().get;
    auto third = start_background(ioc, leaders.async_next());
    co_await sleep_for(200ms);
    BOOST_TEST(!third->done);
    BOOST_TEST(server->calls().get - gets_before <= 1);  // one long-poll waiting, no polling
    co_await ea.async_resign();
    while (!third->done)
      co_await sleep_for(10ms);
    BOOST_TEST(!third->error);
    BOOST_TEST(!third->value->has_value());  // nobody leads

    // Two elections while the follower was busy: the latest leader, at once.
    lease lb = co_await eb.async_campaign("B", lease_opts(30'000ms));
    co_await eb.async_resign();
    lease lc = co_await ea.async_campaign("C", lease_opts(30'000ms));
    auto fourth = co_await leaders.async_next();
    BOOST_REQUIRE(fourth.has_value());
    BOOST_TEST(fourth->token == lc.token());
    BOOST_TEST(fourth->value == "C");
    BOOST_TEST(lc.token() > lb.token());
    // A copy shares the position: it too waits for the next change.
    leader_stream copy = leaders;
    auto r = co_await (copy.async_next() || sleep_for(100ms));
    BOOST_TEST(r.index() == 1u);
    co_await lc.async_release();
  }());
}

BOOST_FIXTURE_TEST_CASE(observe_retries_transient_errors_and_ends_on_cancellation, fixture) {
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    lease la = co_await ea.async_campaign("A", lease_opts(30'000ms));
    leader_stream leaders = eb.observe();
    BOOST_TEST((co_await leaders.async_next())->token == la.token());
    server->fail_next(3, make_error_code(error::connection_failed));
    auto seen = start_background(ioc, leaders.async_next());
    co_await sleep_for(300ms);
    BOOST_TEST(!seen->done);  // the failures were retried, and it waits again
    co_await ea.async_resign();
    while (!seen->done)
      co_await sleep_for(10ms);
    BOOST_TEST(!seen->error);

    // Cancelled (the loser of a race): it ends at once, and leaves no long-poll waiting behind. The stream
    // keeps its position: the next call still waits for a change from "nobody".
    const auto gets = server->calls().get;
    auto r = co_await (leaders.async_next() || sleep_for(100ms));
    BOOST_TEST(r.index() == 1u);
    co_await sleep_for(200ms);
    BOOST_TEST(server->calls().get - gets <= 1);
    lease lc = co_await ea.async_campaign("C", lease_opts(30'000ms));
    auto after = co_await leaders.async_next();
    BOOST_REQUIRE(after.has_value());
    BOOST_TEST(after->token == lc.token());
    co_await lc.async_release();
  }());
}

BOOST_FIXTURE_TEST_CASE(a_cancelled_campaign_leaves_no_lease_behind, fixture) {
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    lease la = co_await ea.async_campaign("A", lease_opts(30'000ms));
    auto r = co_await (eb.async_campaign("B", lease_opts(30'000ms)) || sleep_for(100ms));
    BOOST_TEST(r.index() == 1u);
    co_await ea.async_resign();
    co_await sleep_for(200ms);
    // b gave up before a resigned: nobody took the key after a.
    BOOST_TEST(!server->holder("leader").has_value());
    co_await eb.async_resign();  // b holds nothing: nothing to do
    BOOST_TEST(!server->holder("leader").has_value());
  }());
}

BOOST_FIXTURE_TEST_CASE(campaigning_again_while_leading_is_refused_and_after_resign_is_a_new_term, fixture) {
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    lease first = co_await ea.async_campaign("A", lease_opts(30'000ms));
    try {
      co_await ea.async_campaign("A2", lease_opts(30'000ms));
      BOOST_FAIL("expected invalid_config");
    } catch (const exception& e) {
      BOOST_TEST((e.code() == error::invalid_config));
    }
    BOOST_TEST(first.active());
    co_await ea.async_resign();
    co_await ea.async_resign();  // once is enough; the second finds nothing to release
    lease second = co_await ea.async_campaign("A2", lease_opts(30'000ms));
    BOOST_TEST(second.token() > first.token());
    BOOST_TEST(server->holder("leader")->value == "A2");
    // A value the protocol refuses is refused before anything is sent.
    auto refused = eb.async_campaign(std::string(2000, 'v'));
    BOOST_CHECK_THROW(co_await std::move(refused), exception);
    co_await ea.async_resign();
  }());
}

// election::async_proclaim: the leader publishes a new value under the same lease and token (etcd's
// Election.Proclaim); a follower's stream reports it as a change, woken by the long-poll, not by its wait
// running out; only a leader whose lease the server still holds may proclaim.
BOOST_FIXTURE_TEST_CASE(a_leader_proclaims_a_new_value_under_the_same_token, fixture) {
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    try {
      co_await ea.async_proclaim("10.0.0.9:80");
      BOOST_FAIL("proclaimed without leading");
    } catch (const exception& e) {
      BOOST_TEST((e.code() == error::invalid_config));
    }
    lease la = co_await ea.async_campaign("10.0.0.1:80", lease_opts(30'000ms));
    leader_stream leaders = eb.observe();
    BOOST_TEST((co_await leaders.async_next())->value == "10.0.0.1:80");
    auto seen = start_background(ioc, leaders.async_next());
    co_await sleep_for(50ms);
    BOOST_TEST(!seen->done);
    const auto gets = server->calls().get;

    co_await ea.async_proclaim("10.0.0.2:80");
    BOOST_TEST(la.value() == "10.0.0.2:80");
    BOOST_TEST(la.active());
    BOOST_TEST(server->holder("leader")->token == la.token());
    BOOST_TEST(server->holder("leader")->value == "10.0.0.2:80");
    while (!seen->done)
      co_await sleep_for(10ms);
    BOOST_REQUIRE(seen->value->has_value());
    BOOST_TEST((*seen->value)->token == la.token());  // the same leader, with its new value
    BOOST_TEST((*seen->value)->value == "10.0.0.2:80");
    BOOST_TEST(server->calls().get - gets <= 1);  // the waiting long-poll answered it: no polling

    // A value the protocol refuses: nothing is sent.
    try {
      co_await ea.async_proclaim(std::string(2000, 'v'));
      BOOST_FAIL("a 2000-byte value was proclaimed");
    } catch (const exception& e) {
      BOOST_TEST((e.code() == error::invalid_config));
    }
    BOOST_TEST(server->holder("leader")->value == "10.0.0.2:80");

    // The server ended the lease (its TTL passed there): the proclaim is refused, and changes nothing.
    server->expire("leader");
    try {
      co_await ea.async_proclaim("10.0.0.3:80");
      BOOST_FAIL("a lease the server no longer holds proclaimed");
    } catch (const exception& e) {
      BOOST_TEST((e.code() == error::lease_lost), e.what());
    }
    BOOST_TEST(!server->holder("leader").has_value());
    co_await ea.async_resign();
  }());
}
