// SPDX-License-Identifier: Apache-2.0
#include "account_store.hpp"

#include <libpq-fe.h>

#include <limits>
#include <memory>
#include <stdexcept>
#include <vector>

namespace baton::examples::postgres {

namespace {

using result_ptr = std::unique_ptr<PGresult, decltype(&PQclear)>;

// Runs `sql` with text parameters; throws unless the server answered `expected`.
result_ptr run(PGconn* conn, const char* sql, const std::vector<std::string>& params,
               ExecStatusType expected) {
  std::vector<const char*> values;
  for (const auto& p : params)
    values.push_back(p.c_str());
  result_ptr r(
      PQexecParams(conn, sql, static_cast<int>(values.size()), nullptr, values.data(), nullptr, nullptr, 0),
      &PQclear);
  if (!r || PQresultStatus(r.get()) != expected)
    throw std::runtime_error(std::string("postgres: `") + sql + "`: " + PQerrorMessage(conn));
  return r;
}

std::string token_text(std::uint64_t token) {
  if (token > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
    throw std::runtime_error("fencing token " + std::to_string(token) + " does not fit a BIGINT");
  return std::to_string(token);
}

}  // namespace

account_store::account_store(const std::string& conninfo) : conn_(PQconnectdb(conninfo.c_str())) {
  if (!conn_ || PQstatus(conn_) != CONNECTION_OK) {
    std::string msg = conn_ ? PQerrorMessage(conn_) : "out of memory";
    PQfinish(conn_);
    throw std::runtime_error("postgres: cannot connect (" + conninfo + "): " + msg);
  }
  try {
    // Keeps "relation already exists, skipping" off stderr; warnings and errors still show.
    run(conn_, "SET client_min_messages = warning", {}, PGRES_COMMAND_OK);
    run(conn_,
        "CREATE TABLE IF NOT EXISTS accounts ("
        " id TEXT PRIMARY KEY,"
        " balance BIGINT NOT NULL DEFAULT 0,"
        " updated_by TEXT NOT NULL DEFAULT '',"
        " last_token BIGINT NOT NULL DEFAULT 0)",
        {}, PGRES_COMMAND_OK);
  } catch (...) {
    PQfinish(conn_);
    throw;
  }
}

account_store::~account_store() {
  PQfinish(conn_);
}

void account_store::ensure_account(const std::string& id) {
  run(conn_, "INSERT INTO accounts (id) VALUES ($1) ON CONFLICT (id) DO NOTHING", {id}, PGRES_COMMAND_OK);
}

write_outcome account_store::deposit(const std::string& id, std::uint64_t token, const std::string& writer,
                                     std::int64_t amount) {
  // The WHERE is evaluated on the row the UPDATE is about to change, under that row's lock; a writer that
  // waited for the lock re-checks it against the committed row (even at READ COMMITTED). So a stale token
  // matches no row, whatever ran in between: the check and the write are one step.
  auto r = run(conn_,
               "UPDATE accounts SET balance = balance + $3::bigint, updated_by = $4, last_token = $1::bigint"
               " WHERE id = $2 AND last_token <= $1::bigint",
               {token_text(token), id, std::to_string(amount), writer}, PGRES_COMMAND_OK);
  if (std::string(PQcmdTuples(r.get())) == "1") return {true, token};
  // Refused, or no such account. This read only words the message: the UPDATE above already decided.
  auto a = read(id);
  if (!a) throw std::runtime_error("postgres: no account '" + id + "'");
  return {false, a->last_token};
}

std::optional<account> account_store::read(const std::string& id) {
  auto r =
      run(conn_, "SELECT balance, updated_by, last_token FROM accounts WHERE id = $1", {id}, PGRES_TUPLES_OK);
  if (PQntuples(r.get()) == 0) return std::nullopt;
  return account{std::stoll(PQgetvalue(r.get(), 0, 0)), PQgetvalue(r.get(), 0, 1),
                 std::stoull(PQgetvalue(r.get(), 0, 2))};
}

static_assert(fenced_account_store<account_store>);

}  // namespace baton::examples::postgres
