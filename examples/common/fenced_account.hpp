// SPDX-License-Identifier: Apache-2.0
#pragma once
// What the fenced-database examples store and answer (fenced-sqlite, fenced-postgres): an account row with
// the highest fencing token it accepted, the database's decision about one fenced write, and what an account
// store of either database does.

#include <concepts>
#include <cstdint>
#include <optional>
#include <string>

namespace baton::examples {

/// What the database decided about one fenced write.
struct write_outcome {
  bool accepted = false;
  /// The account's last_token after the attempt: the writer's token when accepted, the newer token that made
  /// it stale when refused.
  std::uint64_t highest_token = 0;
};

/// One row of `accounts`.
struct account {
  std::int64_t balance = 0;
  std::string updated_by;
  std::uint64_t last_token = 0;
};

/// The accounts of one database, each written only with a fencing token at least as high as the last one it
/// accepted (docs/fencing.md). The stores (sqlite::account_store, postgres::account_store) are opened on a
/// string naming the database and throw std::runtime_error, naming the statement and the database's message,
/// for every error; each says how it keeps the check and the write one step.
/// ensure_account(id) creates the account with balance 0 and last_token 0, unless it exists.
/// deposit(id, token, writer, amount) adds `amount` to the balance and records `writer`, if `token` is not
/// lower than the account's last_token, and sets last_token to `token`, in one transaction; it throws if the
/// account does not exist or `token` does not fit a signed 64-bit integer.
/// read(id) is the account's row, or nothing if there is no such account.
template <class Store>
concept fenced_account_store = std::constructible_from<Store, const std::string&> &&
    requires(Store& s, const std::string& id, std::uint64_t token, std::int64_t amount) {
  s.ensure_account(id);
  { s.deposit(id, token, id, amount) } -> std::same_as<write_outcome>;
  { s.read(id) } -> std::same_as<std::optional<account>>;
};

}  // namespace baton::examples
