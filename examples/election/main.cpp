// SPDX-License-Identifier: Apache-2.0
// Leader election with baton::election: each instance publishes its address as the value of its campaign,
// follows whoever leads (observe()'s stream, on the server's long-poll), leads for a while once elected, then
// resigns so the next candidate takes over at once. Usage: baton-example-election [--server URL] [--key K]
// [--address A] [--lead-ms N] Output, one line per event: "leader <address> token <T>" for each leader seen
// (or "no leader"), "elected token <T>" and "resigned". Exit: 0 after resigning; 3 leadership lost before
// that; 1 other error.

#include "../common/flags.hpp"

#include <baton/client.hpp>
#include <baton/election.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <cstdio>
#include <optional>
#include <string>

namespace asio = boost::asio;

namespace {

void print_leader(const std::optional<baton::leader_info>& l) {
  if (l)
    std::printf("leader %s token %llu\n", l->value.c_str(), static_cast<unsigned long long>(l->token));
  else
    std::printf("no leader\n");
  std::fflush(stdout);
}

// Follows the election until cancelled: each change of leader is one long-poll answer, not a poll.
asio::awaitable<void> follow(baton::election& e) {
  baton::leader_stream leaders = e.observe();
  for (;;)
    print_leader(co_await leaders.async_next());  // the leader now, then at each change
}

// The leader's work: here, waiting `lead`; cancelled by with_lease if the leadership is lost first.
asio::awaitable<void> lead(std::chrono::milliseconds lead_for) {
  asio::steady_timer t(co_await asio::this_coro::executor, lead_for);
  co_await t.async_wait(asio::use_awaitable);
}

}  // namespace

int main(int argc, char** argv) {
  std::string server = "http://127.0.0.1:7070", key = "services/example", address = "127.0.0.1:8080";
  long lead_ms = 2000;
  if (auto exit_status = baton::examples::parse_flags(
          argc, argv, "baton-example-election [--server URL] [--key K] [--address A] [--lead-ms N]",
          {{"--server", server, "the lock server's URL"},
           {"--key", key, "the election's key"},
           {"--address", address, "the address this candidate publishes while it leads"},
           {"--lead-ms", lead_ms, "how long to lead once elected, then resign"}}))
    return *exit_status;
  asio::io_context ioc;
  baton::client_config cfg;
  cfg.server_url = server;
  baton::client c(ioc.get_executor(), cfg);
  baton::election e(c, key);
  int status = 1;
  // Outlives both coroutines: the follower is bound to it until it has ended.
  asio::cancellation_signal stop_following;
  asio::co_spawn(ioc, follow(e), asio::bind_cancellation_slot(stop_following.slot(), asio::detached));
  asio::co_spawn(
      ioc,
      [&]() -> asio::awaitable<void> {
        baton::lease_options options;
        options.ttl = std::chrono::milliseconds(3000);
        baton::lease l = co_await e.async_campaign(address, options);
        std::printf("elected token %llu\n", static_cast<unsigned long long>(l.token()));
        std::fflush(stdout);
        try {
          co_await baton::with_lease(l, lead(std::chrono::milliseconds(lead_ms)));
          co_await e.async_resign();
          std::printf("resigned\n");
          std::fflush(stdout);
          status = 0;
        } catch (const baton::exception& ex) {
          if (ex.code() != baton::error::lease_lost) throw;
          std::printf("leadership lost: %s\n", l.loss_reason().c_str());
          std::fflush(stdout);
          status = 3;
        }
      },
      [&](std::exception_ptr ex) {
        stop_following.emit(asio::cancellation_type::terminal);
        try {
          if (ex) std::rethrow_exception(ex);
        } catch (const std::exception& what) {
          std::fprintf(stderr, "election: %s\n", what.what());
          status = 1;
        }
      });
  ioc.run();
  return status;
}
