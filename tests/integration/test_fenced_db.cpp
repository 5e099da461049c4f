// SPDX-License-Identifier: Apache-2.0
#define BOOST_TEST_MODULE fenced_db
#include <boost/test/unit_test.hpp>

// Fencing in a real database: a holder that lost its lease while paused writes with its old token after a
// newer holder wrote, and the database itself refuses the write and keeps the newer holder's row. batond
// issues the tokens. SQLite runs in-process, then through its example program; PostgreSQL is a throwaway
// cluster written to by its example program (examples/fenced-postgres). A paused holder is either one that
// stops renewing (in-process) or an example process frozen with SIGSTOP.

#include "batond_fixture.hpp"
#include "coro.hpp"
#include "eventually.hpp"
#include "fenced-postgres/account_store.hpp"
#include "fenced-sqlite/account_store.hpp"
#include "lease_opts.hpp"
#include "postgres_cluster.hpp"

#include <baton/client.hpp>

#include <signal.h>
#include <sqlite3.h>
#include <stdlib.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

using namespace baton::test;
using namespace std::chrono_literals;
namespace asio = boost::asio;

namespace {

// TTL of every lease here. The holders write within a few milliseconds of acquiring, so even a slow, loaded
// machine is far inside it; the paused holder's lease expires after at most this long, which bounds the wait.
constexpr auto ttl = 2000ms;
// Upper bound of any one wait below: many times what it takes on an idle machine.
constexpr auto bound = 30s;

// The state letter of /proc/<pid>/stat ('T' stopped), or 0 when unreadable.
char process_state(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto paren = stat.rfind(')');
  return paren == std::string::npos || paren + 2 >= stat.size() ? 0 : stat[paren + 2];
}

// The token of an example's first line, "<example>: <name> acquired <key> with token <N>".
std::uint64_t acquired_token(const std::string& line) {
  BOOST_TEST_INFO("line: " << line);
  BOOST_REQUIRE(line.find(" acquired ") != std::string::npos);
  return std::stoull(line.substr(line.rfind(' ') + 1));
}

// The example program `baton-example-<example>` as holders A and B of one lock, writing to the database `db`
// (its --db argument) that `store` reads: A writes twice with its token (the second time the same token
// again: accepted), then stops itself right before its third write, after it last saw its lease valid. B
// waits for the lock, which passes to it once A's lease expires, and writes with its newer token. A resumes
// and sends its third write with its old token: the database refuses it, A reports the refusal, and the row
// keeps B's write.
template <class Store>
void paused_holder_scenario(const std::string& example, const std::string& db, Store& store) {
  temp_dir server_dir;
  batond_process server(server_dir.path());
  auto holder = [&](const std::string& name, const std::string& amount, const std::string& writes,
                    const std::string& stop_before) {
    return std::vector<std::string>{bin_path("baton-example-" + example),
                                    "--db",
                                    db,
                                    "--server",
                                    server.url(),
                                    "--key",
                                    "accounts/acct-1",
                                    "--account",
                                    "acct-1",
                                    "--name",
                                    name,
                                    "--amount",
                                    amount,
                                    "--writes",
                                    writes,
                                    "--write-ms",
                                    "20",
                                    "--ttl-ms",
                                    std::to_string(ttl.count()),
                                    "--stop-before-write",
                                    stop_before};
  };
  const std::string prefix = example + ": ";

  child_process a(holder("a", "10", "3", "3"));
  const auto ta = acquired_token(a.read_line(bound));
  BOOST_TEST(a.read_line(bound) == prefix + "write 1 accepted with token " + std::to_string(ta));
  BOOST_TEST(a.read_line(bound) == prefix + "write 2 accepted with token " + std::to_string(ta));
  BOOST_REQUIRE(a.read_line(bound) == prefix + "stopping before write 3");
  BOOST_REQUIRE(eventually([&] { return process_state(a.pid()) == 'T'; }, bound));
  auto row = store.read("acct-1");
  BOOST_REQUIRE(row.has_value());
  BOOST_TEST(row->balance == 20);
  BOOST_TEST(row->updated_by == "a");
  BOOST_TEST(row->last_token == ta);

  child_process b(holder("b", "100", "1", "0"));
  const auto tb = acquired_token(b.read_line(bound));
  BOOST_TEST(tb > ta);
  BOOST_TEST(b.wait(bound) == 0);
  row = store.read("acct-1");
  BOOST_TEST(row->balance == 120);
  BOOST_TEST(row->updated_by == "b");
  BOOST_TEST(row->last_token == tb);

  a.signal(SIGCONT);
  auto refusal = a.read_line(bound);
  BOOST_TEST(refusal.find("write 3 REFUSED by the database: token " + std::to_string(ta) + " is lower than " +
                          std::to_string(tb)) != std::string::npos,
             refusal);
  BOOST_TEST(a.wait(bound) == 3);
  row = store.read("acct-1");
  BOOST_TEST(row->balance == 120);
  BOOST_TEST(row->updated_by == "b");
  BOOST_TEST(row->last_token == tb);
}

}  // namespace

