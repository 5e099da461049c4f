// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE etcd_proclaim
#include <boost/test/unit_test.hpp>

// backend::proclaim through the etcd backend against a real etcd (one member on loopback), as etcd's
// Election.Proclaim does it: a put of the new entry under the key's own etcd lease, conditional on the key
// being this lease's; the token (the key's create_revision) and the lease, so its expiry, stay. The loss
// watch does not take the holder's own proclaim for a loss, and the value survives a restart of etcd.

#include "batond_fixture.hpp"
#include "coro.hpp"
#include "etcd_client_config.hpp"
#include "etcd_cluster.hpp"

#include "baton/backend.hpp"
#include "baton/error.hpp"

#include <boost/asio/experimental/awaitable_operators.hpp>

#include <string>

using namespace baton;
using namespace baton::test;
using namespace std::chrono_literals;
using namespace boost::asio::experimental::awaitable_operators;
namespace asio = boost::asio;

namespace {

client_config config(const std::string& url) {
  return etcd_client_config(url, "etcd-proclaim");
}

// A refusal by the lease, for `reason` (a proclaim's or a record write's reply).
template <class Reply>
void lost(const Reply& r, const char* reason) {
  BOOST_TEST(r.ec == error::lease_lost, r.ec.message() << " " << r.diagnostic);
  BOOST_TEST(r.lost_reason == reason);
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_proclaim_on_etcd_replaces_the_value_keeps_token_and_lease_and_is_refused_as_renew) {
  etcd_cluster etcd(1);
  asio::io_context ioc;
  auto b = make_backend(ioc.get_executor(), config(etcd.url()));
  auto observer = make_backend(ioc.get_executor(), config(etcd.url()));
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    lost(co_await b->proclaim("leader", "a", 1, "x", 5s), "not_held");
    auto a = co_await b->acquire("leader", "a", 4000ms, "10.0.0.1:80", 5s);
    BOOST_REQUIRE(!a.ec);
    bool watch_fired = false;
    std::string watch_reason;
    auto watch = b->watch_loss("leader", "a", a.token, [&](std::string_view why) {
      watch_fired = true;
      watch_reason = why;
    });
    auto p = co_await b->proclaim("leader", "a", a.token, "10.0.0.2:80", 5s);
    BOOST_TEST(!p.ec, p.ec.message() << " " << p.diagnostic);
    auto g = co_await observer->get("leader", std::nullopt, 5s);
    BOOST_REQUIRE(g.holder.has_value());
    BOOST_TEST(g.holder->token == a.token);  // the create_revision is the token: unchanged by the put
    BOOST_TEST(g.holder->owner == "a");
    BOOST_TEST(g.holder->value == "10.0.0.2:80");
    BOOST_TEST(g.holder->ttl_remaining <= 4000ms);  // the same etcd lease: not extended
    auto held = co_await observer->acquire("leader", "b", 4000ms, "10.0.0.9:80", 5s);
    BOOST_TEST(held.ec == error::held);
    BOOST_TEST(held.holder.value == "10.0.0.2:80");
    lost(co_await b->proclaim("leader", "b", a.token, "x", 5s), "owner_mismatch");
    lost(co_await b->proclaim("leader", "a", a.token + 1000, "x", 5s), "token_mismatch");
    // An observer waiting with the value it saw wakes at the next proclaim.
    const wait_for_change seen{a.token, 10'000ms, std::string("10.0.0.2:80")};
    auto watching = observer->get("leader", seen, 15s);
    // Named: the coroutine refers to the lambda, which must outlive it.
    auto proclaim_later = [&]() -> asio::awaitable<proclaim_reply> {
      co_await sleep_for(300ms);
      co_return co_await b->proclaim("leader", "a", a.token, "", 5s);
    };
    auto proclaiming = proclaim_later();
    auto [woken, q] = co_await (std::move(watching) && std::move(proclaiming));
    BOOST_TEST(!q.ec);
    BOOST_REQUIRE(woken.holder.has_value());
    BOOST_TEST(woken.holder->value.empty());
    // The holder's own proclaims are not a loss to its watch, and the lease still renews with its token.
    co_await sleep_for(500ms);
    BOOST_TEST(!watch_fired, watch_reason);
    auto r = co_await b->renew("leader", "a", a.token, 4000ms, 5s);
    BOOST_TEST(!r.ec, r.ec.message() << " " << r.diagnostic);
    // The etcd lease was kept: without renewals the key goes when it ends, value and all.
    co_await sleep_for(6s);
    lost(co_await b->proclaim("leader", "a", a.token, "late", 5s), "not_held");
    BOOST_TEST(!(co_await observer->get("leader", std::nullopt, 5s)).holder.has_value());
    watch.reset();
  }());
}

