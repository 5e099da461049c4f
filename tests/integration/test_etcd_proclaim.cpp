// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE etcd_proclaim
#include <boost/test/unit_test.hpp>

// backend::proclaim through the etcd backend against a real etcd (one member on loopback), as etcd's
// Election.Proclaim does it: a put of the new entry under the key's own etcd lease, conditional on the key
// being this lease's; the token (the key's create_revision) and the lease, so its expiry, stay. The loss
// watch does not take the holder's own proclaim for a loss, and the value survives a restart of etcd.

#include "batond_fixture.hpp"
#include "coro.hpp"
#include "etcd_cluster.hpp"

#include "baton/backend.hpp"
#include "baton/error.hpp"

#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/beast/core/detail/base64.hpp>

#include <string>

using namespace baton;
using namespace baton::test;
using namespace std::chrono_literals;
using namespace boost::asio::experimental::awaitable_operators;
namespace asio = boost::asio;

namespace {

client_config config(const std::string& url) {
  client_config c;
  c.server_url = url;
  c.identity = "etcd-proclaim";
  c.request_timeout = 2000ms;
  return c;
}

std::string b64(const std::string& s) {
  std::string out(boost::beast::detail::base64::encoded_size(s.size()), '\0');
  out.resize(boost::beast::detail::base64::encode(out.data(), s.data(), s.size()));
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_proclaim_on_etcd_replaces_the_value_keeps_token_and_lease_and_is_refused_as_renew) {
  etcd_cluster etcd(1);
  asio::io_context ioc;
  auto b = make_backend(ioc.get_executor(), config(etcd.url()));
  auto observer = make_backend(ioc.get_executor(), config(etcd.url()));
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto lost = [](const proclaim_reply& r, const char* reason) {
      BOOST_TEST(r.ec == error::lease_lost, r.ec.message() << " " << r.diagnostic);
      BOOST_TEST(r.lost_reason == reason);
    };
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
    BOOST_TEST(raw.post("/v3/kv/put",
                        R"({"key":")" + b64("baton/locks/leader") + R"(","value":")" + b64("a") + R"("})")
                   .status == 200);
    for (int i = 0; i < 50 && !lost; ++i)
      co_await sleep_for(100ms);
    BOOST_TEST(lost);
    watch.reset();
  }());
}