BOOST_AUTO_TEST_CASE(sqlite_paused_holder_is_refused_by_the_database_after_a_newer_holder_wrote) {
  temp_dir server_dir, db_dir;
  batond_process server(server_dir.path());
  baton::examples::sqlite::account_store db((db_dir.path() / "accounts.db").string());
  db.ensure_account("acct-1");
  asio::io_context ioc;
  baton::client_config cfg;
  cfg.server_url = server.url();
  baton::client a(ioc.get_executor(), cfg), b(ioc.get_executor(), cfg);
  run_coro(
      ioc,
      [&]() -> asio::awaitable<void> {
        auto la = co_await a.async_acquire("accounts/acct-1", lease_opts(ttl));
        const auto ta = la.token();
        BOOST_TEST(db.deposit("acct-1", ta, "a", 10).accepted);
        // The same holder writes again with the same token: accepted (only a lower token is stale).
        BOOST_TEST(db.deposit("acct-1", ta, "a", 10).accepted);
        // A pauses: it stops renewing, and the server keeps its lock only until the TTL passes.
        la.detach();
        auto lb =
            co_await b.async_acquire("accounts/acct-1", lease_opts(ttl), std::chrono::milliseconds(bound));
        const auto tb = lb.token();
        BOOST_TEST(tb > ta);
        BOOST_TEST(db.deposit("acct-1", tb, "b", 100).accepted);
        // A resumes and writes with the token it had: the database refuses it.
        auto late = db.deposit("acct-1", ta, "a", 10);
        BOOST_TEST(!late.accepted);
        BOOST_TEST(late.highest_token == tb);
        auto row = db.read("acct-1");
        BOOST_REQUIRE(row.has_value());
        BOOST_TEST(row->balance == 120);  // a's two deposits and b's, not a's late one
        BOOST_TEST(row->updated_by == "b");
        BOOST_TEST(row->last_token == tb);
        co_await lb.async_release();
      }(),
      std::chrono::duration_cast<std::chrono::seconds>(bound * 2));
}

BOOST_AUTO_TEST_CASE(sqlite_a_write_with_a_lower_token_is_refused_within_its_transaction) {
  // Without a lock server: the fence alone, including a write lower than the highest by one.
  temp_dir db_dir;
  baton::examples::sqlite::account_store db((db_dir.path() / "accounts.db").string());
  db.ensure_account("acct-1");
  BOOST_TEST(db.deposit("acct-1", 7, "x", 1).accepted);
  auto r = db.deposit("acct-1", 6, "y", 1);
  BOOST_TEST(!r.accepted);
  BOOST_TEST(r.highest_token == 7u);
  BOOST_TEST(db.read("acct-1")->balance == 1);
  BOOST_CHECK_THROW(db.deposit("no-such-account", 8, "x", 1), std::runtime_error);
}

namespace {

// docs/fencing.md, "Semaphores: fencing a permit": the per-slot fence and the count, statement for statement,
// in SQLite (BEGIN IMMEDIATE; named parameters bound by name).
class permit_db {
 public:
  permit_db() {
    BOOST_REQUIRE(sqlite3_open(":memory:", &db_) == SQLITE_OK);
    exec(R"(CREATE TABLE permit_fences (
              lock_key TEXT NOT NULL, slot INTEGER NOT NULL, last_token BIGINT NOT NULL,
              PRIMARY KEY (lock_key, slot));
            CREATE TABLE permit_counts (
              lock_key TEXT NOT NULL, permits INTEGER NOT NULL, last_token BIGINT NOT NULL,
              PRIMARY KEY (lock_key, permits));
            CREATE TABLE jobs (id TEXT PRIMARY KEY, worker_slot INTEGER, progress INTEGER);
            INSERT INTO jobs VALUES ('job-1', -1, 0);)");
  }
  ~permit_db() { sqlite3_close(db_); }
  permit_db(const permit_db&) = delete;
  permit_db& operator=(const permit_db&) = delete;