BOOST_AUTO_TEST_CASE(a_proclaimed_value_on_etcd_survives_a_restart_of_etcd_and_a_foreign_write_is_a_loss) {
  etcd_cluster etcd(1);
  std::uint64_t token = 0;
  {
    asio::io_context ioc;
    auto b = make_backend(ioc.get_executor(), config(etcd.url()));
    run_coro(ioc, [&]() -> asio::awaitable<void> {
      auto a = co_await b->acquire("leader", "a", 120'000ms, "10.0.0.1:80", 5s);
      BOOST_REQUIRE(!a.ec);
      token = a.token;
      auto p = co_await b->proclaim("leader", "a", a.token, "10.0.0.2:80", 5s);
      BOOST_TEST(!p.ec, p.ec.message() << " " << p.diagnostic);
    }());
  }
  etcd.stop(0);
  etcd.start(0);
  etcd.wait_healthy();
  asio::io_context ioc;
  auto b = make_backend(ioc.get_executor(), config(etcd.url()));
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto g = co_await b->get("leader", std::nullopt, 5s);
    BOOST_REQUIRE(g.holder.has_value());
    BOOST_TEST(g.holder->token == token);
    BOOST_TEST(g.holder->value == "10.0.0.2:80");
    bool lost = false;
    auto watch = b->watch_loss("leader", "a", token, [&](std::string_view) { lost = true; });
    co_await sleep_for(300ms);
    // A put without the lease (not a proclaim: it would carry the key's lease) is someone else's write.
    http_client raw(etcd.client_port(0));
    BOOST_TEST(raw.post("/v3/kv/put", R"({"key":")" + etcd_b64("baton/locks/leader") + R"(","value":")" +
                                          etcd_b64("a") + R"("})")
                   .status == 200);
    for (int i = 0; i < 50 && !lost; ++i)
      co_await sleep_for(100ms);
    BOOST_TEST(lost);
    watch.reset();
  }());
}

// The lock's record (docs/protocol.md, "record") on etcd: a key of its own beside the locks' prefix, with no
// lease, written in a txn conditional on the lock key being this lease's (its mod_revision as read) and on
// the record unchanged since the read; version is etcd's own version of the record key. It outlives the
// lease and a restart of etcd; the holder's own write is no loss to its watch.
BOOST_AUTO_TEST_CASE(a_record_on_etcd_is_written_by_the_live_holder_and_outlives_the_lease_and_a_restart) {
  etcd_cluster etcd(1);
  std::uint64_t token = 0;
  {
    asio::io_context ioc;
    auto b = make_backend(ioc.get_executor(), config(etcd.url()));
    auto reader = make_backend(ioc.get_executor(), config(etcd.url()));
    run_coro(ioc, [&]() -> asio::awaitable<void> {
      BOOST_TEST(!(co_await reader->read_record("agent", 5s)).record.has_value());
      lost(co_await b->write_record("agent", "a", 1, "x", 5s), "not_held");
      auto a = co_await b->acquire("agent", "a", 2000ms, "10.0.0.1:80", 5s);
      BOOST_REQUIRE(!a.ec);
      token = a.token;
      bool watch_fired = false;
      auto watch = b->watch_loss("agent", "a", a.token, [&](std::string_view) { watch_fired = true; });
      const std::string state("{\"slot\":1}\n\0tail", 16);  // any bytes, NULs included
      auto w = co_await b->write_record("agent", "a", a.token, state, 5s);
      BOOST_TEST(!w.ec, w.ec.message() << " " << w.diagnostic);
      BOOST_TEST(w.version == 1u);
      BOOST_TEST((co_await b->write_record("agent", "a", a.token, state, 5s)).version == 2u);
      lost(co_await b->write_record("agent", "b", a.token, "x", 5s), "owner_mismatch");
      lost(co_await b->write_record("agent", "a", a.token + 100, "x", 5s), "token_mismatch");
      auto g = co_await reader->get("agent", std::nullopt, 5s);
      BOOST_REQUIRE(g.holder.has_value());
      BOOST_TEST(g.holder->token == a.token);  // the lock key is untouched
      BOOST_TEST(g.holder->value == "10.0.0.1:80");
      auto r = co_await reader->read_record("agent", 5s);
      BOOST_REQUIRE(r.record.has_value());
      BOOST_TEST(r.record->value == state);
      BOOST_TEST(r.record->token == a.token);
      BOOST_TEST(r.record->version == 2u);
      BOOST_TEST(r.record->owner == "a");
      co_await sleep_for(300ms);
      BOOST_TEST(!watch_fired);  // the record is outside the locks' prefix
      watch.reset();
      // The lease ends in etcd (its TTL passes): the holder is refused, the record stays.
      for (int i = 0; i < 60 && (co_await reader->get("agent", std::nullopt, 5s)).holder; ++i)
        co_await sleep_for(100ms);
      lost(co_await b->write_record("agent", "a", a.token, "late", 5s), "not_held");
      // The next holder's write replaces it with its larger token.
      auto next = co_await reader->acquire("agent", "b", 60'000ms, "", 5s);
      BOOST_REQUIRE(!next.ec);
      BOOST_TEST((co_await reader->write_record("agent", "b", next.token, "b's", 5s)).version == 3u);
      token = next.token;
    }());
  }
  etcd.stop(0);
  etcd.start(0);
  etcd.wait_healthy();
  asio::io_context ioc;
  auto b = make_backend(ioc.get_executor(), config(etcd.url()));
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto r = co_await b->read_record("agent", 5s);
    BOOST_REQUIRE(r.record.has_value());
    BOOST_TEST(r.record->value == "b's");
    BOOST_TEST(r.record->token == token);
    BOOST_TEST(r.record->version == 3u);
    BOOST_TEST(r.record->owner == "b");
  }());
}
