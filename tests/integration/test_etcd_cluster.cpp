// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE etcd_cluster
#include <boost/test/unit_test.hpp>

// The SDK, `baton exec` and baton-agent against a real three-member etcd cluster on loopback, with every
// member named in the URL: the lease scenarios, a leader member killed mid-run, a whole-cluster restart.

#include "batond_fixture.hpp"
#include "coro.hpp"
#include "etcd_client_config.hpp"
#include "etcd_cluster.hpp"
#include "fault_proxy.hpp"
#include "lease_opts.hpp"

#include "baton/client.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <signal.h>

#include <fstream>
#include <sstream>
#include <thread>

using namespace baton;
using namespace baton::test;
using namespace std::chrono_literals;
namespace asio = boost::asio;
using clock_type = std::chrono::steady_clock;

namespace {

// Exit status of `baton exec` when the lease ends before the command (docs/cli.md).
constexpr int exit_lease_lost = 76;

// One cluster for the scenarios that leave it as they found it (each uses its own keys); the tests that stop
// members start their own.
etcd_cluster& shared_cluster() {
  static etcd_cluster cluster;
  return cluster;
}

client_config config(const std::string& url) {
  return etcd_client_config(url, "etcd-cluster-test");
}

double seconds_since(clock_type::time_point t) {
  return std::chrono::duration<double>(clock_type::now() - t).count();
}

// The key's create_revision as etcd itself reports it (0 when absent), read from any member that answers.
std::uint64_t stored_token(const etcd_cluster& cluster, const std::string& key) {
  for (std::size_t i = 0; i < cluster.size(); ++i) {
    if (!cluster.running(i) || cluster.paused(i)) continue;
    try {
      auto r = http_client(cluster.client_port(i), 5s)
                   .post("/v3/kv/range", R"({"key":")" + etcd_b64("baton/locks/" + key) + R"("})");
      if (r.status != 200) continue;
      auto* kvs = r.json.as_object().if_contains("kvs");
      if (!kvs) return 0;
      return std::stoull(std::string(kvs->as_array().at(0).at("create_revision").as_string()));
    } catch (const std::exception&) {
      // this member is down or has no leader right now: ask the next one
    }
  }
  throw std::runtime_error("no etcd member answered");
}

// etcd://proxy,proxy,proxy: one fault proxy in front of each member, so a test can cut one client off.
struct proxied_members {
  std::vector<std::unique_ptr<fault_proxy>> proxies;
  explicit proxied_members(const etcd_cluster& cluster) {
    for (std::size_t i = 0; i < cluster.size(); ++i)
      proxies.push_back(std::make_unique<fault_proxy>(cluster.client_port(i)));
  }
  std::string url() const {
    std::string out = "etcd://";
    for (std::size_t i = 0; i < proxies.size(); ++i)
      out += (i ? ",127.0.0.1:" : "127.0.0.1:") + std::to_string(proxies[i]->port());
    return out;
  }
  void partition(bool on) {
    for (auto& p : proxies)
      p->set_blackhole(on);
  }
};

template <class Pred>
bool eventually(Pred pred, std::chrono::seconds bound = 30s) {
  const auto until = clock_type::now() + bound;
  while (clock_type::now() < until) {
    if (pred()) return true;
    std::this_thread::sleep_for(50ms);
  }
  return pred();
}

std::string read_all(const std::filesystem::path& p) {
  std::ifstream in(p);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace

// ---- The SDK lease scenarios, through the etcd backend

BOOST_AUTO_TEST_CASE(renewal_keeps_an_etcd_lease_past_several_ttls) {
  auto& cluster = shared_cluster();
  asio::io_context ioc;
  client a(ioc.get_executor(), config(cluster.url()));
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto l = co_await a.async_acquire("renewed", lease_opts(2000ms, 400ms));
    BOOST_TEST(stored_token(cluster, "renewed") == l.token());
    co_await sleep_for(6000ms);  // three TTLs: only the keepalives hold it
    BOOST_TEST(l.active());
    BOOST_TEST(a.stats().renews >= 5u);
    BOOST_TEST(stored_token(cluster, "renewed") == l.token());
    BOOST_TEST((co_await l.async_release() == release_outcome::released));
    BOOST_TEST(stored_token(cluster, "renewed") == 0u);
  }());
}

