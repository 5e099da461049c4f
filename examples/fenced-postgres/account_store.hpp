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

/// A connection to a PostgreSQL database holding the `accounts` table (created if missing): a
/// fenced_account_store (../common/fenced_account.hpp) whose deposit is one conditional UPDATE, its own
/// transaction (the token as a BIGINT). Not thread-safe (one libpq connection): use one object per thread.
class account_store {
 public:
  /// Connects with a libpq connection string (`host=... port=... dbname=...` or a postgresql:// URI; empty:
  /// libpq's defaults and the PG* environment variables).
  explicit account_store(const std::string& conninfo);
  ~account_store();
  account_store(const account_store&) = delete;
  account_store& operator=(const account_store&) = delete;

  void ensure_account(const std::string& id);
  write_outcome deposit(const std::string& id, std::uint64_t token, const std::string& writer,
                        std::int64_t amount);
  std::optional<account> read(const std::string& id);

 private:
  pg_conn* conn_ = nullptr;
};

}  // namespace baton::examples::postgres
