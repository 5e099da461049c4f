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

/// An open SQLite database holding the `accounts` table (created if missing): a fenced_account_store
/// (../common/fenced_account.hpp) whose deposit checks last_token and writes in one transaction (the token as
/// SQLite's INTEGER). Not thread-safe: use one object per thread (several processes may share the file:
/// writers wait up to 10 s for each other's transactions).
class account_store {
 public:
  explicit account_store(const std::string& path);
  ~account_store();
  account_store(const account_store&) = delete;
  account_store& operator=(const account_store&) = delete;

  void ensure_account(const std::string& id);
  write_outcome deposit(const std::string& id, std::uint64_t token, const std::string& writer,
                        std::int64_t amount);
  std::optional<account> read(const std::string& id);

 private:
  void exec(const char* sql);
  sqlite3* db_ = nullptr;
};

}  // namespace baton::examples::sqlite
