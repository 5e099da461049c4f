// SPDX-License-Identifier: Apache-2.0
// A long job under a lease: runs its steps inside baton::with_lease, so the moment the lease is lost the
// job is cancelled — before the server can give the lock to anyone else — and stops.
// Usage: baton-example-long-job [--server URL] [--key K] [--ttl-ms N] [--steps N] [--step-ms N]
// Exit: 0 finished and released; 3 lease lost (job stopped); 1 other error.

#include "../common/flags.hpp"

#include <baton/client.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

namespace {

double since(clock_type::time_point t) {
  return std::chrono::duration<double>(clock_type::now() - t).count();
}

// The job: `steps` batches of work; each batch carries the fencing token downstream.
asio::awaitable<int> job(const baton::lease& l, int steps, std::chrono::milliseconds step,
                         clock_type::time_point t0) {
  for (int i = 1; i <= steps; ++i) {
    asio::steady_timer t(co_await asio::this_coro::executor, step);
    co_await t.async_wait(asio::use_awaitable);  // cancelled here when the lease is lost
    std::printf("  [%6.3f s] step %d/%d done with token %llu\n", since(t0), i, steps,
                static_cast<unsigned long long>(l.token()));
    std::fflush(stdout);
  }
  co_return steps;
}

}  // namespace

int main(int argc, char** argv) {
  std::string server = "http://127.0.0.1:7070", key = "long-job";
  long ttl_ms = 2000, steps = 10, step_ms = 200;
  if (auto exit_status = baton::examples::parse_flags(
          argc, argv,
          "baton-example-long-job [--server URL] [--key K] [--ttl-ms N] [--steps N] [--step-ms N]",
          {{"--server", server, "the lock server's URL"},
           {"--key", key, "the lock the job runs under"},
           {"--ttl-ms", ttl_ms, "the lease's TTL"},
           {"--steps", steps, "how many steps the job has"},
           {"--step-ms", step_ms, "how long each step takes"}}))
    return *exit_status;
  asio::io_context ioc;
  baton::client_config cfg;
  cfg.server_url = server;
  baton::client c(ioc.get_executor(), cfg);
  baton::lease_options opts;
  opts.ttl = std::chrono::milliseconds(ttl_ms);
  opts.safety_margin = opts.ttl / 4;
  int status = 1;
  asio::co_spawn(
      ioc,
      [&]() -> asio::awaitable<void> {
        auto t0 = clock_type::now();
        auto l = co_await c.async_acquire(key, opts);
        std::printf("long-job: acquired %s with token %llu (ttl %ld ms)\n", key.c_str(),
                    static_cast<unsigned long long>(l.token()), ttl_ms);
        std::fflush(stdout);
        try {
          int done = co_await baton::with_lease(
              l, job(l, static_cast<int>(steps), std::chrono::milliseconds(step_ms), t0));
          co_await l.async_release();
          std::printf("long-job: finished %d steps and released the lock\n", done);
          status = 0;
        } catch (const baton::exception& e) {
          if (e.code() != baton::error::lease_lost) throw;
          // The local deadline is (last renew sent) + ttl - safety_margin; the server's expiry is no earlier
          // than (last renew sent) + ttl, i.e. the deadline plus the margin.
          auto server_expiry_floor = l.deadline() + opts.safety_margin;
          auto margin =
              std::chrono::duration<double>(server_expiry_floor - baton::lease_clock::now()).count();
          std::printf(
              "long-job: [%6.3f s] lease lost (%s): job cancelled and stopped, %.3f s before the "
              "server could expire the lease\n",
              since(t0), l.loss_reason().c_str(), margin);
          status = 3;
        }
      },
      [&](std::exception_ptr e) {
        try {
          if (e) std::rethrow_exception(e);
        } catch (const std::exception& ex) {
          std::fprintf(stderr, "long-job: %s\n", ex.what());
          status = 1;
        }
      });
  ioc.run();
  return status;
}
