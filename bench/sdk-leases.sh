#!/usr/bin/env bash
# One process holding many leases through the C++ SDK, against a real batond on loopback: the client's CPU
# and memory per lease in steady state, then how long after each lease's local deadline its guarded work is
# cancelled when batond is frozen (SIGSTOP). Figures and method: docs/benchmarks-sdk-agent.md.
#
#   bash bench/sdk-leases.sh [extra baton-bench-sdk-leases flags, e.g. --leases 2000 --seconds 20s]
#
# Builds Release, starts batond with its data in a temporary directory, runs baton-bench-sdk-leases with
# --server-pid so the benchmark can freeze batond, and always stops batond (SIGCONT first: it may be frozen).
# Environment: SDK_BENCH_BUILD=0 skips the build; SDK_BENCH_DIR is where the data directory goes (/var/tmp).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/release/bin

log() { echo "sdk-leases.sh: $*" >&2; }

if [[ ${SDK_BENCH_BUILD:-1} != 0 ]]; then
  log "building Release"
  cmake --preset release >/dev/null
  cmake --build --preset release --target batond baton-bench-sdk-leases >/dev/null
fi

work=$(mktemp -d "${SDK_BENCH_DIR:-/var/tmp}/baton-sdk-leases.XXXXXX")
batond_pid="" bench_pid=""
cleanup() {
  [[ -n $bench_pid ]] && kill -TERM "$bench_pid" 2>/dev/null || true
  if [[ -n $batond_pid ]]; then
    kill -CONT "$batond_pid" 2>/dev/null || true
    kill -TERM "$batond_pid" 2>/dev/null || true
    wait "$batond_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
trap "exit 130" INT TERM  # through the EXIT trap, so nothing is left running

# 10,000 leases plus the sockets of renews that hang while batond is frozen: more than the usual 1024 files.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

"$bin/batond" --data-dir "$work/data" --listen 127.0.0.1:0 --log-level warn >"$work/batond.out" 2>"$work/batond.err" &
batond_pid=$!
for _ in $(seq 100); do
  grep -q "listening on" "$work/batond.out" 2>/dev/null && break
  kill -0 "$batond_pid" 2>/dev/null || break
  sleep 0.1
done
addr=$(sed -n 's/^batond listening on //p' "$work/batond.out")
if [[ -z $addr ]]; then
  log "batond did not start:"
  cat "$work/batond.err" >&2
  exit 1
fi

log "batond $addr (pid $batond_pid); $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg)"
# In the background, so a signal to this script interrupts the wait and the trap stops both.
"$bin/baton-bench-sdk-leases" --server "http://$addr" --server-pid "$batond_pid" "$@" &
bench_pid=$!
status=0
wait "$bench_pid" || status=$?
bench_pid=""
log "load average after the run: $(cut -d' ' -f1-3 /proc/loadavg)"
exit $status
