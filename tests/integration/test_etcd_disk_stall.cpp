// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE etcd_disk_stall
#include <boost/test/unit_test.hpp>

// etcd's own lease bug, reproduced (issue 24, defect 2): on etcd 3.4 before 3.4.31 (Debian 12 ships 3.4.23)
// a leader whose disk stalls for longer than a TTL revokes, once the stall ends, leases that clients kept
// alive through the other members meanwhile (etcd issues 12528 and 15247). The stall is real: strace delays
// every fsync and fdatasync of the leader (etcd is a Go binary, LD_PRELOAD does not reach its system calls)
// while a writer gives it WAL entries to sync. The SDK cannot stop the revocation; its key watch makes the
// first holder lose the lease within milliseconds of it, where before it went on until its next renew (up to
// 3.6 s here) while a second client held the key. Long (a three-member cluster, an 8 s stall): Debug pass
// only.

#include "coro.hpp"
#include "etcd_cluster.hpp"
#include "http_client.hpp"
#include "lease_opts.hpp"

#include "baton/client.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>

#include <signal.h>

#include <atomic>
#include <thread>

using namespace baton;
using namespace baton::test;
using namespace std::chrono_literals;
namespace asio = boost::asio;
using clock_type = std::chrono::steady_clock;

BOOST_AUTO_TEST_CASE(a_lease_etcd_revokes_after_its_leaders_disk_stall_is_lost_as_the_next_holder_gets_it) {
  etcd_cluster cluster;
  const std::size_t leader = cluster.leader();
  // The clients talk to the followers: the stalled leader is the last member they would try.
  std::string url = "etcd://";
  for (std::size_t k = 1; k <= cluster.size(); ++k)
    url += (k > 1 ? ",127.0.0.1:" : "127.0.0.1:") +
           std::to_string(cluster.client_port((leader + k) % cluster.size()));
  client_config cfg;
  cfg.server_url = url;
  cfg.identity = "etcd-stall-test";
  cfg.request_timeout = 2000ms;
  asio::io_context ioc;
  client holder(ioc.get_executor(), cfg);
  client next(ioc.get_executor(), cfg);

  // Writes for the leader to sync, every 100 ms, through a follower.
  std::atomic<bool> writing{true};
  std::thread writer([&] {
    const unsigned short port = cluster.client_port((leader + 1) % cluster.size());
    for (int n = 0; writing; ++n) {
      try {
        http_client(port, 1000ms).post("/v3/kv/put", R"({"key":"c3RhbGwvdw==","value":"eA=="})");
      } catch (const std::exception&) {
        // no answer during the stall or the election: the next write
      }
      std::this_thread::sleep_for(100ms);
    }
  });

  std::optional<clock_type::time_point> lost_at, granted_at;
  std::string reason;
  run_coro(
      ioc,
      [&]() -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        // TTL 5 s, renewed every 3 s (2.4-3.6 s): a loss found by a renew comes seconds late.
        auto l = co_await holder.async_acquire("stalled", lease_opts(5000ms, 3000ms));
        asio::co_spawn(
            ex,
            [&]() -> asio::awaitable<void> {
              co_await l.async_wait_lost();
              lost_at = clock_type::now();
              reason = l.loss_reason();
            },
            asio::detached);
        std::optional<lease> second;
        asio::co_spawn(
            ex,
            [&]() -> asio::awaitable<void> {
              try {
                second.emplace(co_await next.async_acquire("stalled", lease_opts(30000ms), 40000ms));
                granted_at = clock_type::now();
              } catch (const std::exception& e) {
                BOOST_TEST_MESSAGE("the second client did not get the key: " << e.what());
              }
            },
            asio::detached);
        co_await sleep_for(1000ms);
        temp_dir scratch;
        {
          child_process stall({"/usr/bin/strace", "-f", "-qq", "-p", std::to_string(cluster.pid(leader)),
                               "-e", "trace=fsync,fdatasync", "-e",
                               "inject=fsync,fdatasync:delay_enter=60000000", "-o", "/dev/null"},
                              (scratch.path() / "strace.log").string());
          co_await sleep_for(8000ms);  // longer than the TTL
          stall.signal(SIGTERM);       // strace lets go of the leader: the stall ends
          stall.wait(30s);
        }
        for (int i = 0; i < 400 && !(granted_at && lost_at); ++i)
          co_await sleep_for(50ms);
        if (second) co_await second->async_release();
        if (l.active()) co_await l.async_release();
      }(),
      120s);
  writing = false;
  writer.join();

  BOOST_TEST_MESSAGE("first holder " << (lost_at ? "lost its lease (" + reason + ")" : "kept its lease")
                                     << "; second client " << (granted_at ? "got the key" : "did not"));
  // Whatever etcd did, the first holder never counts the lease held long after another was granted the key.
  if (granted_at) {
    BOOST_REQUIRE(lost_at.has_value());
    const double overlap = std::chrono::duration<double>(*lost_at - *granted_at).count();
    BOOST_TEST_MESSAGE("first holder's loss came " << overlap * 1000 << " ms after the second grant");
    // The watch sees the revocation's delete as the second client's waiter does, before that client's
    // acquire txn: a few milliseconds before the grant on an idle machine. A renew would find it up to 3.6 s
    // late; a loss that came after the grant came from the watch, or it came too late.
    BOOST_TEST(overlap < 0.2);
    BOOST_TEST((overlap <= 0 || reason.find("seen by the key watch") != std::string::npos), reason);
  }
}