BOOST_AUTO_TEST_CASE(a_waiter_takes_over_promptly_when_the_holder_releases) {
  auto& cluster = shared_cluster();
  asio::io_context ioc;
  client a(ioc.get_executor(), config(cluster.url()));
  client b(ioc.get_executor(), config(cluster.url()));
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto first = co_await a.async_acquire("handover", lease_opts(30000ms));
    std::optional<lease> second;
    clock_type::time_point got_at;
    asio::co_spawn(
        co_await asio::this_coro::executor,
        [&]() -> asio::awaitable<void> {
          second.emplace(co_await b.async_acquire("handover", lease_opts(30000ms)));
          got_at = clock_type::now();
        },
        asio::detached);
    co_await sleep_for(1000ms);  // the waiter is parked on the key by now
    BOOST_TEST(!second.has_value());
    const auto released_at = clock_type::now();
    BOOST_TEST((co_await first.async_release() == release_outcome::released));
    for (int i = 0; i < 600 && !second; ++i)
      co_await sleep_for(50ms);
    BOOST_REQUIRE(second.has_value());
    const double delay = std::chrono::duration<double>(got_at - released_at).count();
    BOOST_TEST_MESSAGE("etcd handover: waiter acquired " << delay * 1000 << " ms after the release");
    // The wait wakes within 500 ms of a release on an idle machine (watch, or one 100 ms poll plus round
    // trips); 5x that, and far below the 30 s TTL.
    BOOST_TEST(delay < 2.5);
    BOOST_TEST(second->token() > first.token());
    co_await second->async_release();
  }());
}

BOOST_AUTO_TEST_CASE(a_waiter_watches_the_key_instead_of_polling_it) {
  auto& cluster = shared_cluster();
  proxied_members proxies(cluster);
  asio::io_context ioc;
  client a(ioc.get_executor(), config(cluster.url()));
  const auto b = make_backend(ioc.get_executor(), config(proxies.url()));
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto held = co_await a.async_acquire("watched", lease_opts(30000ms));
    const auto started = clock_type::now();
    const wait_for_change unchanged{held.token(), 3000ms};
    auto r = co_await b->get("watched", unchanged, 10000ms);
    const double waited = seconds_since(started);
    std::size_t requests = 0;
    for (auto& p : proxies.proxies)
      requests += p->requests_forwarded();
    BOOST_TEST_MESSAGE("3 s wait on a held etcd key: " << requests << " requests, " << waited << " s");
    BOOST_TEST(!r.ec);
    BOOST_REQUIRE(r.holder.has_value());
    BOOST_TEST(r.holder->token == held.token());
    BOOST_TEST(waited >= 3.0 - 0.01);  // nothing changed: the whole wait
    BOOST_TEST(waited < 15.0);         // and bounded by it
    // The version probe, two reads (each with the lease's TTL) and the watch: 100 ms polling would make ~60.
    BOOST_TEST(requests <= 12u);
    co_await held.async_release();
  }());
}

