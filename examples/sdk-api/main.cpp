// SPDX-License-Identifier: Apache-2.0
// The SDK's API beyond the tutorial, runnable without a server: with_lock, the completion-token forms
// (callbacks, use_future, deferred, as_tuple, per-operation cancellation), shutdown, and a unit test's view
// of a lease through baton::testing::memory_backend. docs/sdk.md quotes it. Exits 0 when every step behaved
// as the comments say.

#include "../common/flags.hpp"

#include <baton/client.hpp>
#include <baton/testing.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>

#include <cstdio>
#include <thread>

using namespace std::chrono_literals;
namespace asio = boost::asio;

namespace {

int failures = 0;
void expect(bool ok, const char* what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what);
  if (!ok) ++failures;
}

// 1. with_lock: acquire, run, release on every path.
asio::awaitable<void> scoped(baton::client& c, baton::testing::memory_backend& server) {
  baton::lease_options opts;
  opts.ttl = 30s;
  int rows = co_await c.async_with_lock("jobs/report", opts, [&](baton::lease& l) -> asio::awaitable<int> {
    // ... write with l.token() ...
    co_return static_cast<int>(l.token());
  });
  expect(rows == 1, "with_lock returned the work's result");
  expect(!server.holder("jobs/report"), "with_lock released the lock");
}

// 2. Completion tokens inside a coroutine: deferred and as_tuple (no exceptions).
asio::awaitable<void> tokens(baton::client& c) {
  baton::lease_options opts;
  opts.ttl = 30s;
  auto op = c.async_acquire("jobs/tokens", opts, asio::deferred);  // nothing sent yet
  auto [ec, l] = co_await std::move(op)(asio::as_tuple(asio::use_awaitable));
  expect(!ec && l.active(), "deferred + as_tuple acquired");
  auto [rec, outcome] = co_await l.async_release(asio::as_tuple(asio::use_awaitable));
  expect(!rec && outcome == baton::release_outcome::released, "async_release released");
}

// 3. A unit test's view: the server's clock and faults are the test's.
asio::awaitable<void> test_view(baton::client& c, baton::testing::memory_backend& server) {
  baton::lease_options opts;
  opts.ttl = 30s;
  opts.renew_every = 50ms;  // so the loss is learnt quickly
  baton::lease l = co_await c.async_acquire("jobs/test", opts);
  server.expire("jobs/test");    // as if the TTL had passed on the server
  co_await l.async_wait_lost();  // the next renew is refused
  expect(l.state() == baton::lease_state::lost, "an expired lease is lost at its next renew");
}

}  // namespace

int main(int argc, char** argv) {
  if (auto exit_status =
          baton::examples::parse_flags(argc, argv, "baton-example-api (no flags: it needs no server)", {}))
    return *exit_status;
  asio::io_context ioc;
  auto server = std::make_shared<baton::testing::memory_backend>(ioc.get_executor());
  baton::client_config cfg;
  cfg.identity = "example";
  baton::client c(ioc.get_executor(), cfg, server);

  // Runs one step to its end (held leases keep renewing in the background, so the io_context never runs out
  // of work by itself).
  auto step = [&](asio::awaitable<void> body) {
    bool done = false;
    asio::co_spawn(ioc, std::move(body), [&](std::exception_ptr e) {
      done = true;
      if (e) std::rethrow_exception(e);
    });
    while (!done) {
      ioc.restart();
      ioc.run_one();
    }
  };
  step(scoped(c, *server));
  step(tokens(c));
  step(test_view(c, *server));

  // 4. A callback with per-operation cancellation: an acquire waiting for a held lock, cancelled.
  baton::client other(ioc.get_executor(), cfg, server);
  baton::lease held;
  baton::lease_options opts;
  opts.ttl = 30s;
  step([&]() -> asio::awaitable<void> { held = co_await other.async_acquire("jobs/held", opts); }());
  asio::cancellation_signal cancel;
  boost::system::error_code waited;
  c.async_acquire("jobs/held", opts,
                  asio::bind_cancellation_slot(
                      cancel.slot(), [&](boost::system::error_code ec, baton::lease) { waited = ec; }));
  ioc.restart();
  ioc.run_for(50ms);  // it is waiting on the long-poll now
  cancel.emit(asio::cancellation_type::terminal);
  ioc.restart();
  ioc.run_for(50ms);
  expect(waited == asio::error::operation_aborted,
         "a cancelled async_acquire completes with operation_aborted");

  // 5. use_future from another thread, then shutdown (releases every lease of the client).
  auto work = asio::make_work_guard(ioc);
  ioc.restart();
  std::thread runner([&] { ioc.run(); });
  baton::lease l = c.async_acquire("jobs/future", opts, asio::use_future).get();
  expect(l.active(), "use_future acquired");
  c.async_shutdown(5s, asio::use_future).get();
  expect(l.state() == baton::lease_state::released && !server->holder("jobs/future"), "shutdown released it");
  other.async_shutdown(5s, asio::use_future).get();  // `held` too: then nothing is left to renew
  work.reset();
  runner.join();
  return failures == 0 ? 0 : 1;
}
