// SPDX-License-Identifier: Apache-2.0
#include "account_store.hpp"

#include <limits>
#include <stdexcept>
#include <utility>

namespace baton::examples::sqlite {

namespace {

// A prepared statement, finalized on every path.
class statement {
 public:
  statement(sqlite3* db, const char* sql) : db_(db), sql_(sql) {
    if (sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr) != SQLITE_OK) fail("prepare");
  }
  ~statement() { sqlite3_finalize(stmt_); }
  statement(const statement&) = delete;
  statement& operator=(const statement&) = delete;

  statement& bind(int i, std::int64_t v) {
    if (sqlite3_bind_int64(stmt_, i, v) != SQLITE_OK) fail("bind");
    return *this;
  }
  statement& bind(int i, const std::string& v) {
    if (sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT) != SQLITE_OK)
      fail("bind");
    return *this;
  }
  // True while a row is available.
  bool step() {
    int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc != SQLITE_DONE) fail("step");
    return false;
  }
  std::int64_t int64(int col) const { return sqlite3_column_int64(stmt_, col); }
  std::string text(int col) const {
    auto p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, col));
    return p ? std::string(p, static_cast<std::size_t>(sqlite3_column_bytes(stmt_, col))) : std::string();
  }

 private:
  [[noreturn]] void fail(const char* what) const {
    throw std::runtime_error(std::string("sqlite: ") + what + " `" + sql_ + "`: " + sqlite3_errmsg(db_));
  }
  sqlite3* db_;
  const char* sql_;
  sqlite3_stmt* stmt_ = nullptr;
};

std::int64_t to_int64(std::uint64_t token) {
  if (token > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
    throw std::runtime_error("fencing token " + std::to_string(token) + " does not fit SQLite's INTEGER");
  return static_cast<std::int64_t>(token);
}

}  // namespace

account_store::account_store(const std::string& path) {
  if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) != SQLITE_OK) {
    std::string msg = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    throw std::runtime_error("sqlite: cannot open " + path + ": " + msg);
  }
  // Another process's write transaction makes BEGIN IMMEDIATE wait instead of failing at once.
  sqlite3_busy_timeout(db_, 10'000);
  try {
    exec(
        "CREATE TABLE IF NOT EXISTS accounts ("
        " id TEXT PRIMARY KEY,"
        " balance INTEGER NOT NULL DEFAULT 0,"
        " updated_by TEXT NOT NULL DEFAULT '',"
        " last_token INTEGER NOT NULL DEFAULT 0)");
  } catch (...) {
    sqlite3_close(db_);
    throw;
  }
}

account_store::~account_store() {
  sqlite3_close(db_);
}

void account_store::exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : sqlite3_errmsg(db_);
    sqlite3_free(err);
    throw std::runtime_error(std::string("sqlite: `") + sql + "`: " + msg);
  }
}

void account_store::ensure_account(const std::string& id) {
  statement(db_, "INSERT INTO accounts (id) VALUES (?1) ON CONFLICT (id) DO NOTHING").bind(1, id).step();
}

write_outcome account_store::deposit(const std::string& id, std::uint64_t token, const std::string& writer,
                                     std::int64_t amount) {
  const std::int64_t t = to_int64(token);
  // BEGIN IMMEDIATE takes the database's write lock now, not at the first write: from here to COMMIT no other
  // connection can write, so the fence read below cannot go stale before the update (with a plain BEGIN, two
  // transactions could both read the old last_token). The update still carries the condition, so the
  // statement alone would refuse a stale token even without the explicit check.
  exec("BEGIN IMMEDIATE");
  try {
    std::int64_t highest = 0;
    {  // finalized before COMMIT or ROLLBACK
      statement fence(db_, "SELECT last_token FROM accounts WHERE id = ?1");
      fence.bind(1, id);
      if (!fence.step()) throw std::runtime_error("sqlite: no account '" + id + "'");
      highest = fence.int64(0);
    }
    if (t < highest) {
      exec("ROLLBACK");
      return {false, static_cast<std::uint64_t>(highest)};
    }
    {
      statement write(db_,
                      "UPDATE accounts SET balance = balance + ?3, updated_by = ?4, last_token = ?2"
                      " WHERE id = ?1 AND last_token <= ?2");
      write.bind(1, id).bind(2, t).bind(3, amount).bind(4, writer).step();
    }
    if (sqlite3_changes(db_) != 1) throw std::runtime_error("sqlite: the fenced update changed no row");
    exec("COMMIT");
    return {true, token};
  } catch (...) {
    // Leaves the connection usable; a failed COMMIT or ROLLBACK may already have ended the transaction.
    if (!sqlite3_get_autocommit(db_)) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
}

std::optional<account> account_store::read(const std::string& id) {
  statement q(db_, "SELECT balance, updated_by, last_token FROM accounts WHERE id = ?1");
  q.bind(1, id);
  if (!q.step()) return std::nullopt;
  return account{q.int64(0), q.text(1), static_cast<std::uint64_t>(q.int64(2))};
}

static_assert(fenced_account_store<account_store>);

}  // namespace baton::examples::sqlite