BOOST_AUTO_TEST_CASE(a_waiter_whose_watch_cannot_connect_falls_back_to_polling_and_still_wakes) {
  auto& cluster = shared_cluster();
  proxied_members proxies(cluster);
  asio::io_context ioc;
  client a(ioc.get_executor(), config(cluster.url()));
  const auto b = make_backend(ioc.get_executor(), config(proxies.url()));
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto held = co_await a.async_acquire("unwatched", lease_opts(30000ms));
    // Warm b's pooled connection, then refuse every new one: reads still pass, each watch is reset.
    BOOST_REQUIRE((co_await b->get("unwatched", std::nullopt, 5000ms)).holder.has_value());
    for (auto& p : proxies.proxies)
      p->set_refuse(true);
    std::optional<get_reply> woke;
    clock_type::time_point woke_at;
    asio::co_spawn(
        co_await asio::this_coro::executor,
        [&]() -> asio::awaitable<void> {
          const wait_for_change unchanged{held.token(), 20000ms};
          woke.emplace(co_await b->get("unwatched", unchanged, 30000ms));
          woke_at = clock_type::now();
        },
        asio::detached);
    co_await sleep_for(1000ms);
    BOOST_TEST(!woke.has_value());
    const auto released_at = clock_type::now();
    co_await held.async_release();
    for (int i = 0; i < 600 && !woke; ++i)
      co_await sleep_for(50ms);
    BOOST_REQUIRE(woke.has_value());
    const double delay = std::chrono::duration<double>(woke_at - released_at).count();
    std::size_t refused = 0, requests = 0;
    for (auto& p : proxies.proxies) {
      refused += p->connections_refused();
      requests += p->requests_forwarded();
    }
    BOOST_TEST_MESSAGE("watch refused " << refused << " times; polling woke the waiter " << delay * 1000
                                        << " ms after the release (" << requests << " requests)");
    BOOST_TEST(!woke->ec);
    BOOST_TEST(!woke->holder.has_value());
    BOOST_TEST(refused >= 1u);    // the watch was tried
    BOOST_TEST(requests >= 12u);  // and the key was polled instead (a watch would need about 7)
    // One 100 ms poll period plus a read on an idle machine; 5x that, and far below the 20 s wait.
    BOOST_TEST(delay < 2.5);
  }());
}

BOOST_AUTO_TEST_CASE(acquire_with_a_wait_timeout_gives_up_while_an_etcd_lock_is_held) {
  auto& cluster = shared_cluster();
  asio::io_context ioc;
  client a(ioc.get_executor(), config(cluster.url()));
  client b(ioc.get_executor(), config(cluster.url()));
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto held = co_await a.async_acquire("busy", lease_opts(30000ms));
    const auto started = clock_type::now();
    try {
      co_await b.async_acquire("busy", lease_opts(30000ms), 500ms);
      BOOST_FAIL("acquire should have timed out");
    } catch (const exception& e) {
      BOOST_TEST((e.code() == error::wait_timeout));
    }
    BOOST_TEST(seconds_since(started) >= 0.5);
    BOOST_TEST(seconds_since(started) < 10.0);  // the wait is bounded by the caller's timeout
    BOOST_TEST(held.active());
    co_await held.async_release();
  }());
}

BOOST_AUTO_TEST_CASE(partitioned_holder_cancels_its_work_before_etcd_gives_the_key_to_another) {
  auto& cluster = shared_cluster();
  proxied_members proxies(cluster);
  asio::io_context ioc;
  client holder(ioc.get_executor(), config(proxies.url()));
  client other(ioc.get_executor(), config(cluster.url()));
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    // ttl 3 s, renew every 500 ms, local deadline 1 s before etcd can expire the lease.
    auto l = co_await holder.async_acquire("partitioned", lease_opts(3000ms, 500ms, 1000ms));
    proxies.partition(true);
    std::optional<clock_type::time_point> cancelled_at;
    try {
      co_await with_lease(l, [&]() -> asio::awaitable<void> {
        asio::steady_timer t(co_await asio::this_coro::executor, 60s);
        auto [ec] = co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
        if (ec == asio::error::operation_aborted) cancelled_at = clock_type::now();
      }());
      BOOST_FAIL("with_lease should report the loss");
    } catch (const exception& e) {
      BOOST_TEST((e.code() == error::lease_lost));
    }
    BOOST_REQUIRE(cancelled_at.has_value());
    BOOST_TEST((l.state() == lease_state::lost));
    // The work stopped while etcd still kept the lease: nobody else can have the key yet.
    BOOST_TEST(stored_token(cluster, "partitioned") == l.token());
    auto next = co_await other.async_acquire("partitioned", lease_opts(30000ms), 60000ms);
    const auto taken_at = clock_type::now();
    BOOST_TEST((*cancelled_at < taken_at));
    BOOST_TEST(next.token() > l.token());
    proxies.partition(false);
    // The stale holder's release cannot free the new holder's key.
    BOOST_TEST((co_await l.async_release() == release_outcome::not_owner));
    BOOST_TEST(stored_token(cluster, "partitioned") == next.token());
    co_await next.async_release();
  }());
}

