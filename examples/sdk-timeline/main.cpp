// SPDX-License-Identifier: Apache-2.0
// The lock's timeline (docs/protocol.md) told with the SDK and a fenced resource:
//   worker-a takes the lock (token N) and writes; worker-a stalls (its event loop does not run, as in a long
//   GC pause) and its lease expires; worker-b takes the lock (token N+1) and writes; worker-a wakes up, its
//   SDK reports the lease lost, and its late write — already on its way — is rejected by the store.
// Usage: baton-example-timeline --server http://127.0.0.1:7070 --store http://127.0.0.1:7080

#include "../common/flags.hpp"
#include "../common/store_client.hpp"

#include <baton/client.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>

#include <chrono>
#include <cstdio>
#include <string>

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

int failures = 0;

void check(bool ok, const char* what) {
  if (!ok) {
    std::printf("    !! unexpected: %s\n", what);
    ++failures;
  }
}

// Runs `body` on `ioc` to completion (the examples' event loops only run when we let them).
template <class F>
void run(asio::io_context& ioc, F body) {
  bool done = false;
  asio::co_spawn(ioc, body(), [&](std::exception_ptr e) {
    done = true;
    if (e) std::rethrow_exception(e);
  });
  while (!done) {
    ioc.restart();
    ioc.run_one();
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string server = "http://127.0.0.1:7070", store = "http://127.0.0.1:7080";
  if (auto exit_status = baton::examples::parse_flags(
          argc, argv, "baton-example-timeline [--server URL] [--store URL]",
          {{"--server", server, "the lock server's URL"}, {"--store", store, "fenced-store's URL"}}))
    return *exit_status;
  const std::string key = "sdk-timeline/report";
  baton::lease_options opts;
  opts.ttl = 1500ms;
  opts.renew_every = 300ms;
  opts.safety_margin = 200ms;

  asio::io_context ioc_a, ioc_b;  // one event loop per worker
  baton::client_config cfg;
  cfg.server_url = server;
  cfg.identity = "worker-a";
  baton::client a(ioc_a.get_executor(), cfg);
  cfg.identity = "worker-b";
  baton::client b(ioc_b.get_executor(), cfg);

  std::optional<baton::lease> lease_a, lease_b;
  std::uint64_t n = 0;

  std::printf("1. worker-a acquires %s\n", key.c_str());
  run(ioc_a, [&]() -> asio::awaitable<void> {
    lease_a.emplace(co_await a.async_acquire(key, opts));
    n = lease_a->token();
    std::printf("   -> token N = %llu, owner %s\n", static_cast<unsigned long long>(n),
                lease_a->owner().c_str());
    auto w = baton::examples::put_item(store, "report", "draft by worker-a", n);
    std::printf("   worker-a writes with token %llu -> HTTP %d %s\n", static_cast<unsigned long long>(n),
                w.status, w.body.c_str());
    check(w.status == 200, "worker-a's first write is accepted");
  });

  std::printf("2. worker-a stalls: its event loop does not run, so its lease is not renewed\n");
  std::printf("3. worker-b acquires and waits (long-poll) until the server expires worker-a's lease\n");
  auto waited_from = std::chrono::steady_clock::now();
  run(ioc_b, [&]() -> asio::awaitable<void> {
    lease_b.emplace(co_await b.async_acquire(key, opts));
    auto waited =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - waited_from);
    std::printf("   -> after %lld ms: token %llu\n", static_cast<long long>(waited.count()),
                static_cast<unsigned long long>(lease_b->token()));
    check(lease_b->token() > n, "worker-b's token is larger");
    auto w = baton::examples::put_item(store, "report", "final by worker-b", lease_b->token());
    std::printf("   worker-b writes with token %llu -> HTTP %d %s\n",
                static_cast<unsigned long long>(lease_b->token()), w.status, w.body.c_str());
    check(w.status == 200, "worker-b's write is accepted");
  });

  std::printf("4. worker-a wakes up\n");
  run(ioc_a, [&]() -> asio::awaitable<void> {
    co_await lease_a
        ->async_wait_lost();  // the renewal task runs, sees the deadline passed, declares the loss
    std::printf("   SDK: lease active=%s, state=lost, reason: %s\n", lease_a->active() ? "true" : "false",
                lease_a->loss_reason().c_str());
    check(!lease_a->active(), "worker-a's SDK reports the lease lost");
    auto w = baton::examples::put_item(store, "report", "stale draft by worker-a", n);
    std::printf("   worker-a's late write with token %llu -> HTTP %d %s\n",
                static_cast<unsigned long long>(n), w.status, w.body.c_str());
    check(w.status == 409, "the store rejects the stale token");
    auto r = co_await lease_a->async_release();
    std::printf("   worker-a's release -> %s\n", r == baton::release_outcome::not_owner ? "not_owner" : "?");
    check(r == baton::release_outcome::not_owner, "a stale holder cannot release the new holder's lock");
  });

  std::printf("5. worker-b finishes and releases\n");
  run(ioc_b, [&]() -> asio::awaitable<void> {
    auto r = co_await lease_b->async_release();
    check(r == baton::release_outcome::released, "worker-b releases its lock");
    std::printf("   -> released\n");
  });

  if (failures) {
    std::printf("sdk-timeline: %d unexpected results\n", failures);
    return 1;
  }
  std::printf("sdk-timeline: the stale write was rejected; the store kept worker-b's value\n");
  return 0;
}