  // One guarded write by the holder of `slot` of `key` (count `permits`) with `token`: true when committed.
  bool write(std::int64_t token, int slot, int permits, int progress) {
    exec("BEGIN IMMEDIATE");
    const bool fenced =
        run(R"(INSERT INTO permit_fences (lock_key, slot, last_token) VALUES (:key, :slot, :token)
                 ON CONFLICT (lock_key, slot) DO UPDATE SET last_token = EXCLUDED.last_token
                 WHERE permit_fences.last_token <= EXCLUDED.last_token)",
            token, slot, permits) == 1 &&
        run(R"(SELECT last_token FROM permit_counts
                 WHERE lock_key = :key AND permits <= :slot AND last_token > :token LIMIT 1)",
            token, slot, permits) == 0;
    if (!fenced) {
      exec("ROLLBACK");
      return false;
    }
    run(R"(INSERT INTO permit_counts (lock_key, permits, last_token) VALUES (:key, :permits, :token)
             ON CONFLICT (lock_key, permits) DO UPDATE SET last_token = EXCLUDED.last_token
             WHERE permit_counts.last_token < EXCLUDED.last_token)",
        token, slot, permits);
    exec("UPDATE jobs SET worker_slot = " + std::to_string(slot) +
         ", progress = " + std::to_string(progress) + " WHERE id = 'job-1'");
    exec("COMMIT");
    return true;
  }

  int progress() {
    int out = -1;
    sqlite3_stmt* st = nullptr;
    sqlite3_prepare_v2(db_, "SELECT progress FROM jobs WHERE id = 'job-1'", -1, &st, nullptr);
    if (sqlite3_step(st) == SQLITE_ROW) out = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    return out;
  }

 private:
  void exec(const std::string& sql) {
    char* err = nullptr;
    const int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err);
    BOOST_REQUIRE_MESSAGE(rc == SQLITE_OK, sql << ": " << (err ? err : "?"));
  }
  // Runs one statement with :key, :slot, :permits and :token bound; the rows it changed (a write) or
  // returned (a query).
  int run(const char* sql, std::int64_t token, int slot, int permits) {
    sqlite3_stmt* st = nullptr;
    BOOST_REQUIRE_MESSAGE(sqlite3_prepare_v2(db_, sql, -1, &st, nullptr) == SQLITE_OK, sqlite3_errmsg(db_));
    const auto bind = [&](const char* name, auto set) {
      if (int i = sqlite3_bind_parameter_index(st, name); i > 0) set(i);
    };
    bind(":key", [&](int i) { sqlite3_bind_text(st, i, "pools/encoder", -1, SQLITE_STATIC); });
    bind(":slot", [&](int i) { sqlite3_bind_int(st, i, slot); });
    bind(":permits", [&](int i) { sqlite3_bind_int(st, i, permits); });
    bind(":token", [&](int i) { sqlite3_bind_int64(st, i, token); });
    int rows = 0, rc = 0;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW)
      ++rows;
    BOOST_REQUIRE_MESSAGE(rc == SQLITE_DONE, sqlite3_errmsg(db_));
    const bool query = sqlite3_stmt_readonly(st);
    sqlite3_finalize(st);
    return query ? rows : sqlite3_changes(db_);
  }

  sqlite3* db_ = nullptr;
};

}  // namespace

BOOST_AUTO_TEST_CASE(sqlite_permit_recipe_fences_per_slot_and_refuses_a_slot_past_a_newer_count) {
  permit_db db;
  BOOST_TEST(db.write(5, 1, 4, 10));   // slot 1's holder
  BOOST_TEST(db.write(9, 1, 4, 20));   // slot 1 granted again
  BOOST_TEST(db.write(7, 2, 4, 30));   // slot 2's older token: another slot, written
  BOOST_TEST(!db.write(5, 1, 4, 40));  // slot 1's stale holder
  BOOST_TEST(db.write(8, 3, 4, 50));
  // The key was idle and came back with 2 permits: token 8 in slot 3 is past the newer count.
  BOOST_TEST(db.write(12, 0, 2, 60));
  BOOST_TEST(!db.write(8, 3, 4, 70));
  BOOST_TEST(!db.write(7, 2, 4, 80));  // slot 2 is the first one past a count of 2
  BOOST_TEST(db.progress() == 60);
  // A count that grows again does not reopen slot 3 to token 8; the new count's own slot 3 writes.
  BOOST_TEST(db.write(20, 0, 4, 90));
  BOOST_TEST(!db.write(8, 3, 4, 100));
  BOOST_TEST(db.write(21, 3, 4, 110));
  BOOST_TEST(db.progress() == 110);
}

BOOST_AUTO_TEST_CASE(postgres_paused_holder_is_refused_by_the_database_after_a_newer_holder_wrote) {
  postgres_cluster pg;  // fails with what to install when PostgreSQL is missing
  baton::examples::postgres::account_store db(pg.conninfo());
  paused_holder_scenario("fenced-postgres", pg.conninfo(), db);
}

BOOST_AUTO_TEST_CASE(sqlite_example_paused_holder_is_refused_by_the_database_after_a_newer_holder_wrote) {
  temp_dir db_dir;
  const auto file = (db_dir.path() / "accounts.db").string();
  baton::examples::sqlite::account_store db(file);
  paused_holder_scenario("fenced-sqlite", file, db);
}

BOOST_AUTO_TEST_CASE(missing_postgres_programs_are_reported_with_what_to_install) {
  temp_dir empty;
  ::setenv("BATON_POSTGRES_BIN_DIR", empty.path().c_str(), 1);
  std::string message;
  try {
    postgres_bin_dir();
  } catch (const std::runtime_error& e) {
    message = e.what();
  }
  ::unsetenv("BATON_POSTGRES_BIN_DIR");
  BOOST_TEST(message.find("initdb") != std::string::npos, message);
  BOOST_TEST(message.find("install the `postgresql` package") != std::string::npos, message);
}