BOOST_AUTO_TEST_CASE(an_owner_that_vanishes_is_replaced_after_expiry_with_a_larger_token) {
  auto& cluster = shared_cluster();
  asio::io_context ioc;
  client a(ioc.get_executor(), config(cluster.url()));
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    // An acquisition nobody renews: a holder that crashed right after it got the key.
    const auto raw = make_backend(ioc.get_executor(), config(cluster.url()));
    auto ghost = co_await raw->acquire("vanished", "ghost#1", 2000ms, {}, 5000ms);
    BOOST_REQUIRE(!ghost.ec);
    const auto started = clock_type::now();
    auto next = co_await a.async_acquire("vanished", lease_opts(10000ms), 60000ms);
    BOOST_TEST_MESSAGE("etcd expiry takeover after " << seconds_since(started) << " s (TTL 2 s)");
    BOOST_TEST(seconds_since(started) >= 1.0);  // not before etcd expired the ghost's lease
    BOOST_TEST(next.token() > ghost.token);
    co_await next.async_release();
  }());
}

BOOST_AUTO_TEST_CASE(clients_spelling_the_prefix_with_and_without_its_slash_exclude_each_other) {
  auto& cluster = shared_cluster();
  asio::io_context ioc;
  // Before, `/baton/locks` stored the key as `baton/locksspelled`, beside the others' `baton/locks/spelled`.
  client bare(ioc.get_executor(), config(cluster.url() + "/baton/locks"));
  client slashed(ioc.get_executor(), config(cluster.url() + "/baton/locks/"));
  client by_default(ioc.get_executor(), config(cluster.url()));
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto held = co_await bare.async_acquire("spelled", lease_opts(30000ms));
    BOOST_TEST(stored_token(cluster, "spelled") == held.token());
    for (client* other : {&slashed, &by_default}) {
      auto r = co_await other->async_try_acquire("spelled", lease_opts(30000ms));
      BOOST_TEST(!r.acquired.has_value());
      BOOST_TEST(r.holder.token == held.token());
    }
    BOOST_TEST((co_await held.async_release() == release_outcome::released));
    auto next = co_await by_default.async_acquire("spelled", lease_opts(30000ms));
    BOOST_TEST(!(co_await bare.async_try_acquire("spelled", lease_opts(30000ms))).acquired.has_value());
    co_await next.async_release();
  }());
}

// ---- Member failures

