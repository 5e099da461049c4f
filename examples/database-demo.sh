#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Fencing in a real database, shown twice: SQLite (in the holder's own process), then PostgreSQL (a throwaway
# cluster on loopback, removed at the end). In each, holder A acquires the lock on accounts/1 and deposits;
# it stops itself right before its third deposit (as a GC pause or a stopped VM would), so it stops renewing
# and its lease expires; holder B acquires with a larger token and deposits; A resumes and sends its
# deposit, and the database refuses it: the statement that would apply it also compares the tokens
# (`... WHERE last_token <= $1`, docs/fencing.md). Prints each step and the account row after it.
#
#   bash examples/database-demo.sh          # needs what `bash deploy/install-deps.sh test` installs
set -euo pipefail
cd "$(dirname "$0")/.."

bash deploy/install-deps.sh test
cmake --preset release >/dev/null
cmake --build --preset release --target batond baton-example-fenced-sqlite baton-example-fenced-postgres
bin=build/release/bin

work=$(mktemp -d /tmp/baton-database-demo.XXXXXX)
pg_ctl="" pg_user=()
cleanup() {
  for pid in ${a_pid:-} ${batond_pid:-}; do
    if kill -0 "$pid" 2>/dev/null; then
      kill -CONT "$pid" 2>/dev/null || true
      kill -TERM "$pid" 2>/dev/null || true
      wait "$pid" 2>/dev/null || true
    fi
  done
  if [[ -n $pg_ctl && -f $work/pg/data/postmaster.pid ]]; then
    "${pg_user[@]}" "$pg_ctl" -D "$work/pg/data" -m immediate -w stop >/dev/null 2>&1 || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

say() { printf '\n== %s\n' "$*"; }

"$bin/batond" --listen 127.0.0.1:0 --data-dir "$work/batond" --log-level warn >"$work/batond.out" &
batond_pid=$!
for _ in $(seq 1 100); do
  grep -q "listening on" "$work/batond.out" 2>/dev/null && break
  sleep 0.1
done
addr=$(sed -n 's/^batond listening on //p' "$work/batond.out")
[[ -n $addr ]] || { echo "database-demo: batond did not start" >&2; exit 1; }
server="http://$addr"

# stopped PID: true once the process is stopped (state T in /proc), waiting up to 30 s.
stopped() {
  for _ in $(seq 1 300); do
    [[ $(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) == T ]] && return 0
    sleep 0.1
  done
  return 1
}

# scenario NAME PROGRAM DB SHOW: the paused-holder story against one database; SHOW prints the account row.
scenario() {
  local name=$1 program=$2 db=$3 show=$4 key="accounts/1-$1"
  local common=(--db "$db" --server "$server" --key "$key" --account 1 --ttl-ms 2000 --write-ms 200)
  say "$name: holder A deposits 10 twice, then stops before its third deposit"
  "$bin/$program" "${common[@]}" --name a --amount 10 --writes 3 --stop-before-write 3 &
  a_pid=$!
  stopped "$a_pid" || { echo "database-demo: holder A did not stop" >&2; exit 1; }
  "$show"
  say "$name: A is stopped and renews nothing; B waits for A's lease to expire, acquires, deposits 100"
  "$bin/$program" "${common[@]}" --name b --amount 100 --writes 1
  "$show"
  say "$name: A resumes and sends its third deposit with its old token"
  kill -CONT "$a_pid"
  local status=0
  wait "$a_pid" || status=$?
  a_pid=""
  "$show"
  if ((status != 3)); then
    echo "database-demo: expected the database to refuse A's stale deposit (exit 3), got exit $status" >&2
    exit 1
  fi
  echo "$name: the database refused A's deposit; the row holds B's write"
}

show_sqlite() {
  python3 - "$work/accounts.db" <<'EOF'
import sqlite3, sys
row = sqlite3.connect(sys.argv[1]).execute(
    "SELECT id, balance, updated_by, last_token FROM accounts WHERE id = '1'").fetchone()
print("   account row: id=%s balance=%s updated_by=%s last_token=%s" % row)
EOF
}
scenario SQLite baton-example-fenced-sqlite "$work/accounts.db" show_sqlite

# PostgreSQL: initdb and the server run as an unprivileged user when this runs as root (PostgreSQL refuses
# root), on a free loopback port, with its socket in the demo's directory.
pg_bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[[ -x $pg_bin/initdb ]] || { echo "database-demo: PostgreSQL not found; run bash deploy/install-deps.sh test" >&2; exit 1; }
pg_ctl=$pg_bin/pg_ctl
mkdir -p "$work/pg"
if [[ $(id -u) -eq 0 ]]; then
  chown nobody:nogroup "$work/pg"
  chmod 755 "$work"
  pg_user=(setpriv --reuid=nobody --regid=nogroup --clear-groups -- env -C "$work/pg")
fi
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"${pg_user[@]}" "$pg_bin/initdb" -D "$work/pg/data" -U baton -A trust -E UTF8 --locale=C --no-sync \
  --no-instructions >"$work/initdb.out" 2>&1 || { cat "$work/initdb.out" >&2; exit 1; }
"${pg_user[@]}" "$pg_ctl" -D "$work/pg/data" -l "$work/pg/postgres.log" -w -t 60 \
  -o "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$work/pg" start >/dev/null
conninfo="host=127.0.0.1 port=$port user=baton dbname=postgres connect_timeout=10"

show_postgres() {
  "$pg_bin/psql" "$conninfo" -X -A -t -F ' ' \
    -c "SELECT 'id=' || id, 'balance=' || balance, 'updated_by=' || updated_by, 'last_token=' || last_token
        FROM accounts WHERE id = '1'" | sed 's/^/   account row: /'
}
scenario PostgreSQL baton-example-fenced-postgres "$conninfo" show_postgres
