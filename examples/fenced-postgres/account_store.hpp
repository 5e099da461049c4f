// SPDX-License-Identifier: Apache-2.0
#pragma once
// Accounts in a PostgreSQL table, each written only with a fencing token at least as high as the last one it
// accepted (docs/fencing.md, "PostgreSQL"). The token is stored in the account's row and checked by the
// UPDATE itself, so the database refuses a stale writer in the same step as the write.

#include "../common/fenced_account.hpp"

#include <cstdint>
#include <optional>
#include <string>

struct pg_conn;

namespace baton::examples::postgres {

/// A connection to a PostgreSQL database holding the `accounts` table (created if missing).
///
/// Errors: every function throws std::runtime_error naming the statement and the server's message. Not
/// thread-safe (one libpq connection): use one object per thread.
class account_store {
 public:
  /// Connects with a libpq connection string (`host=... port=... dbname=...` or a postgresql:// URI; empty:
  /// libpq's defaults and the PG* environment variables).
  explicit account_store(const std::string& conninfo);
  ~account_store();
  account_store(const account_store&) = delete;
  account_store& operator=(const account_store&) = delete;

  /// Creates the account with balance 0 and last_token 0, unless it exists.
  void ensure_account(const std::string& id);

  /// Adds `amount` to the balance and records `writer`, if `token` is not lower than the account's
  /// last_token, and sets last_token to `token`: one conditional UPDATE, its own transaction. Throws if the
  /// account does not exist or `token` does not fit a BIGINT.
  write_outcome deposit(const std::string& id, std::uint64_t token, const std::string& writer,
                        std::int64_t amount);

  /// The account's row, or nothing if there is no such account.
  std::optional<account> read(const std::string& id);

 private:
  pg_conn* conn_ = nullptr;
};

}  // namespace baton::examples::postgres