// The leader is killed, then restarted while the clients go on: it rejoins as a follower.
BOOST_AUTO_TEST_CASE(killing_the_etcd_leader_mid_run_never_gives_two_holders_and_tokens_keep_increasing) {
  etcd_cluster cluster;
  asio::io_context ioc;
  constexpr int contenders = 4;
  std::vector<std::unique_ptr<client>> clients;
  for (int i = 0; i < contenders; ++i)
    clients.push_back(std::make_unique<client>(ioc.get_executor(), config(cluster.url())));
  std::vector<lease*> holding(contenders, nullptr);
  std::vector<std::uint64_t> grants;  // tokens in the order the grants arrived
  int max_holders = 0, lost_cleanly = 0, released = 0, mismatches = 0, grants_after_kill = 0;
  std::size_t rejoined_at_grant = 0;
  bool stop = false, killed = false;
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    int running = contenders;
    for (int i = 0; i < contenders; ++i)
      asio::co_spawn(
          ex,
          [&, i]() -> asio::awaitable<void> {
            while (!stop) {
              try {
                auto l = co_await clients[i]->async_acquire("contended", lease_opts(3000ms, 500ms), 2000ms);
                grants.push_back(l.token());
                if (killed) ++grants_after_kill;
                holding[i] = &l;
                try {
                  co_await with_lease(l, sleep_for(700ms));
                } catch (const exception& e) {
                  holding[i] = nullptr;
                  // Lost cleanly: reported as lease_lost with a reason, and the lease never becomes active
                  // again.
                  if (e.code() == error::lease_lost && !l.active() && !l.loss_reason().empty())
                    ++lost_cleanly;
                  else
                    BOOST_ERROR("lease ended with " << e.what());
                  continue;
                }
                holding[i] = nullptr;
                // A release that cannot reach the cluster during the election leaves the key to expire.
                if (co_await l.async_release() == release_outcome::released) ++released;
              } catch (const std::exception&) {
                // wait timeout or the cluster unavailable during the election: try again
                holding[i] = nullptr;
              }
            }
            --running;
          },
          asio::detached);
    // The observer: at every look, at most one client holds an active lease, and it is the key's owner.
    asio::co_spawn(
        ex,
        [&]() -> asio::awaitable<void> {
          while (!stop) {
            int holders = 0;
            std::uint64_t token = 0;
            for (auto* l : holding)
              if (l && l->active()) {
                ++holders;
                token = l->token();
              }
            max_holders = std::max(max_holders, holders);
            if (holders == 1) {
              const std::uint64_t stored = stored_token(cluster, "contended");
              // The key may already have moved on if the holder lost it during this read; then it is no
              // longer active.
              for (auto* l : holding)
                if (l && l->active() && l->token() == token && stored != token) ++mismatches;
            }
            co_await sleep_for(20ms);
          }
        },
        asio::detached);
    co_await sleep_for(4000ms);
    const std::size_t before = grants.size();
    const std::size_t leader = cluster.leader();
    BOOST_TEST_MESSAGE("killing etcd leader member " << leader << " after " << before << " grants");
    cluster.kill(leader);
    killed = true;
    co_await sleep_for(6000ms);  // a new election takes a second or two; grants resume after it
    // The old leader comes back on its data and rejoins as a follower while the clients keep going.
    cluster.start(leader);
    for (int i = 0; i < 300; ++i) {
      auto st = cluster.status(leader, 1000ms);
      if (st && st->leader != 0) break;
      co_await sleep_for(100ms);
    }
    const auto rejoined = cluster.status(leader);
    BOOST_TEST((rejoined && rejoined->leader != 0));  // back in the cluster, following a leader
    rejoined_at_grant = grants.size();
    co_await sleep_for(4000ms);
    stop = true;
    for (int i = 0; i < 400 && running > 0; ++i)
      co_await sleep_for(50ms);
    BOOST_TEST(running == 0);
  }());
  BOOST_TEST_MESSAGE(grants.size() << " grants, " << grants_after_kill << " after the kill, " << released
                                   << " released, " << lost_cleanly << " lost cleanly");
  BOOST_TEST(max_holders <= 1);
  BOOST_TEST(mismatches == 0);
  BOOST_TEST(grants_after_kill >= 1);
  BOOST_TEST(grants.size() > rejoined_at_grant);  // and after the old leader rejoined
  for (std::size_t i = 1; i < grants.size(); ++i)
    BOOST_TEST(grants[i] > grants[i - 1], "grant " << i);
  BOOST_TEST(released + lost_cleanly >= 3);
}

