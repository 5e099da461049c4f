#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# One process holding many leases through the C++ SDK, against a real batond on loopback: acquire+release
# cycles per second, the client's CPU and memory per lease in steady state, then how long after each lease's
# local deadline its guarded work is cancelled when batond is frozen (SIGSTOP). Figures and method:
# docs/benchmarks-sdk-agent.md; the etcd comparison in docs/benchmarks.md.
#
#   bash bench/sdk-leases.sh [extra baton-bench-sdk-leases flags, e.g. --leases 2000 --seconds 20s]
#   SDK_BENCH_SERVER=etcd bash bench/sdk-leases.sh ...   # the same SDK through its etcd backend
#
# Builds Release, starts batond with its data in a temporary directory, runs baton-bench-sdk-leases with
# --server-pid so the benchmark can freeze batond, and always stops batond (SIGCONT first: it may be frozen).
# With SDK_BENCH_SERVER=etcd it starts a three-member etcd cluster on loopback instead (Debian etcd-server),
# names all three members in the etcd:// URL, counts the CPU of all three as the server's, and skips the
# freeze phase. Environment: SDK_BENCH_BUILD=0 skips the build; SDK_BENCH_DIR is where the data goes
# (/var/tmp).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/common.sh
source bench/common.sh
bin=build/release/bin

if [[ ${SDK_BENCH_BUILD:-1} != 0 ]]; then
  log "building Release"
  cmake --preset release >/dev/null
  cmake --build --preset release --target batond baton-bench-sdk-leases >/dev/null
fi

server=${SDK_BENCH_SERVER:-batond}
[[ $server == batond || $server == etcd ]] || { log "SDK_BENCH_SERVER must be batond or etcd"; exit 2; }

work=$(mktemp -d "${SDK_BENCH_DIR:-/var/tmp}/baton-sdk-leases.XXXXXX")
batond_pid="" bench_pid="" etcd_pids=()
cleanup() {
  [[ -n $bench_pid ]] && kill -TERM "$bench_pid" 2>/dev/null || true
  for p in "${etcd_pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${etcd_pids[@]}"; do wait "$p" 2>/dev/null || true; done
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


if [[ $server == etcd ]]; then
  command -v etcd >/dev/null || { log "etcd not found (deploy/install-deps.sh installs etcd-server)"; exit 1; }
  clients=() peers=() cluster=""
  for i in 0 1 2; do
    clients+=("$(free_port)")
    peers+=("$(free_port)")
    cluster+="${cluster:+,}m$i=http://127.0.0.1:${peers[$i]}"
  done
  for i in 0 1 2; do
    etcd --name "m$i" --data-dir "$work/m$i" \
      --listen-client-urls "http://127.0.0.1:${clients[$i]}" --advertise-client-urls "http://127.0.0.1:${clients[$i]}" \
      --listen-peer-urls "http://127.0.0.1:${peers[$i]}" --initial-advertise-peer-urls "http://127.0.0.1:${peers[$i]}" \
      --initial-cluster "$cluster" --initial-cluster-token baton-bench --logger zap --log-level warn \
      >"$work/m$i.out" 2>"$work/m$i.err" &
    etcd_pids+=($!)
  done
  url="etcd://127.0.0.1:${clients[0]},127.0.0.1:${clients[1]},127.0.0.1:${clients[2]}"
  healthy=0
  for _ in $(seq 300); do
    healthy=0
    for i in 0 1 2; do
      curl -sf "http://127.0.0.1:${clients[$i]}/health" 2>/dev/null | grep -q '"health":"true"' && healthy=$((healthy + 1))
    done
    [[ $healthy == 3 ]] && break
    sleep 0.1
  done
  if [[ $healthy != 3 ]]; then
    log "the etcd cluster did not become healthy:"
    tail -5 "$work"/m*.err >&2
    exit 1
  fi
  pids=$(IFS=,; echo "${etcd_pids[*]}")
  log "etcd $(etcd --version | head -1 | cut -d' ' -f3), 3 members $url (pids $pids); $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg)"
  server_args=(--server "$url" --server-cpu-pids "$pids")
else
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
  server_args=(--server "http://$addr" --server-pid "$batond_pid")
fi

# In the background, so a signal to this script interrupts the wait and the trap stops both.
"$bin/baton-bench-sdk-leases" "${server_args[@]}" "$@" &
bench_pid=$!
status=0
wait "$bench_pid" || status=$?
bench_pid=""
log "load average after the run: $(cut -d' ' -f1-3 /proc/loadavg)"
exit $status
