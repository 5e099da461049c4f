// SPDX-License-Identifier: Apache-2.0
#pragma once
// Accounts in an SQLite database, each written only with a fencing token at least as high as the last one it
// accepted (docs/fencing.md, "SQLite"). The token is stored in the account's row, so it is exactly as durable
// as the balance it protects.

#include <sqlite3.h>

#include "../common/fenced_account.hpp"

#include <cstdint>
#include <optional>
#include <string>

namespace baton::examples::sqlite {

/// An open SQLite database holding the `accounts` table (created if missing).
///
/// Errors: every function throws std::runtime_error naming the statement and SQLite's message. Not
/// thread-safe: use one object per thread (several processes may share the file: writers wait up to 10 s for
/// each other's transactions).
class account_store {
 public:
  explicit account_store(const std::string& path);
  ~account_store();
  account_store(const account_store&) = delete;
  account_store& operator=(const account_store&) = delete;

  /// Creates the account with balance 0 and last_token 0, unless it exists.
  void ensure_account(const std::string& id);

  /// Adds `amount` to the balance and records `writer`, if `token` is not lower than the account's
  /// last_token; sets last_token to `token` in the same transaction. Throws if the account does not exist or
  /// `token` does not fit a signed 64-bit integer (SQLite's INTEGER).
  write_outcome deposit(const std::string& id, std::uint64_t token, const std::string& writer,
                        std::int64_t amount);

  /// The account's row, or nothing if there is no such account.
  std::optional<account> read(const std::string& id);

 private:
  void exec(const char* sql);
  sqlite3* db_ = nullptr;
};

}  // namespace baton::examples::sqlite