// A member that hangs (SIGSTOP: it accepts connections and answers nothing) while the other two keep the
// quorum. Before, a renew that timed out stayed on that member, so every retry until the local deadline hung
// there too and the holder lost its lease; now each member gets a share of the request's budget and the
// renew moves on to the next.
BOOST_AUTO_TEST_CASE(a_paused_etcd_member_does_not_cost_the_holder_its_lease) {
  etcd_cluster cluster;
  const std::size_t paused = (cluster.leader() + 1) % cluster.size();  // a follower: the quorum stays
  // The paused member first in the URL: it is the one the client talks to.
  std::string url = "etcd://127.0.0.1:" + std::to_string(cluster.client_port(paused));
  for (std::size_t i = 0; i < cluster.size(); ++i)
    if (i != paused) url += ",127.0.0.1:" + std::to_string(cluster.client_port(i));
  asio::io_context ioc;
  auto cfg = config(url);  // request_timeout 2 s: about 667 ms per member
  std::vector<std::string> retries;
  cfg.on_event = [&](const lease_event& e) {
    if (e.what == lease_event::kind::renew_retry) retries.emplace_back(e.reason);
  };
  client holder(ioc.get_executor(), cfg);
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    // TTL 4 s, renewed every 1 s; the local deadline is 3.6 s after each renew was sent.
    auto l = co_await holder.async_acquire("paused-member", lease_opts(4000ms, 1000ms));
    const auto renews_before = holder.stats().renews;
    cluster.pause(paused);
    co_await sleep_for(12000ms);  // three TTLs: only renewals through the other members hold it
    const auto renews = holder.stats().renews - renews_before;
    BOOST_TEST_MESSAGE("12 s with the client's member paused: " << renews << " renews, " << retries.size()
                                                                << " retried");
    BOOST_TEST(l.active(), l.loss_reason());
    BOOST_TEST(renews >= 5u);  // about 11: one a second, each at most one member share late
    // A renew that moved on counts from when it was first sent: the deadline is never later than that.
    BOOST_TEST((l.deadline() <= lease_clock::now() + 3600ms));
    BOOST_TEST(stored_token(cluster, "paused-member") == l.token());
    cluster.resume(paused);
    BOOST_TEST((co_await l.async_release() == release_outcome::released));
  }());
}

// The loss watch follows the backend's calls. It opened on the holder's first member; that member is
// paused (its connections stay open and silent), the next renew moves on to another, and a key deleted after
// that must still be a loss at once: the watch moves too, instead of waiting on the paused member until the
// next renew (10 s later) finds the loss.
BOOST_AUTO_TEST_CASE(the_loss_watch_moves_with_the_calls_when_its_member_is_paused) {
  etcd_cluster cluster;
  const std::size_t paused = (cluster.leader() + 1) % cluster.size();  // a follower: the quorum stays
  std::string url = "etcd://127.0.0.1:" + std::to_string(cluster.client_port(paused));
  std::string others = "etcd://";
  for (std::size_t i = 0; i < cluster.size(); ++i)
    if (i != paused) {
      url += ",127.0.0.1:" + std::to_string(cluster.client_port(i));
      others +=
          (others.size() > 7 ? "," : "") + std::string("127.0.0.1:") + std::to_string(cluster.client_port(i));
    }
  asio::io_context ioc;
  client holder(ioc.get_executor(), config(url));  // request_timeout 2 s: about 667 ms per member
  const auto raw = make_backend(ioc.get_executor(), config(others));
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    // TTL 30 s, renewed every 10 s.
    auto l = co_await holder.async_acquire("watch-moves", lease_opts(30000ms, 10000ms));
    const auto renews_before = holder.stats().renews;
    co_await sleep_for(300ms);  // the watch is open on the first member
    cluster.pause(paused);
    // The first renew (about 10 s after the acquire) times out on the paused member and is answered by the
    // next one.
    for (int i = 0; i < 300 && holder.stats().renews == renews_before; ++i)
      co_await sleep_for(50ms);
    BOOST_REQUIRE(holder.stats().renews > renews_before);
    co_await sleep_for(1000ms);  // the watch's move: a look every 250 ms, a reopening 100 ms later
    const auto deleted_at = clock_type::now();
    auto r = co_await raw->release("watch-moves", l.owner(), l.token(), 5000ms);
    BOOST_REQUIRE(!r.ec);
    BOOST_REQUIRE((r.outcome == release_outcome::released));
    while (l.active() && clock_type::now() - deleted_at < 8s)
      co_await sleep_for(20ms);
    const double after = seconds_since(deleted_at);
    BOOST_TEST_MESSAGE("lost " << after * 1000 << " ms after the delete: " << l.loss_reason());
    BOOST_TEST(!l.active());
    BOOST_TEST(after < 2.5);  // the next renew would find it about 8 s later
    cluster.resume(paused);
  }());
}

