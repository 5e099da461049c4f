// A lock holder that writes to PostgreSQL with its fencing token: it acquires a Baton lease, then deposits
// into an account, each deposit one conditional UPDATE that writes only if the token is not lower than the
// account's last_token (account_store::deposit). A holder paused long enough to lose its lease, and resumed
// after a newer holder wrote, is refused by the database itself.
// Usage: baton-example-fenced-postgres [--db CONNINFO] [--server URL] [--key K] [--account ID] [--name N]
//          [--amount N] [--writes N] [--write-ms N] [--ttl-ms N] [--stop-before-write N]
// Exit: 0 every write accepted (lease released); 3 a write refused by the database (stale token);
//       4 the lease was lost before a write, which was not attempted; 1 other error; 2 usage.

#include "../common/flags.hpp"
#include "account_store.hpp"

#include <baton/client.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <signal.h>

#include <chrono>
#include <cstdio>
#include <string>

namespace asio = boost::asio;

int main(int argc, char** argv) {
  std::string conninfo, server = "http://127.0.0.1:7070", key = "accounts", account = "acct-1",
                        name = "writer";
  long amount = 10, writes = 3, write_ms = 100, ttl_ms = 2000, stop_before = 0;
  if (auto exit_status = baton::examples::parse_flags(
          argc, argv,
          "baton-example-fenced-postgres [--db CONNINFO] [--server URL] [--key K] [--account ID] [--name N] "
          "[--amount N] [--writes N] [--write-ms N] [--ttl-ms N] [--stop-before-write N]",
          {{"--db", conninfo, "libpq connection string or URI (none: libpq defaults, PG* variables)"},
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
  int status = 1;
  try {
    baton::examples::postgres::account_store store(conninfo);
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
          auto l = co_await c.acquire(key, opts);
          const auto token = l.token();
          std::printf("fenced-postgres: %s acquired %s with token %llu\n", name.c_str(), key.c_str(),
                      static_cast<unsigned long long>(token));
          std::fflush(stdout);
          for (long i = 1; i <= writes; ++i) {
            if (i > 1) {
              asio::steady_timer t(co_await asio::this_coro::executor, std::chrono::milliseconds(write_ms));
              co_await t.async_wait(asio::use_awaitable);
            }
            if (!l.active()) {
              std::printf("fenced-postgres: lease lost before write %ld (%s): not writing\n", i,
                          l.loss_reason().c_str());
              status = 4;
              co_return;
            }
            if (i == stop_before) {
              // The dangerous moment: the lease was valid a moment ago and the write is about to go out. A
              // stop here (a GC pause, a stopped VM, SIGSTOP) also stops renewing, so the lease can expire
              // and the lock pass to someone else; the database is the only place left to refuse this write.
              std::printf("fenced-postgres: stopping before write %ld\n", i);
              std::fflush(stdout);
              ::raise(SIGSTOP);
            }
            // Blocking call on the executor's thread: while the database works, nothing else here runs, the
            // renewal included. Fine for one holder in an example; a server would use a thread pool.
            auto r = store.deposit(account, token, name, amount);
            if (!r.accepted) {
              std::printf(
                  "fenced-postgres: write %ld REFUSED by the database: token %llu is lower than %llu, the "
                  "highest it accepted (a newer holder wrote; stopping)\n",
                  i, static_cast<unsigned long long>(token),
                  static_cast<unsigned long long>(r.highest_token));
              std::fflush(stdout);
              status = 3;
              co_return;
            }
            std::printf("fenced-postgres: write %ld accepted with token %llu\n", i,
                        static_cast<unsigned long long>(token));
            std::fflush(stdout);
          }
          co_await l.release();
          status = 0;
        },
        [&](std::exception_ptr e) {
          try {
            if (e) std::rethrow_exception(e);
          } catch (const std::exception& ex) {
            std::fprintf(stderr, "fenced-postgres: %s\n", ex.what());
            status = 1;
          }
        });
    ioc.run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fenced-postgres: %s\n", e.what());
    return 1;
  }
  return status;
}
