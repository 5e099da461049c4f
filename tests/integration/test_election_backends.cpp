// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE election_backends
#include <boost/test/unit_test.hpp>

// baton::election against a real batond, and against a real etcd (one member on loopback).

#include "batond_fixture.hpp"
#include "coro.hpp"
#include "etcd_cluster.hpp"
#include "lease_opts.hpp"

#include "baton/client.hpp"
#include "baton/election.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

using namespace baton;
using namespace baton::test;
using namespace std::chrono_literals;
namespace asio = boost::asio;

namespace {

client_config config(const std::string& url, std::string identity) {
  client_config c;
  c.server_url = url;
  c.request_timeout = 2000ms;
  c.identity = std::move(identity);
  return c;
}

template <class T>
asio::awaitable<void> until_done(const std::shared_ptr<background<T>>& b, std::chrono::milliseconds bound) {
  const auto give_up = std::chrono::steady_clock::now() + bound;
  while (!b->done && std::chrono::steady_clock::now() < give_up)
    co_await sleep_for(10ms);
  BOOST_REQUIRE_MESSAGE(b->done, "not done within the bound");
  if (b->error) std::rethrow_exception(b->error);
}

// Two candidates: the first leads with its value published; the second campaigns and observes; the first
// resigns; the second's observe sees the change at once and the second is elected with its own value.
void two_candidates(const std::string& url) {
  asio::io_context ioc;
  client a(ioc.get_executor(), config(url, "a"));
  client b(ioc.get_executor(), config(url, "b"));
  election ea(a, "services/scheduler");
  election eb(b, "services/scheduler");
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    lease la = co_await ea.async_campaign("10.0.0.1:8080", lease_opts(5000ms));
    auto seen_by_b = co_await eb.async_leader();
    BOOST_REQUIRE(seen_by_b.has_value());
    BOOST_TEST(seen_by_b->value == "10.0.0.1:8080");
    BOOST_TEST(seen_by_b->token == la.token());

    leader_stream leaders = eb.observe();
    BOOST_TEST((co_await leaders.async_next())->token == la.token());
    auto change = start_background(ioc, leaders.async_next());
    auto elected = start_background(ioc, eb.async_campaign("10.0.0.2:8080", lease_opts(5000ms)));
    co_await sleep_for(1000ms);
    BOOST_TEST(!change->done);
    BOOST_TEST(!elected->done);
    BOOST_TEST(la.active());

    const auto resigned_at = std::chrono::steady_clock::now();
    co_await ea.async_resign();
    BOOST_TEST((la.state() == lease_state::released));
    co_await until_done(change, 10'000ms);
    co_await until_done(elected, 10'000ms);
    // Woken by the release, not by a lease running out (5 s) or a long-poll's wait (30 s).
    BOOST_TEST((std::chrono::steady_clock::now() - resigned_at < 3s));
    // The change is "nobody leads" or already b, whichever the long-poll saw first.
    if (*change->value) BOOST_TEST((*change->value)->token != la.token());
    lease& lb = *elected->value;
    BOOST_TEST(lb.token() > la.token());
    auto now_leading = co_await ea.async_leader();
    BOOST_REQUIRE(now_leading.has_value());
    BOOST_TEST(now_leading->owner == lb.owner());
    BOOST_TEST(now_leading->value == "10.0.0.2:8080");
    co_await eb.async_resign();
    BOOST_TEST(!(co_await ea.async_leader()).has_value());
  }());
}

}  // namespace

BOOST_AUTO_TEST_CASE(against_batond_the_second_candidate_is_elected_when_the_leader_resigns) {
  temp_dir dir;
  batond_process server(dir.path());
  two_candidates(server.url());
}

BOOST_AUTO_TEST_CASE(against_etcd_the_second_candidate_is_elected_when_the_leader_resigns) {
  etcd_cluster etcd(1);
  two_candidates(etcd.url());
}