BOOST_AUTO_TEST_CASE(restarting_the_whole_etcd_cluster_never_makes_tokens_go_back) {
  etcd_cluster cluster;
  asio::io_context ioc;
  client a(ioc.get_executor(), config(cluster.url()));
  std::uint64_t highest_before = 0;
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    for (const char* key : {"restart/a", "restart/b", "restart/a"}) {
      auto l = co_await a.async_acquire(key, lease_opts(10000ms));
      highest_before = std::max(highest_before, l.token());
      co_await l.async_release();
    }
  }());
  cluster.stop_all();
  cluster.start_all();
  // A fresh client: the old one's connections all went with the members.
  asio::io_context ioc2;
  client b(ioc2.get_executor(), config(cluster.url()));
  run_coro(ioc2, [&]() -> asio::awaitable<void> {
    for (const char* key : {"restart/a", "restart/c", "restart/b"}) {
      auto l = co_await b.async_acquire(key, lease_opts(10000ms), 30000ms);
      BOOST_TEST(l.token() > highest_before, key << ": " << l.token() << " after " << highest_before);
      co_await l.async_release();
    }
  }());
}

// ---- baton exec

BOOST_AUTO_TEST_CASE(baton_exec_on_three_etcd_members_gives_the_command_the_keys_create_revision) {
  auto& cluster = shared_cluster();
  temp_dir dir;
  const auto out = dir.path() / "token";
  child_process p(
      {bin_path("baton"), "--server", cluster.url(), "exec", "exec/ok", "--ttl", "5s", "--", "/bin/sh", "-c",
       "echo $BATON_FENCING_TOKEN > " + out.string() + ".tmp && mv " + out.string() + ".tmp " + out.string() +
           " && sleep 1"},
      (dir.path() / "err").string());
  BOOST_REQUIRE(eventually([&] { return std::filesystem::exists(out); }));
  const auto token = std::stoull(read_all(out));
  BOOST_TEST(token == stored_token(cluster, "exec/ok"));  // the token is the key's create_revision
  BOOST_TEST(p.wait(60s) == 0, read_all(dir.path() / "err"));
  BOOST_TEST(stored_token(cluster, "exec/ok") == 0u);  // released when the command ended
}

BOOST_AUTO_TEST_CASE(baton_exec_cut_off_from_etcd_kills_its_command_and_exits_lease_lost) {
  auto& cluster = shared_cluster();
  proxied_members proxies(cluster);
  temp_dir dir;
  const auto pid_file = dir.path() / "pid";
  child_process p({bin_path("baton"), "--server", proxies.url(), "exec", "exec/lost", "--ttl", "2s", "--",
                   "/bin/sh", "-c",
                   "echo $$ > " + pid_file.string() + ".tmp && mv " + pid_file.string() + ".tmp " +
                       pid_file.string() + " && exec sleep 1000"},
                  (dir.path() / "err").string());
  BOOST_REQUIRE(eventually([&] { return std::filesystem::exists(pid_file); }));
  const int command = std::stoi(read_all(pid_file));
  proxies.partition(true);
  const int code = p.wait(60s);
  BOOST_TEST(code == exit_lease_lost, read_all(dir.path() / "err"));
  BOOST_TEST((::kill(command, 0) != 0 && errno == ESRCH));  // the command was killed (and reaped) first
  BOOST_TEST(read_all(dir.path() / "err").find("lost") != std::string::npos);
  proxies.partition(false);
}

// ---- baton-agent

