// SPDX-License-Identifier: Apache-2.0
// A lock holder that writes to PostgreSQL with its fencing token: it acquires a Baton lease, then deposits
// into an account, each deposit one conditional UPDATE that writes only if the token is not lower than the
// account's last_token (account_store::deposit). A holder paused long enough to lose its lease, and resumed
// after a newer holder wrote, is refused by the database itself. The holder is the one fenced-sqlite runs
// over another store (../common/fenced_holder.hpp). Usage: baton-example-fenced-postgres [--db CONNINFO]
// [--server URL] [--key K] [--account ID] [--name N]
//          [--amount N] [--writes N] [--write-ms N] [--ttl-ms N] [--stop-before-write N]
// Exit: 0 every write accepted (lease released); 3 a write refused by the database (stale token);
//       4 the lease was lost before a write, which was not attempted; 1 other error; 2 usage.

#include "../common/fenced_holder.hpp"
#include "account_store.hpp"

int main(int argc, char** argv) {
  return baton::examples::run_fenced_holder<baton::examples::postgres::account_store>(
      argc, argv,
      {"fenced-postgres", "--db CONNINFO",
       "libpq connection string or URI (none: libpq defaults, PG* variables)", false});
}
