// SPDX-License-Identifier: Apache-2.0
// A lock holder that writes to SQLite with its fencing token: it acquires a Baton lease, then deposits into
// an account, each deposit one transaction that checks the account's last_token and writes
// (account_store::deposit). A holder paused long enough to lose its lease, and resumed after a newer holder
// wrote, is refused by the database itself.
// Usage: baton-example-fenced-sqlite --db FILE [--server URL] [--key K] [--account ID] [--name N]
//          [--amount N] [--writes N] [--write-ms N] [--ttl-ms N] [--stop-before-write N]
// Exit: 0 every write accepted (lease released); 3 a write refused by the database (stale token);
//       4 the lease was lost before a write, which was not attempted; 1 other error; 2 usage.

#include "../common/fenced_holder.hpp"
#include "account_store.hpp"

int main(int argc, char** argv) {
  return baton::examples::run_fenced_holder<baton::examples::sqlite::account_store>(
      argc, argv, {"fenced-sqlite", "--db FILE", "the SQLite database file (created if missing)", true});
}
