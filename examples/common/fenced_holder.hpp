// SPDX-License-Identifier: Apache-2.0
#pragma once
// The lock holder of the fenced-database examples (fenced-sqlite, fenced-postgres): it acquires a Baton
// lease, then deposits into an account with the lease's fencing token, and says whether the database accepted
// each deposit. The store is the only difference between the examples.
//
// Exit: 0 every write accepted (lease released); 3 a write refused by the database (stale token); 4 the lease
// was lost before a write, which was not attempted; 1 other error; 2 usage.

#include "fenced_account.hpp"
#include "flags.hpp"

#include <baton/client.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <signal.h>

#include <chrono>
#include <cstdio>
#include <string>

namespace baton::examples {

/// What differs between the examples: the program's name and its --db flag.
struct holder_program {
  const char* name;      // "fenced-sqlite": the executable is baton-example-<name>, lines start "<name>: "
  const char* db_usage;  // "--db FILE"
  const char* db_help;   // --db's line in --help
  bool db_required;
};

/// Parses the flags and runs the holder with a `Store` opened on --db. Returns the exit status.
template <fenced_account_store Store>
int run_fenced_holder(int argc, char** argv, const holder_program& p) {
  namespace asio = boost::asio;
  std::string db, server = "http://127.0.0.1:7070", key = "accounts", account = "acct-1", name = "writer";
  long amount = 10, writes = 3, write_ms = 100, ttl_ms = 2000, stop_before = 0;
  const std::string usage = std::string("baton-example-") + p.name + " " + (p.db_required ? "" : "[") +
                            p.db_usage + (p.db_required ? "" : "]") +
                            " [--server URL] [--key K] [--account ID] [--name N] [--amount N] [--writes N] "
                            "[--write-ms N] [--ttl-ms N] [--stop-before-write N]";
  if (auto exit_status = parse_flags(
          argc, argv, usage,
          {{"--db", db, p.db_help},
           {"--server", server, "the lock server's URL"},
           {"--key", key, "the lock that guards the account"},
           {"--account", account, "the account to deposit into (created if missing)"},
           {"--name", name, "this writer's name, stored with each deposit"},
           {"--amount", amount, "the amount of each deposit"},
           {"--writes", writes, "how many deposits to make"},
           {"--write-ms", write_ms, "the pause between two deposits"},
           {"--ttl-ms", ttl_ms, "the lease's TTL"},
           {"--stop-before-write", stop_before,
            "stop the process (SIGSTOP) right before this deposit, after checking the lease; 0: never"}}))
    return *exit_status;
  if (p.db_required && db.empty()) {
    std::fprintf(stderr, "%s: --db is required\n", p.name);
    return 2;
  }
  int status = 1;
  try {
    Store store(db);
    store.ensure_account(account);
    asio::io_context ioc;
    baton::client_config cfg;
    cfg.server_url = server;
    baton::client c(ioc.get_executor(), cfg);
    baton::lease_options opts;
    opts.ttl = std::chrono::milliseconds(ttl_ms);
    asio::co_spawn(
        ioc,
        [&]() -> asio::awaitable<void> {
          auto l = co_await c.async_acquire(key, opts);
          const auto token = static_cast<unsigned long long>(l.token());
          std::printf("%s: %s acquired %s with token %llu\n", p.name, name.c_str(), key.c_str(), token);
          std::fflush(stdout);
          for (long i = 1; i <= writes; ++i) {
            if (i > 1) {
              asio::steady_timer t(co_await asio::this_coro::executor, std::chrono::milliseconds(write_ms));
              co_await t.async_wait(asio::use_awaitable);
            }
            if (!l.active()) {
              std::printf("%s: lease lost before write %ld (%s): not writing\n", p.name, i,
                          l.loss_reason().c_str());
              status = 4;
              co_return;
            }
            if (i == stop_before) {
              // The dangerous moment: the lease was valid a moment ago and the write is about to go out. A
              // stop here (a GC pause, a stopped VM, SIGSTOP) also stops renewing, so the lease can expire
              // and the lock pass to someone else; the database is the only place left to refuse this write.
              std::printf("%s: stopping before write %ld\n", p.name, i);
              std::fflush(stdout);
              ::raise(SIGSTOP);
            }
            // Blocking call on the executor's thread: while the database works, nothing else here runs, the
            // renewal included. Fine for one holder in an example; a server would use a thread pool.
            const write_outcome r = store.deposit(account, token, name, amount);
            if (!r.accepted) {
              std::printf(
                  "%s: write %ld REFUSED by the database: token %llu is lower than %llu, the highest it "
                  "accepted (a newer holder wrote; stopping)\n",
                  p.name, i, token, static_cast<unsigned long long>(r.highest_token));
              std::fflush(stdout);
              status = 3;
              co_return;
            }
            std::printf("%s: write %ld accepted with token %llu\n", p.name, i, token);
            std::fflush(stdout);
          }
          co_await l.async_release();
          status = 0;
        },
        [&](std::exception_ptr e) {
          try {
            if (e) std::rethrow_exception(e);
          } catch (const std::exception& ex) {
            std::fprintf(stderr, "%s: %s\n", p.name, ex.what());
            status = 1;
          }
        });
    ioc.run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", p.name, e.what());
    return 1;
  }
  return status;
}

}  // namespace baton::examples