namespace {

struct named_process {
  std::unique_ptr<child_process> proc;
  unsigned short port = 0;
  named_process(std::vector<std::string> argv, const std::string& first_line,
                const std::filesystem::path& log) {
    proc = std::make_unique<child_process>(std::move(argv), log.string());
    auto line = proc->read_line(30s);
    BOOST_REQUIRE_MESSAGE(line.rfind(first_line, 0) == 0, line);
    port = static_cast<unsigned short>(std::stoul(line.substr(line.rfind(':') + 1)));
  }
  // The sidecar's leadership and token, or not leading when it does not answer.
  std::pair<bool, std::uint64_t> leadership() const {
    try {
      auto r = http_client(port, 10s).get("/v1/leader");
      if (r.status == 200 && r.json.at("is_leader").as_bool())
        return {true, r.json.at("token").to_number<std::uint64_t>()};
    } catch (const std::exception&) {
    }
    return {false, 0};
  }
};

}  // namespace

BOOST_AUTO_TEST_CASE(
    agent_on_etcd_fails_over_after_kill9_and_the_new_leaders_job_writes_with_a_larger_token) {
  auto& cluster = shared_cluster();
  temp_dir dir;
  named_process store({bin_path("fenced-store"), "--listen", "127.0.0.1:0"}, "", dir.path() / "store.log");
  const std::string store_url = "http://127.0.0.1:" + std::to_string(store.port);
  const auto cfg = dir.path() / "agent.yaml";
  std::ofstream(cfg)
      << "server: " << cluster.url() << "\nlisten: 127.0.0.1:0\nshutdown_grace: 1s\n"
      << "election:\n  key: agent/leader\n  ttl: 2s\njobs:\n"
      << "  - name: tick\n    schedule: \"*/1 * * * * *\"\n    shell: true\n    command: ['curl -s -o "
         "/dev/null -X PUT -H \"Fencing-Token: $BATON_FENCING_TOKEN\" --data x "
      << store_url << "/items/tick']\n";
  std::vector<std::unique_ptr<named_process>> agents;
  for (int i = 0; i < 2; ++i)
    agents.push_back(std::make_unique<named_process>(
        std::vector<std::string>{bin_path("baton-agent"), "--config", cfg.string(), "--identity",
                                 "node-" + std::to_string(i)},
        "baton-agent listening on ", dir.path() / ("a" + std::to_string(i) + ".log")));
  int leader = -1;
  std::uint64_t first_token = 0;
  BOOST_REQUIRE(eventually([&] {
    for (int i = 0; i < 2; ++i)
      if (auto [lead, token] = agents[i]->leadership(); lead) {
        leader = i;
        first_token = token;
        return true;
      }
    return false;
  }));
  BOOST_TEST(first_token == stored_token(cluster, "agent/leader"));
  http_client store_client(store.port);
  BOOST_REQUIRE(eventually([&] { return store_client.get("/items/tick").status == 200; }));
  const auto killed_at = clock_type::now();
  agents[leader]->proc->signal(SIGKILL);
  agents[leader]->proc->wait(30s);
  auto& standby = *agents[1 - leader];
  std::uint64_t next_token = 0;
  BOOST_REQUIRE(eventually([&] {
    auto [lead, token] = standby.leadership();
    next_token = token;
    return lead;
  }));
  BOOST_TEST_MESSAGE("agent failover on etcd: " << seconds_since(killed_at) << " s (election TTL 2 s)");
  BOOST_TEST(next_token > first_token);
  // The new leader's job reaches the store with its larger token, and the store accepted every write.
  BOOST_TEST(eventually([&] {
    return store_client.get("/history")
               .body.find("\"token\":" + std::to_string(next_token) + ",\"accepted\":true") !=
           std::string::npos;
  }));
  BOOST_TEST(store_client.get("/history").body.find("\"accepted\":false") == std::string::npos);
  standby.proc->signal(SIGTERM);
  BOOST_TEST(standby.proc->wait(30s) == 0);
}
