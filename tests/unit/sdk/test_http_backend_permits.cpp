// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE http_backend_permits
#include <boost/test/unit_test.hpp>

// The HTTP backend's side of semaphores (docs/protocol.md, "Semaphores") against canned answers: what it
// sends to a server with and without feature `semaphores`, and how it reads grants, refusals, a lock's
// answer and a listing.

#include "coro.hpp"
#include "recording_server.hpp"

#include "baton/backend.hpp"
#include "baton/client.hpp"
#include "baton/error.hpp"
#include "baton/semaphore.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>

using namespace baton;
using namespace std::chrono_literals;
namespace asio = boost::asio;
using baton::test::recording_server;
using baton::test::run_coro;

namespace {

constexpr const char* with_semaphores =
    R"({"features":["acquire_queue","semaphores","list_locks"],"permits_max":5})";

acquire_request permit_request(std::uint32_t permits) {
  acquire_request q;
  q.key = "pool";
  q.owner = "w#1";
  q.ttl = 10s;
  q.permits = permits;
  q.timeout = 2s;
  return q;
}

std::size_t posts(const recording_server& s) {
  auto r = s.requests();
  return static_cast<std::size_t>(
      std::count_if(r.begin(), r.end(), [](const std::string& x) { return x.starts_with("POST "); }));
}

struct fixture {
  asio::io_context ioc;
  std::shared_ptr<backend> open(const recording_server& s) {
    client_config cfg;
    cfg.server_url = s.url();
    return make_backend(ioc.get_executor(), cfg);
  }
};

}  // namespace

BOOST_FIXTURE_TEST_CASE(more_than_one_permit_is_not_sent_to_a_server_without_semaphores, fixture) {
  recording_server server(200, R"({"key":"pool","owner":"w#1","token":7,"ttl_ms":10000})");
  server.answer("/v1/capabilities", 200, R"({"features":["acquire_queue","list_locks"]})");
  auto b = open(server);
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto r = co_await b->acquire_with(permit_request(3));
    BOOST_TEST(r.ec == error::invalid_config);
    BOOST_TEST(r.diagnostic.find("semaphores") != std::string::npos, r.diagnostic);
    BOOST_TEST(posts(server) == 0u);
    // One permit is a lock: sent as it always was.
    auto lock = co_await b->acquire_with(permit_request(1));
    BOOST_TEST(!lock.ec);
    BOOST_TEST(lock.token == 7u);
    BOOST_TEST(lock.slot == 0u);
    BOOST_TEST(lock.permits == 1u);
    BOOST_TEST(posts(server) == 1u);
  }());
}

BOOST_FIXTURE_TEST_CASE(a_count_over_the_servers_permits_max_is_refused_before_sending, fixture) {
  recording_server server(200,
                          R"({"key":"pool","owner":"w#1","token":7,"ttl_ms":10000,"permits":3,"slot":2})");
  server.answer("/v1/capabilities", 200, with_semaphores);
  auto b = open(server);
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto r = co_await b->acquire_with(permit_request(6));
    BOOST_TEST(r.ec == error::invalid_config);
    BOOST_TEST(r.diagnostic.find("at most 5") != std::string::npos, r.diagnostic);
    BOOST_TEST(posts(server) == 0u);
    auto g = co_await b->acquire_with(permit_request(3));
    BOOST_TEST(!g.ec, g.ec.message() << ": " << g.diagnostic);
    BOOST_TEST(g.token == 7u);
    BOOST_TEST(g.slot == 2u);
    BOOST_TEST(g.permits == 3u);
  }());
}

BOOST_FIXTURE_TEST_CASE(a_grant_of_another_count_or_without_its_slot_breaks_the_protocol, fixture) {
  recording_server server(200,
                          R"({"key":"pool","owner":"w#1","token":7,"ttl_ms":10000,"permits":2,"slot":1})");
  server.answer("/v1/capabilities", 200, with_semaphores);
  auto b = open(server);
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto r = co_await b->acquire_with(permit_request(3));
    BOOST_TEST(r.ec == error::protocol_error);
  }());
}

