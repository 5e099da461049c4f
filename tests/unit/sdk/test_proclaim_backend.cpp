// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE proclaim_backend
#include <boost/test/unit_test.hpp>

// backend::proclaim (docs/protocol.md, "proclaim") through the backends that need no server: the test double
// (baton::testing::memory_backend), the default of a backend that implements only the five calls, and
// forwarding_backend. The HTTP and etcd backends are checked against real servers in
// tests/integration/test_http_proclaim.cpp and test_etcd_proclaim.cpp.

#include "baton/backend.hpp"
#include "baton/client.hpp"
#include "baton/error.hpp"
#include "baton/testing.hpp"
#include "coro.hpp"
#include "lease_opts.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <memory>
#include <string>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using namespace boost::asio::experimental::awaitable_operators;
using baton::error;
using baton::milliseconds;
using baton::test::run_coro;
using baton::testing::memory_backend;

namespace {
constexpr milliseconds timeout{1'000};
}  // namespace

BOOST_AUTO_TEST_CASE(memory_backend_proclaim_replaces_the_value_and_keeps_token_and_expiry) {
  asio::io_context ioc;
  auto server = std::make_shared<memory_backend>(ioc.get_executor());
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto a = co_await server->acquire("leader", "a", 10'000ms, "10.0.0.1:80", timeout);
    BOOST_REQUIRE(!a.ec);
    server->advance(4s);
    auto p = co_await server->proclaim("leader", "a", a.token, "10.0.0.2:80", timeout);
    BOOST_TEST(!p.ec);
    auto h = server->holder("leader");
    BOOST_REQUIRE(h.has_value());
    BOOST_TEST(h->value == "10.0.0.2:80");
    BOOST_TEST(h->token == a.token);
    BOOST_TEST(h->ttl_remaining.count() == 6'000);  // not a renew
    BOOST_TEST(server->last_token() == a.token);    // no token taken
    auto held = co_await server->acquire("leader", "b", 10'000ms, "", timeout);
    BOOST_TEST(held.ec == error::held);
    BOOST_TEST(held.holder.value == "10.0.0.2:80");
    BOOST_TEST(!(co_await server->proclaim("leader", "a", a.token, "", timeout)).ec);
    BOOST_TEST(server->holder("leader")->value.empty());
    server->advance(6s);
    BOOST_TEST(!server->holder("leader").has_value());
    BOOST_TEST(server->calls().proclaim == 2);
  }());
}

BOOST_AUTO_TEST_CASE(memory_backend_refuses_a_proclaim_for_renews_reasons_in_renews_order) {
  asio::io_context ioc;
  auto server = std::make_shared<memory_backend>(ioc.get_executor());
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto lost = [&](const baton::proclaim_reply& r, const char* reason) {
      BOOST_TEST(r.ec == error::lease_lost);
      BOOST_TEST(r.lost_reason == reason);
    };
    lost(co_await server->proclaim("k", "a", 1, "v", timeout), "not_held");
    auto first = co_await server->acquire("k", "a", 10'000ms, "first", timeout);
    auto second = co_await server->acquire("k", "a", 10'000ms, "second", timeout);
    lost(co_await server->proclaim("k", "b", second.token, "v", timeout), "owner_mismatch");
    lost(co_await server->proclaim("k", "a", first.token, "v", timeout), "token_mismatch");
    BOOST_TEST(server->holder("k")->value == "second");
    server->expire("k");
    lost(co_await server->proclaim("k", "a", second.token, "v", timeout), "not_held");
    // A transient failure is reported as it is, and changes nothing.
    auto third = co_await server->acquire("k", "a", 10'000ms, "third", timeout);
    server->fail_next(1, make_error_code(error::connection_failed));
    auto failed = co_await server->proclaim("k", "a", third.token, "v", timeout);
    BOOST_TEST(failed.ec == error::connection_failed);
    BOOST_TEST(server->holder("k")->value == "third");
  }());
}

BOOST_AUTO_TEST_CASE(a_long_poll_naming_the_value_answers_at_a_proclaim_and_a_token_poll_does_not) {
  asio::io_context ioc;
  auto server = std::make_shared<memory_backend>(ioc.get_executor());
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto a = co_await server->acquire("leader", "a", 10'000ms, "old:80", timeout);
    const baton::wait_for_change by_value{a.token, 5'000ms, std::string("old:80")};
    const baton::wait_for_change by_token{a.token, 5'000ms};
    auto proclaim_soon = [&]() -> asio::awaitable<baton::proclaim_reply> {
      co_await baton::test::sleep_for(50ms);
      co_return co_await server->proclaim("leader", "a", a.token, "new:80", timeout);
    };
    auto polling = server->get("leader", by_value, 2'000ms);
    auto proclaiming = proclaim_soon();
    auto [woken, p] = co_await (std::move(polling) && std::move(proclaiming));
    BOOST_TEST(!p.ec);
    BOOST_TEST(!woken.ec);
    BOOST_REQUIRE(woken.holder.has_value());
    BOOST_TEST(woken.holder->value == "new:80");
    // The value differs from the one named: answered at once. A token poll sleeps through a proclaim (the
    // double's clock does not move, so it ends at its request timeout).
    auto at_once = co_await server->get("leader", by_value, 2'000ms);
    BOOST_TEST(at_once.holder->value == "new:80");
    auto token_poll = server->get("leader", by_token, 300ms);
    // Named: the coroutine refers to the lambda, which must outlive it.
    auto proclaim_again = [&]() -> asio::awaitable<baton::proclaim_reply> {
      co_await baton::test::sleep_for(50ms);
      co_return co_await server->proclaim("leader", "a", a.token, "newer:80", timeout);
    };
    auto again = proclaim_again();
    auto [slept, q] = co_await (std::move(token_poll) && std::move(again));
    BOOST_TEST(!q.ec);
    BOOST_TEST(slept.ec == error::request_timeout);
  }());
}

namespace {
// The narrow seam: a backend of five calls only (the others take the base class's defaults).
struct five_calls final : baton::backend {
  explicit five_calls(std::shared_ptr<backend> s) : store(std::move(s)) {}
  std::shared_ptr<backend> store;
  asio::awaitable<baton::acquire_reply> acquire(std::string k, std::string o, milliseconds t, std::string v,
                                                milliseconds to) override {
    return store->acquire(std::move(k), std::move(o), t, std::move(v), to);
  }
  asio::awaitable<baton::renew_reply> renew(std::string k, std::string o, std::uint64_t n, milliseconds t,
                                            milliseconds to) override {
    return store->renew(std::move(k), std::move(o), n, t, to);
  }
  asio::awaitable<baton::release_reply> release(std::string k, std::string o, std::uint64_t n,
                                                milliseconds to) override {
    return store->release(std::move(k), std::move(o), n, to);
  }
  asio::awaitable<baton::get_reply> get(std::string k, std::optional<baton::wait_for_change> w,
                                        milliseconds to) override {
    return store->get(std::move(k), w, to);
  }
  void close() override {}
};
}  // namespace

BOOST_AUTO_TEST_CASE(a_backend_of_five_calls_answers_proclaim_unsupported_and_forwarding_forwards_it) {
  asio::io_context ioc;
  auto server = std::make_shared<memory_backend>(ioc.get_executor());
  five_calls narrow(server);
  baton::forwarding_backend forwarding(server);
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto a = co_await narrow.acquire("k", "a", 10'000ms, "v1", timeout);
    BOOST_REQUIRE(!a.ec);
    auto refused = co_await narrow.proclaim("k", "a", a.token, "v2", timeout);
    BOOST_TEST(refused.ec == error::invalid_config);
    BOOST_TEST(refused.diagnostic.find("does not support proclaim") != std::string::npos);
    BOOST_TEST(server->holder("k")->value == "v1");  // nothing was sent
    BOOST_TEST(server->calls().proclaim == 0);
    auto forwarded = co_await forwarding.proclaim("k", "a", a.token, "v3", timeout);
    BOOST_TEST(!forwarded.ec);
    BOOST_TEST(server->holder("k")->value == "v3");
    // The lock's record, the same way: unsupported by default with nothing sent, forwarded as it is.
    auto no_write = co_await narrow.write_record("k", "a", a.token, "r", timeout);
    BOOST_TEST(no_write.ec == error::invalid_config);
    BOOST_TEST(no_write.diagnostic.find("does not keep lock records") != std::string::npos);
    auto no_read = co_await narrow.read_record("k", timeout);
    BOOST_TEST(no_read.ec == error::invalid_config);
    BOOST_TEST(server->calls().write_record == 0);
    BOOST_TEST(server->calls().read_record == 0);
    auto written = co_await forwarding.write_record("k", "a", a.token, "r", timeout);
    BOOST_TEST(!written.ec);
    BOOST_TEST(written.version == 1u);
    auto read = co_await forwarding.read_record("k", timeout);
    BOOST_REQUIRE(read.record.has_value());
    BOOST_TEST(read.record->value == "r");
  }());
}

// The lock's record (docs/protocol.md, "record") in the test double: kept beyond the lease, replaced only by
// the live holder (renew's reasons in renew's order), never with a smaller token, and no renewal.
BOOST_AUTO_TEST_CASE(memory_backend_keeps_a_record_beyond_the_lease_for_its_live_holder_only) {
  asio::io_context ioc;
  auto server = std::make_shared<memory_backend>(ioc.get_executor());
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    BOOST_TEST(!(co_await server->read_record("jobs", timeout)).record.has_value());
    auto lost = [&](const baton::record_write_reply& r, const char* reason) {
      BOOST_TEST(r.ec == error::lease_lost);
      BOOST_TEST(r.lost_reason == reason);
    };
    lost(co_await server->write_record("jobs", "a", 1, "x", timeout), "not_held");
    auto a = co_await server->acquire("jobs", "a", 10'000ms, "addr", timeout);
    server->advance(4s);
    auto w = co_await server->write_record("jobs", "a", a.token, "{\"slot\":1}", timeout);
    BOOST_TEST(!w.ec);
    BOOST_TEST(w.version == 1u);
    BOOST_TEST(server->holder("jobs")->ttl_remaining.count() == 6'000);  // not a renew
    BOOST_TEST(server->holder("jobs")->value == "addr");                 // nor a proclaim
    lost(co_await server->write_record("jobs", "b", a.token, "x", timeout), "owner_mismatch");
    lost(co_await server->write_record("jobs", "a", a.token + 1, "x", timeout), "token_mismatch");
    server->advance(6s);  // the lease ends: its holder is refused, nobody else has written
    lost(co_await server->write_record("jobs", "a", a.token, "late", timeout), "not_held");
    auto r = co_await server->read_record("jobs", timeout);
    BOOST_REQUIRE(r.record.has_value());
    BOOST_TEST(r.record->value == "{\"slot\":1}");
    BOOST_TEST(r.record->token == a.token);
    BOOST_TEST(r.record->version == 1u);
    BOOST_TEST(r.record->owner == "a");
    auto b = co_await server->acquire("jobs", "b", 10'000ms, "", timeout);
    BOOST_TEST((co_await server->write_record("jobs", "b", b.token, "b", timeout)).version == 2u);
    BOOST_TEST(server->record("jobs")->token == b.token);
  }());
}

// The public API over the same double: lease::async_write_record, client::async_read_record, their errors
// through the handler.
BOOST_AUTO_TEST_CASE(a_lease_writes_the_record_and_any_client_reads_it) {
  asio::io_context ioc;
  auto server = std::make_shared<memory_backend>(ioc.get_executor());
  baton::client_config cfg;
  cfg.request_timeout = 1000ms;
  cfg.retry.initial_backoff = 10ms;
  cfg.retry.max_backoff = 20ms;
  baton::client c(ioc.get_executor(), cfg, server);
  baton::client reader(ioc.get_executor(), cfg, server);
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    BOOST_TEST(!(co_await reader.async_read_record("jobs")).has_value());
    baton::lease l = co_await c.async_acquire("jobs", baton::test::lease_opts(30'000ms));
    BOOST_TEST(co_await l.async_write_record("state-1") == 1u);
    BOOST_TEST(co_await l.async_write_record("state-2") == 2u);
    auto rec = co_await reader.async_read_record("jobs");
    BOOST_REQUIRE(rec.has_value());
    BOOST_TEST(rec->value == "state-2");
    BOOST_TEST(rec->token == l.token());
    BOOST_TEST(rec->owner == l.owner());
    // A transport error is retried while the lease lasts; the write lands once.
    server->fail_next(1, make_error_code(error::connection_failed));
    BOOST_TEST(co_await l.async_write_record("state-3") == 3u);
    // The server ended the lease: lease_lost through the handler, nothing written.
    server->expire("jobs");
    auto [ec, version] = co_await l.async_write_record("late", asio::as_tuple(asio::use_awaitable));
    BOOST_TEST((ec == error::lease_lost), ec.message());
    BOOST_TEST(version == 0u);
    BOOST_TEST(server->record("jobs")->value == "state-3");
    co_await l.async_release(asio::as_tuple(asio::use_awaitable));
    auto [ec2, v2] = co_await l.async_write_record("after", asio::as_tuple(asio::use_awaitable));
    BOOST_TEST((ec2 == error::invalid_config || ec2 == error::lease_lost), ec2.message());
    baton::lease empty;
    auto [ec3, v3] = co_await empty.async_write_record("x", asio::as_tuple(asio::use_awaitable));
    BOOST_TEST((ec3 == error::empty_handle));
    BOOST_TEST(server->record("jobs")->version == 3u);
  }());
}