BOOST_FIXTURE_TEST_CASE(a_full_key_reads_every_holder_and_a_mismatch_its_count, fixture) {
  recording_server server(409, R"({"error":"held","message":"all 2 permits are held","owner":"a","token":4,)"
                               R"("ttl_remaining_ms":900,"value":"","permits":2,"holders":[)"
                               R"({"slot":0,"owner":"b","token":5,"ttl_remaining_ms":5000,"value":"x"},)"
                               R"({"slot":1,"owner":"a","token":4,"ttl_remaining_ms":900,"value":""}]})");
  server.answer("/v1/capabilities", 200, with_semaphores);
  auto b = open(server);
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto r = co_await b->acquire_with(permit_request(2));
    BOOST_TEST(r.ec == error::held);
    BOOST_TEST(r.permits == 2u);
    BOOST_TEST(r.holder.owner == "a");
    BOOST_TEST(r.holder.token == 4u);
    BOOST_REQUIRE(r.holders.size() == 2u);
    BOOST_TEST(r.holders[0].slot == 0u);
    BOOST_TEST(r.holders[0].owner == "b");
    BOOST_TEST(r.holders[0].value == "x");
    BOOST_TEST(r.holders[1].slot == 1u);
    BOOST_TEST(r.holders[1].ttl_remaining == 900ms);
  }());
  recording_server mismatch(409,
                            R"({"error":"permits_mismatch","message":"in use with 4 permits","permits":4})");
  mismatch.answer("/v1/capabilities", 200, with_semaphores);
  auto m = open(mismatch);
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto r = co_await m->acquire_with(permit_request(2));
    BOOST_TEST(r.ec == error::permits_mismatch);
    BOOST_TEST(r.permits == 4u);
    BOOST_TEST(r.diagnostic == "in use with 4 permits");
    // A lock's acquire of a key held as a semaphore gets the same refusal.
    auto l = co_await m->acquire_with(permit_request(1));
    BOOST_TEST(l.ec == error::permits_mismatch);
  }());
}

BOOST_FIXTURE_TEST_CASE(a_semaphore_keys_lock_answer_and_listing_carry_slots, fixture) {
  recording_server server(200,
                          R"({"key":"pool","owner":"a","token":4,"ttl_remaining_ms":900,"slot":0,)"
                          R"("permits":3,"holders":[{"slot":0,"owner":"a","token":4,"ttl_remaining_ms":900},)"
                          R"({"slot":2,"owner":"c","token":6,"ttl_remaining_ms":800}]})");
  server.answer("/v1/capabilities", 200, with_semaphores);
  server.answer("/v1/locks?prefix=po&limit=100", 200,
                R"({"locks":[{"key":"pool","kind":"permit","slot":0,"permits":3,"owner":"a","token":4,)"
                R"("ttl_remaining_ms":900},{"key":"pool","kind":"permit","slot":2,"permits":3,"owner":"c",)"
                R"("token":6,"ttl_remaining_ms":800}],"next":null})");
  auto b = open(server);
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto g = co_await b->get("pool", std::nullopt, 2s);
    BOOST_TEST(!g.ec, g.diagnostic);
    BOOST_REQUIRE(g.holder.has_value());
    BOOST_TEST(g.holder->token == 4u);
    BOOST_TEST(g.permits == 3u);
    BOOST_REQUIRE(g.holders.size() == 2u);
    BOOST_TEST(g.holders[1].slot == 2u);
    auto l = co_await b->list("po", "", 100, 2s);
    BOOST_TEST(!l.ec, l.diagnostic);
    BOOST_REQUIRE(l.page.locks.size() == 2u);
    BOOST_TEST(l.page.locks[1].kind == "permit");
    BOOST_TEST(l.page.locks[1].holder.slot == 2u);
    BOOST_TEST(l.page.locks[1].permits == 3u);
  }());
}

// A semaphore refused by a server without the feature must not stop the same client's locks from waiting in
// the server's queue (the refusal is of the count, not of the queue).
BOOST_FIXTURE_TEST_CASE(a_refused_semaphore_leaves_the_clients_locks_queueing, fixture) {
  recording_server server(200, R"({"key":"k","owner":"o","token":7,"ttl_ms":10000})");
  server.answer("/v1/capabilities", 200, R"({"features":["acquire_queue"]})");
  client_config cfg;
  cfg.server_url = server.url();
  client c(ioc.get_executor(), cfg);
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    semaphore pool(c, "pool", 3);
    auto [ec, none] = co_await pool.async_acquire(lease_options{}, asio::as_tuple(asio::use_awaitable));
    BOOST_TEST(ec == error::invalid_config);
    BOOST_TEST(posts(server) == 0u);
    lease l = co_await c.async_acquire("k", {.ttl = 10s});
    auto sent = server.requests();
    BOOST_TEST(
        std::any_of(sent.begin(), sent.end(),
                    [](const std::string& r) { return r.starts_with("POST /v1/locks/k/acquire?wait_ms="); }),
        "the lock's acquire was not queued");
    l.detach();
  }());
}
