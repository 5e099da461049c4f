#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Benchmarks batond against etcd (v3 JSON gateway) and Redis (SET NX PX, appendfsync always) with
# baton-loadgen, side by side in one run, and renders the tables and plots of docs/benchmarks.md.
#
#   bash bench/run.sh            # everything, about 24 minutes on the 2-vCPU machine of docs/benchmarks.md
#   bash bench/run.sh --quick    # fewer connection counts, shorter phases, no 100k-lease point: ~6 minutes
#
# Builds Release, then:
#  1. connection sweep: for each server and each connection count a fresh server on loopback, data on the
#     real disk (not tmpfs: fsync must be real); acquire, renew, release and cycle, closed loop;
#  2. side by side: acquire and release at 64 connections, BENCH_REPEATS rounds, each round every server
#     once on a fresh start, the order rotated from round to round (so a slow minute of a shared machine
#     does not fall on one server); the table gives each figure's median and spread (min-max) and the
#     median of the per-round ratios batond/Redis and batond/etcd;
#  3. open loop at 64 connections: acquire at 50 % and 80 % of the peak each server reached in step 1, at
#     fixed intended send times (baton-loadgen --rate), latency counted from the intended time;
#  4. wrk against batond: closed-loop acquire at 64 connections, an independent check of step 1's figure;
#  5. SDK sweep: one process holding 1k, 10k and 100k leases through the C++ SDK against batond, its CPU
#     and memory (baton-bench-sdk-leases, as bench/sdk-leases.sh runs it, without the freeze phase);
#  6. contention: 50 waiters on one key, queued and long-polling, and 1,000 queued (baton-bench-handoff):
#     requests per hand-off, arrival-order inversions, hand-off latency;
#  7. scale: batond holding a million leases (bench/scale.sh): RSS and disk per lease, a probe's latency
#     while they are held, after kill -9 and while they all expire, recovery time (about 10 minutes; 200k
#     leases and 3 minutes with --quick);
#  8. tables (table.md, sweep.md), data files (*.dat) and, if gnuplot is installed, SVG plots.
# Server CPU per operation comes from /proc/PID/stat (utime+stime), sampled by the load generator around
# each measured window. Every server is stopped on any exit (trap). Exits 1 if a build or a server start
# fails, 3 if some requests failed (the tables are still written).
#
# Environment (all optional; --quick changes the defaults marked q):
#   BENCH_SECONDS=3 (q 2)          measured seconds per operation in the sweep
#   BENCH_WARMUP=1                 warm-up seconds before each operation
#   BENCH_CONNS="1 4 16 64 256" (q "1 16 64")   connection counts of the sweep
#   BENCH_TARGETS="batond etcd redis"
#   BENCH_REPEATS=5 (q 2)          rounds of the side-by-side comparison; 0 skips step 2
#   BENCH_OPEN_SECONDS=5 (q 3)     measured seconds of each open-loop run; BENCH_OPEN=0 skips step 3
#   BENCH_HANDOFF=1                0 skips step 6 (the contention run)
#   BENCH_SCALE=1                  0 skips step 7 (the million held leases)
#   BENCH_SCALE_LEASES=1000000 (q 200000)   leases held in step 7
#   BENCH_WRK=1                    0 skips step 4
#   BENCH_SDK_LEASES="1000 10000 100000" (q "1000 10000")   empty skips step 5
#   BENCH_SDK_TTL=60s (q 15s)      lease TTL of the SDK sweep (at 15 s, 100k leases need 20,000 renews/s,
#                                  more than a 2-vCPU machine sustains next to batond)
#   BENCH_SDK_SECONDS=40 (q 10)    steady window of each SDK point: two renew periods (ttl/3), since leases
#                                  acquired in one burst renew in bursts
#   BENCH_DIR=/var/tmp             where the temporary data directories go (must not be tmpfs)
#   BENCH_OUT=build/release/bench  where results are kept
#   BENCH_BUILD=1                  set to 0 to skip the build
#   BENCH_BIN=build/release/bin    where batond, baton-loadgen and baton-bench-sdk-leases are taken from
#   BENCH_BATOND_THREADS           --threads for batond (default: its own default, the number of cores)
#   BENCH_MAX_OTHER_CORES=0.3, BENCH_RETRIES=1 (q 0)   re-measure a sweep or open-loop block once if other
#                                  processes took more than 0.3 cores during it (shared machines); the quieter
#                                  attempt is kept
set -euo pipefail

cd "$(dirname "$0")/.."
# shellcheck source=bench/common.sh
source bench/common.sh
root=$(pwd)

quick=0
for arg in "$@"; do
  case $arg in
    --quick) quick=1 ;;
    -h | --help)
      sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
      exit 0
      ;;
    *)
      echo "run.sh: unknown argument $arg (see --help)" >&2
      exit 2
      ;;
  esac
done
# q QUICK FULL: the default of a --quick run or of a full one.
if ((quick)); then
  q() { echo "$1"; }
else
  q() { echo "$2"; }
fi

seconds=${BENCH_SECONDS:-$(q 2 3)}
warmup=${BENCH_WARMUP:-1}
conns_list=${BENCH_CONNS:-$(q "1 16 64" "1 4 16 64 256")}
targets=${BENCH_TARGETS:-"batond etcd redis"}
open_seconds=${BENCH_OPEN_SECONDS:-$(q 3 5)}
sdk_leases=${BENCH_SDK_LEASES-$(q "1000 10000" "1000 10000 100000")}
sdk_seconds=${BENCH_SDK_SECONDS:-$(q 10 40)}
sdk_ttl=${BENCH_SDK_TTL:-$(q 15s 60s)}
scale_leases=${BENCH_SCALE_LEASES:-$(q 200000 1000000)}
repeats=${BENCH_REPEATS:-$(q 2 5)}
base=${BENCH_DIR:-/var/tmp}
out=${BENCH_OUT:-$root/build/release/bench}
bin=${BENCH_BIN:-$root/build/release/bin}
started=$(date +%s)


if [[ ${BENCH_BUILD:-1} != 0 ]]; then
  log "building Release"
  cmake --preset release >/dev/null
  cmake --build --preset release --target batond baton-loadgen baton-bench-sdk-leases baton-bench-handoff \
    >/dev/null
fi
[[ -x $bin/batond && -x $bin/baton-loadgen ]] || die "missing $bin/batond or $bin/baton-loadgen"
for t in $targets; do
  case $t in
    batond) ;;
    etcd) command -v etcd >/dev/null || die "etcd not found (deploy/install-deps.sh installs etcd-server)" ;;
    redis)
      if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null; then
        die "redis-server or redis-cli not found (deploy/install-deps.sh installs redis-server, redis-tools)"
      fi
      ;;
    *) die "unknown target $t in BENCH_TARGETS (batond, etcd, redis)" ;;
  esac
done

# tmpfs would turn every fsync into a no-op and make the durable figures meaningless.
[[ $(stat -f -c %T "$base") != tmpfs ]] || die "$base is tmpfs; set BENCH_DIR to a directory on a real disk"
work=$(mktemp -d "$base/baton-bench.XXXXXX")
mkdir -p "$out"
rm -f "$out"/*.dat "$out"/*.svg
results_txt=$out/results.txt
results_json=$out/results.jsonl
open_txt=$out/open-loop.txt
sdk_txt=$out/sdk.txt
compare_txt=$out/compare.txt
handoff_txt=$out/handoff.txt
: >"$compare_txt"
: >"$handoff_txt"
: >"$results_txt"
: >"$results_json"
: >"$open_txt"
: >"$sdk_txt"

server_pid=""
stop_server() {
  [[ -n $server_pid ]] || return 0
  kill -TERM "$server_pid" 2>/dev/null || true
  for _ in $(seq 100); do
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$server_pid" 2>/dev/null; then
    log "server $server_pid ignored SIGTERM for 10 s; killing it"
    kill -KILL "$server_pid" 2>/dev/null || true
  fi
  wait "$server_pid" 2>/dev/null || true
  server_pid=""
}
client_pid=""
cleanup() {
  [[ -z $client_pid ]] || kill "$client_pid" 2>/dev/null || true
  stop_server
  if ((keep)); then
    log "keeping $work for diagnosis (server data and output)"
  else
    rm -rf "$work"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# 256 connections, and 100k leases whose renews may each hold a socket: more than the usual 1024 files.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

server_url=""
# start_batond DIR [batond options...]
start_batond() {
  local dir=$1
  shift
  mkdir -p "$dir"
  local threads=()
  [[ -n ${BENCH_BATOND_THREADS:-} ]] && threads=(--threads "$BENCH_BATOND_THREADS")
  "$bin/batond" --data-dir "$dir/data" --listen 127.0.0.1:0 --log-level warn "${threads[@]}" "$@" \
    >"$dir/stdout" 2>"$dir/stderr" &
  server_pid=$!
  for _ in $(seq 100); do
    if grep -qs "batond listening on" "$dir/stdout"; then
      server_url="http://$(sed -n 's/^batond listening on //p' "$dir/stdout")"
      return 0
    fi
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
  done
  cat "$dir/stderr" >&2
  die "batond did not start (output in $dir)"
}

# etcd and Redis bind fixed ports: if another process took one between free_port and the bind, the server
# is started again on other ports (up to three times).
port_taken() { grep -qis "address already in use" "$@"; }

start_etcd() {
  local dir=$1 attempt
  for attempt in 1 2 3; do
    rm -rf "$dir"
    try_start_etcd "$dir" && return 0
    port_taken "$dir/stderr" || break
    log "etcd found its port taken; starting it again on other ports"
  done
  tail -20 "$dir/stderr" >&2
  die "etcd did not start (output in $dir)"
}

try_start_etcd() {
  local dir=$1
  mkdir -p "$dir"
  local client peer
  client=$(free_port)
  peer=$(free_port)
  etcd --name bench --data-dir "$dir/data" \
    --listen-client-urls "http://127.0.0.1:$client" --advertise-client-urls "http://127.0.0.1:$client" \
    --listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
    --initial-cluster "bench=http://127.0.0.1:$peer" --logger zap --log-level warn \
    >"$dir/stdout" 2>"$dir/stderr" &
  server_pid=$!
  for _ in $(seq 200); do
    kill -0 "$server_pid" 2>/dev/null || break
    if curl -sf -m 2 "http://127.0.0.1:$client/health" 2>/dev/null | grep -q '"health":"true"'; then
      server_url="http://127.0.0.1:$client"
      return 0
    fi
    sleep 0.1
  done
  stop_server
  return 1
}

# A throwaway Redis: loopback only, no RDB snapshots, every write in the append-only file and fsynced before
# the answer (appendfsync always: Redis's most durable setting, which a lock service needs to be compared
# with batond and etcd at all).
start_redis() {
  local dir=$1 attempt
  for attempt in 1 2 3; do
    rm -rf "$dir"
    try_start_redis "$dir" && return 0
    port_taken "$dir/redis.log" "$dir/stderr" || break
    log "redis-server found its port taken; starting it again on other ports"
  done
  tail -20 "$dir/redis.log" "$dir/stderr" >&2 2>/dev/null || true
  die "redis-server did not start (output in $dir)"
}

try_start_redis() {
  local dir=$1
  mkdir -p "$dir/data"
  local port
  port=$(free_port)
  redis-server --bind 127.0.0.1 --port "$port" --dir "$dir/data" --appendonly yes --appendfsync always \
    --save '' --daemonize no --logfile "$dir/redis.log" >"$dir/stdout" 2>"$dir/stderr" &
  server_pid=$!
  # Only ours is asked, and with a time limit: whatever else holds a taken port need not answer at all.
  for _ in $(seq 100); do
    kill -0 "$server_pid" 2>/dev/null || break
    if [[ $(timeout 2 redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null) == PONG ]]; then
      server_url="redis://127.0.0.1:$port"
      return 0
    fi
    sleep 0.1
  done
  stop_server
  return 1
}

# The machine, for the record: figures only mean something next to it.
fsync_probe() {
  # 500 appends of 100 bytes with O_DSYNC: roughly what one group commit costs the disk.
  local f=$work/fsync-probe elapsed
  elapsed=$(dd if=/dev/zero of="$f" bs=100 count=500 oflag=dsync,append conv=notrunc 2>&1 |
    sed -n 's/.* copied, \([0-9.]*\) s.*/\1/p')
  rm -f "$f"
  awk -v s="$elapsed" 'BEGIN { printf "%.3f ms per 100-byte O_DSYNC append", s * 1000 / 500 }'
}
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "cpu: $(nproc) x $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)"
  echo "memory: $(awk '/^MemTotal/ { printf "%.1f GB", $2 / 1048576 }' /proc/meminfo)"
  echo "disk ($(findmnt -no SOURCE,FSTYPE -T "$work" | tr -s " ")): $(fsync_probe)"
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
  [[ $targets != *etcd* ]] || echo "etcd: $(etcd --version 2>/dev/null | head -1)"
  [[ $targets != *redis* ]] || echo "redis: $(redis-server --version | head -1)"
  echo "batond: $bin/batond built $(date -u -r "$bin/batond" +%Y-%m-%dT%H:%M:%SZ); tree now at $(
    git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)$(
    git -C "$root" diff --quiet HEAD -- server sdk 2>/dev/null || echo ", server/ or sdk/ modified")"
  echo "settings: seconds=$seconds warmup=$warmup conns=\"$conns_list\" open_seconds=$open_seconds" \
    "sdk_leases=\"$sdk_leases\" sdk_seconds=$sdk_seconds sdk_ttl=$sdk_ttl repeats=$repeats quick=$quick" \
    "scale=${BENCH_SCALE:-1} scale_leases=$scale_leases"
} | tee "$out/machine.txt" >&2

# Runs one baton-loadgen block into $1 (text) and $2 (JSON lines) on a fresh server; the rest of the
# arguments go to baton-loadgen.
failed_requests=0
run_block() {
  local text=$1 json=$2 target=$3 conns=$4 dir=$5 status=0
  shift 5
  rm -rf "$dir" "$json"
  "start_$target" "$dir"
  log "$target pid=$server_pid $server_url conns=$conns $*"
  # In the background so that an interrupt reaches the trap at once instead of after the block.
  "$bin/baton-loadgen" --target "$target" --url "$server_url" --conns "$conns" \
    --warmup "$warmup" --server-pid "$server_pid" --json "$json" "$@" >"$text" &
  client_pid=$!
  wait "$client_pid" || status=$?
  client_pid=""
  cat "$text"
  # 3: measured, but some requests failed (the loadgen printed which); anything else is fatal.
  if ((status == 3)); then
    failed_requests=1
  elif ((status != 0)); then
    die "baton-loadgen failed with status $status against $target"
  fi
  if ! kill -0 "$server_pid" 2>/dev/null; then
    local exit_status=0
    wait "$server_pid" || exit_status=$?
    server_pid=""
    tail -20 "$dir/stderr" >&2
    ((exit_status > 128)) && die "$target was killed by signal $((exit_status - 128)) during the run (output in $dir)"
    die "$target exited with status $exit_status during the run (output in $dir)"
  fi
  stop_server
}

# The largest other_cores of a block: how much CPU something else took while it was measured.
block_noise() { sed -n 's/.* other_cores=\([-0-9.]*\).*/\1/p' "$1" | sort -g | tail -1; }

# On a shared machine another job can take a core in the middle of a block; such a block is measured again
# (up to BENCH_RETRIES times) and the quieter attempt kept in $work/best.txt and $work/best.jsonl.
max_other=${BENCH_MAX_OTHER_CORES:-0.3}
retries=${BENCH_RETRIES:-$(q 0 1)}
measure_block() {
  local target=$1 conns=$2 best_noise="" noise attempt
  shift 2
  for attempt in $(seq 0 "$retries"); do
    run_block "$work/block.txt" "$work/block.jsonl" "$target" "$conns" "$work/$target-$conns" "$@"
    noise=$(block_noise "$work/block.txt")
    noise=${noise:-0}
    if [[ -z $best_noise ]] || awk -v a="$noise" -v b="$best_noise" 'BEGIN { exit !(a < b) }'; then
      best_noise=$noise
      mv "$work/block.txt" "$work/best.txt"
      mv "$work/block.jsonl" "$work/best.jsonl"
    fi
    rm -f "$work/block.txt" "$work/block.jsonl"
    awk -v a="$noise" -v m="$max_other" 'BEGIN { exit !(a > m) }' || break
    log "other processes used up to $noise cores during $target conns=$conns $* (attempt $((attempt + 1)))"
  done
}

# 1. Connection sweep.
for target in $targets; do
  for conns in $conns_list; do
    measure_block "$target" "$conns" --seconds "$seconds"
    cat "$work/best.txt" >>"$results_txt"
    cat "$work/best.jsonl" >>"$results_json"
  done
done

# 2. Side by side at 64 connections, in alternating rounds: round r starts with the r-th server of the list.
if ((repeats > 0)); then
  read -r -a order <<<"$targets"
  for round in $(seq 1 "$repeats"); do
    for i in "${!order[@]}"; do
      target=${order[$(((i + round - 1) % ${#order[@]}))]}
      measure_block "$target" 64 --ops acquire,release --seconds "$seconds"
      sed "s/^target=/round=$round target=/" "$work/best.txt" | grep "^round=" >>"$compare_txt" || true
      cat "$work/best.jsonl" >>"$results_json"
    done
  done
fi

# A field of the key=value line for target $1, op $2, conns $3 in file $4 (closed-loop rows only).
field_of() {
  awk -v t="$1" -v o="$2" -v c="$3" -v k="$5" '
    /^target=/ && !/ rate=/ {
      delete f
      for (i = 1; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
      if (f["target"] == t && f["op"] == o && f["conns"] == c) v = f[k]
    }
    END { print v }' "$4"
}

# 3. Open loop at 64 connections, at fractions of each server's closed-loop acquire peak there.
if [[ ${BENCH_OPEN:-1} != 0 ]]; then
  for target in $targets; do
    peak=$(field_of "$target" acquire 64 "$results_txt" ops_per_s)
    if [[ -z $peak || $peak == 0 ]]; then
      log "no closed-loop acquire at 64 connections for $target: open loop skipped"
      continue
    fi
    for fraction in 0.5 0.8; do
      rate=$(awk -v p="$peak" -v f="$fraction" 'BEGIN { printf "%d", p * f }')
      measure_block "$target" 64 --ops acquire --rate "$rate" --seconds "$open_seconds"
      sed "s/^target=/fraction=$fraction peak=$peak target=/" "$work/best.txt" >>"$open_txt"
      cat "$work/best.jsonl" >>"$results_json"
    done
  done
fi

# 4. wrk, a load generator that shares no code with baton-loadgen, against batond's acquire at 64
# connections. A fresh key per request (the Lua request hook), one thread like baton-loadgen; wrk measures
# closed-loop latency, like step 1. Non-2xx answers make the run exit 3, like failed requests.
wrk_line=""
if [[ ${BENCH_WRK:-1} != 0 && $targets == *batond* ]]; then
  if command -v wrk >/dev/null; then
    cat >"$work/acquire.lua" <<'LUA'
-- Each request acquires a key nobody holds: wrk-<n>, n counting up on this thread.
local n = 0
request = function()
  n = n + 1
  return wrk.format("POST", "/v1/locks/wrk%2F" .. n .. "/acquire",
    { ["Content-Type"] = "application/json" }, '{"owner":"wrk","ttl_ms":3600000}')
end
LUA
    start_batond "$work/batond-wrk"
    log "wrk against batond pid=$server_pid $server_url conns=64"
    wrk -t1 -c64 -d"${seconds}s" --latency -s "$work/acquire.lua" "$server_url" >"$work/wrk.txt" 2>&1 &
    client_pid=$!
    wait "$client_pid" || die "wrk failed: $(cat "$work/wrk.txt")"
    client_pid=""
    stop_server
    cat "$work/wrk.txt" >&2
    cp "$work/wrk.txt" "$out/wrk.txt"
    wrk_line=$(awk '
      /Requests\/sec:/ { rps = $2 }
      /^ +50%/ { p50 = $2 } /^ +99%/ { p99 = $2 }
      /Non-2xx/ { bad = $NF }
      END { printf "wrk_ops_per_s=%s wrk_p50=%s wrk_p99=%s wrk_non_2xx=%d", rps, p50, p99, bad }' "$work/wrk.txt")
    [[ $wrk_line == *wrk_non_2xx=0 ]] || failed_requests=1
  else
    log "wrk not installed: cross-check skipped"
  fi
fi

# 5. SDK sweep: client CPU and memory against the number of held leases.
if [[ -n $sdk_leases && $targets == *batond* ]]; then
  [[ -x $bin/baton-bench-sdk-leases ]] || die "missing $bin/baton-bench-sdk-leases"
  for leases in $sdk_leases; do
    start_batond "$work/batond-sdk-$leases"
    log "SDK holding $leases leases against batond pid=$server_pid $server_url"
    status=0
    "$bin/baton-bench-sdk-leases" --server "$server_url" --server-cpu-pids "$server_pid" --leases "$leases" \
      --ttl "$sdk_ttl" --seconds "${sdk_seconds}s" --cycle-seconds 0 >"$work/sdk.txt" 2>&1 &
    client_pid=$!
    wait "$client_pid" || status=$?
    client_pid=""
    stop_server
    cat "$work/sdk.txt" >&2
    ((status == 0 || status == 3)) || die "baton-bench-sdk-leases failed with status $status at $leases leases"
    ((status == 0)) || failed_requests=1
    { grep "^phase=" "$work/sdk.txt" || true; } | sed "s/^/leases_point=$leases /" >>"$sdk_txt"
  done
fi
# 6. Contention: waiters on one key against batond (docs/benchmarks.md, "Waiting for a lock").
if [[ ${BENCH_HANDOFF:-1} != 0 && $targets == *batond* ]]; then
  [[ -x $bin/baton-bench-handoff ]] || die "missing $bin/baton-bench-handoff"
  for run in "50 queue 20 50" "50 poll 20 50" "1000 queue 20 5"; do
    read -r waiters mode arrival hold <<<"$run"
    # Each waiter is a client of its own, with its own connection, all from 127.0.0.1.
    start_batond "$work/batond-handoff-$waiters-$mode" --max-connections-per-address 4000 \
      --max-waiters-per-key 4000
    log "hand-off: $waiters waiters, $mode, against batond pid=$server_pid $server_url"
    status=0
    "$bin/baton-bench-handoff" --server "$server_url" --waiters "$waiters" --mode "$mode" \
      --arrival-ms "$arrival" --hold-ms "$hold" >"$work/handoff.txt" 2>&1 &
    client_pid=$!
    wait "$client_pid" || status=$?
    client_pid=""
    stop_server
    cat "$work/handoff.txt" >&2
    ((status == 0)) || die "baton-bench-handoff failed with status $status ($waiters waiters, $mode)"
    { grep "^mode=" "$work/handoff.txt" || true; } | sed "s/^/waiters_point=$waiters /" >>"$handoff_txt"
  done
fi

# 7. A million held leases (bench/scale.sh; docs/benchmarks.md, "A million held leases").
scale_txt=$out/scale.txt
: >"$scale_txt"
if [[ ${BENCH_SCALE:-1} != 0 && $targets == *batond* ]]; then
  log "scale: batond holding $scale_leases leases (bench/scale.sh)"
  status=0
  BENCH_BIN=$bin BENCH_DIR=$base bash bench/scale.sh --no-build --leases "$scale_leases" --out "$work/scale" ||
    status=$?
  if ((status == 0)); then
    cp "$work/scale/scale-$scale_leases.txt" "$scale_txt"
    # Every sampled lease back with its token, and no failed probe request.
    if ! grep -q '^sample_back=\([0-9]*\)/\1$' "$scale_txt" || grep -q '_errors=[1-9]' "$scale_txt"; then
      log "WARNING: leases lost or probe requests failed in the scale run (see $scale_txt)"
      failed_requests=1
    fi
  else
    log "WARNING: bench/scale.sh failed with status $status"
    failed_requests=1
  fi
fi
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/machine.txt" >&2

# 8. Tables, data files, plots.
# Parsing key=value lines: f[] holds the fields of the current line.
# shellcheck disable=SC2016 # awk code, expanded by awk
kv_awk='function parse() { delete f; for (i = 1; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] } }
function show(v) { return v == "" ? "-" : v }'


# Side by side at 64 connections, with the ratios.
awk -v wrk="$wrk_line" "$kv_awk"'
  /^target=/ && !/ rate=/ {
    parse()
    if (f["conns"] != 64) next
    k = f["op"]; if (!(k in seen)) { seen[k] = 1; order[++n] = k }
    t = f["target"]; ops[t, k] = f["ops_per_s"]; p50[t, k] = f["p50_ms"]; p99[t, k] = f["p99_ms"]
    p999[t, k] = f["p999_ms"]; cpu[t, k] = f["server_cpu_us_per_op"]; other[t, k] = f["other_cores"]
  }
  function cols(t, k) { return sprintf("%s | %s | %s | %s | %s", show(ops[t, k]), show(p50[t, k]), show(p99[t, k]), show(p999[t, k]), show(cpu[t, k])) }
  function ratio(a, b) { return (a != "" && b > 0) ? sprintf("%.2f×", a / b) : "-" }
  END {
    print "Closed loop, 64 connections (latencies in ms, CPU = server CPU µs per operation):"
    print ""
    print "| op | batond ops/s | p50 | p99 | p99.9 | CPU | etcd ops/s | p50 | p99 | p99.9 | CPU | Redis ops/s | p50 | p99 | p99.9 | CPU | batond/etcd | batond/Redis | other cores (b/e/r) |"
    print "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    for (i = 1; i <= n; i++) {
      k = order[i]
      printf "| %s | %s | %s | %s | %s | %s | %s/%s/%s |\n", k, cols("batond", k), cols("etcd", k), cols("redis", k),
        ratio(ops["batond", k], ops["etcd", k]), ratio(ops["batond", k], ops["redis", k]),
        show(other["batond", k]), show(other["etcd", k]), show(other["redis", k])
    }
    if (wrk != "") {
      split(wrk, w, " "); for (i in w) { split(w[i], kv, "="); g[kv[1]] = kv[2] }
      printf "\nwrk cross-check, batond acquire at 64 connections: %s ops/s, p50 %s, p99 %s, non-2xx %s", g["wrk_ops_per_s"], g["wrk_p50"], g["wrk_p99"], g["wrk_non_2xx"]
      if (ops["batond", "acquire"] > 0) printf " (baton-loadgen: %s ops/s)", ops["batond", "acquire"]
      print ""
    }
  }' "$results_txt" >"$out/table.md"

# Side by side in alternating rounds: medians, spreads, and the medians of the per-round ratios.
if [[ -s $compare_txt ]]; then
  awk -v rounds="$repeats" "$kv_awk"'
    function median(list, n,   a, i, j, x) {
      n = split(list, a, " ")
      if (n == 0) return ""
      for (i = 2; i <= n; i++) { x = a[i] + 0; for (j = i - 1; j >= 1 && a[j] + 0 > x; j--) a[j + 1] = a[j]; a[j + 1] = x }
      return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    function lo(list,   a, n, i, m) { n = split(list, a, " "); m = a[1] + 0; for (i = 2; i <= n; i++) if (a[i] + 0 < m) m = a[i] + 0; return m }
    function hi(list,   a, n, i, m) { n = split(list, a, " "); m = a[1] + 0; for (i = 2; i <= n; i++) if (a[i] + 0 > m) m = a[i] + 0; return m }
    function fig(list, fmt) { return list == "" ? "-" : sprintf(fmt " (" fmt "–" fmt ")", median(list), lo(list), hi(list)) }
    /^round=/ {
      parse()
      t = f["target"]; o = f["op"]; r = f["round"]
      if (!(o in seen)) { seen[o] = 1; ops_order[++nops] = o }
      ops[t, o] = ops[t, o] " " f["ops_per_s"]; p99[t, o] = p99[t, o] " " f["p99_ms"]
      cpu[t, o] = cpu[t, o] " " f["server_cpu_us_per_op"]; at[t, o, r] = f["ops_per_s"]
    }
    END {
      print ""
      print "Side by side at 64 connections, " rounds " alternating rounds (median, and min–max over the rounds; CPU = server CPU µs per operation):"
      print ""
      print "| op | server | ops/s | p99 ms | CPU µs/op |"
      print "|---|---|---:|---:|---:|"
      split("batond etcd redis", ts, " ")
      for (i = 1; i <= nops; i++)
        for (k = 1; k <= 3; k++) {
          t = ts[k]; o = ops_order[i]
          if (ops[t, o] == "") continue
          printf "| %s | %s | %s | %s | %s |\n", o, t, fig(ops[t, o], "%.0f"), fig(p99[t, o], "%.2f"), fig(cpu[t, o], "%.1f")
        }
      print ""
      print "| op | batond/Redis, median of rounds (min–max) | batond/etcd, median of rounds (min–max) |"
      print "|---|---:|---:|"
      for (i = 1; i <= nops; i++) {
        o = ops_order[i]; rr = ""; re = ""
        for (r = 1; r <= rounds; r++) {
          if (at["batond", o, r] > 0 && at["redis", o, r] > 0) rr = rr " " at["batond", o, r] / at["redis", o, r]
          if (at["batond", o, r] > 0 && at["etcd", o, r] > 0) re = re " " at["batond", o, r] / at["etcd", o, r]
        }
        printf "| %s | %s | %s |\n", o, fig(rr, "%.2f×"), fig(re, "%.2f×")
        rmed[o] = (rr == "") ? "" : median(rr)
        emed[o] = (re == "") ? "" : median(re)
        bp99[o] = median(p99["batond", o]); bcpu[o] = median(cpu["batond", o])
      }
      print ""
      print "Goals (issue \"Performance, third round\"), on the medians of this run:"
      for (i = 1; i <= nops; i++) {
        o = ops_order[i]
        if (rmed[o] != "") printf "- %s >= 1.0x Redis: %.2fx: %s\n", o, rmed[o], ((rmed[o] >= 1.0) ? "met" : "NOT met")
        if (emed[o] != "") printf "- %s >= 8x etcd: %.2fx: %s\n", o, emed[o], ((emed[o] >= 8) ? "met" : "NOT met")
        if (bp99[o] != "") printf "- %s p99 <= 5 ms: %.2f ms: %s\n", o, bp99[o], ((bp99[o] <= 5) ? "met" : "NOT met")
        if (bcpu[o] != "") printf "- %s <= 15 µs of batond CPU: %.1f µs: %s\n", o, bcpu[o], ((bcpu[o] <= 15) ? "met" : "NOT met")
      }
    }' "$compare_txt" >>"$out/table.md"
fi

# Contention.
if [[ -s $handoff_txt ]]; then
  awk "$kv_awk"'
    BEGIN {
      print ""
      print "Waiting for one key on batond (baton-bench-handoff; hand-off: from the holder sending its release, and from its release"
      print "being answered, to the next holder holding; ms):"
      print ""
      print "| waiters | mode | requests per hand-off | inversions | from release sent: p50 | p99 | from release answered: p50 | p99 | max |"
      print "|---:|---|---:|---:|---:|---:|---:|---:|---:|"
    }
    /^waiters_point=/ {
      parse()
      printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", f["waiters_point"], f["mode"], show(f["requests_per_handoff"]),
        show(f["inversions"]), show(f["sent_p50_ms"]), show(f["sent_p99_ms"]), show(f["answered_p50_ms"]), show(f["answered_p99_ms"]),
        show(f["answered_max_ms"])
    }' "$handoff_txt" >>"$out/table.md"
fi

# Open loop.
if [[ -s $open_txt ]]; then
  awk "$kv_awk"'
    BEGIN {
      print ""
      print "Open loop, acquire at 64 connections, latency from the intended send time (ms):"
      print ""
      print "| server | closed-loop peak/s | load | rate/s | achieved/s | p50 | p99 | p99.9 | max | started > 1 ms late (load generator woke late) | unsent | errors | other cores |"
      print "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    }
    /^fraction=/ {
      parse()
      printf "| %s | %s | %d %% | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", f["target"], f["peak"], f["fraction"] * 100,
        f["rate"], f["ops_per_s"], f["p50_ms"], f["p99_ms"], f["p999_ms"], f["max_ms"], f["late"] " (" f["late_wakeups"] ")", f["unsent"], f["errors"], show(f["other_cores"])
    }' "$open_txt" >>"$out/table.md"
fi

# SDK sweep.
if [[ -s $sdk_txt ]]; then
  awk "$kv_awk"'
    BEGIN {
      print ""
      print "SDK holding leases against batond (ttl '"$sdk_ttl"', renewed every ttl/3 ± 20 %; steady window):"
      print ""
      print "| leases | acquire/s | client cores | client CPU µs/renew | renews/s | renew p99 ms | RSS per lease | RSS MiB | losses | other cores |"
      print "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    }
    /phase=acquire/ { parse(); acq[f["leases_point"]] = f["acquires_per_s"] }
    /phase=steady/ {
      parse()
      printf "| %s | %s | %s | %s | %s | %s | %s B | %.0f | %s | %s |\n", f["leases_point"], show(acq[f["leases_point"]]), f["client_cores"],
        f["client_cpu_per_renew_us"], f["renews_per_s"], f["renew_p99_ms"], f["rss_per_lease_bytes"], f["rss_steady_kib"] / 1024,
        f["losses"], f["other_cores"]
    }' "$sdk_txt" >>"$out/table.md"
fi

# A million held leases (step 7).
if [[ -s $scale_txt ]]; then
  awk -F= '
    { v[$1] = $2; gsub(/"/, "", v[$1]) }
    function row(name, p) {
      printf "| %s | %s | %s | %s | %s | %s | %s |\n", name, v[p "_acquire_p50_ms"], v[p "_acquire_p99_ms"], v[p "_renew_p50_ms"],
        v[p "_renew_p99_ms"], v[p "_renew_max_ms"], v[p "_probe_load"]
    }
    END {
      print ""
      printf "batond holding %s leases (bench/scale.sh): RSS %s MiB, %s B per lease; data files %s B per lease; CPU while holding %s cores;\n",
        v["leases"], v["rss_mb"], v["rss_bytes_per_lease"], v["disk_bytes_per_lease"], v["idle_cores"]
      printf "after kill -9: first answer in %s s (%s s of CPU), sampled leases back %s. Probe on other keys, 200/s open loop:\n",
        v["recovery_seconds"], v["recovery_cpu_seconds"], v["sample_back"]
      print ""
      print "| while | acquire p50 ms | acquire p99 ms | renew p50 ms | renew p99 ms | renew max ms | load |"
      print "|---|---:|---:|---:|---:|---:|---|"
      row("empty server", "empty"); row("held", "held"); row("after the restart", "recovered"); row("all expiring", "expiring")
      printf "\nacquire+release cycles while all expire: p50 %s ms, p99 %s ms, max %s ms\n", v["expiring_cycle_p50_ms"],
        v["expiring_cycle_p99_ms"], v["expiring_cycle_max_ms"]
    }' "$scale_txt" >>"$out/table.md"
fi

# The goals this benchmark exists to check, at 64 connections.
awk "$kv_awk"'
  /^target=/ && !/ rate=/ {
    parse()
    if (f["conns"] != 64) next
    ops[f["target"], f["op"]] = f["ops_per_s"]; p99[f["target"], f["op"]] = f["p99_ms"]
  }
  function verdict(ok) { return ok ? "met" : "NOT met" }
  END {
    print ""
    print "Goals at 64 connections (this run only):"
    if (!(("batond", "acquire") in ops)) { print "- not measured (BENCH_CONNS has no 64 or batond was skipped)"; exit }
    printf "- acquire >= 40000/s with p99 <= 5 ms: %s/s, p99 %s ms: %s\n", ops["batond", "acquire"], p99["batond", "acquire"],
      verdict(ops["batond", "acquire"] >= 40000 && p99["batond", "acquire"] <= 5)
    printf "- renew >= 60000/s: %s/s: %s\n", ops["batond", "renew"], verdict(ops["batond", "renew"] >= 60000)
    split("acquire renew release cycle", names, " ")
    for (i = 1; i <= 4; i++) {
      o = names[i]
      if (ops["etcd", o] > 0)
        printf "- %s >= 7x etcd: %.2fx: %s\n", o, ops["batond", o] / ops["etcd", o], verdict(ops["batond", o] >= 7 * ops["etcd", o])
    }
    for (i = 1; i <= 4; i++) {
      o = names[i]
      if (ops["redis", o] > 0)
        printf "- %s >= 0.9x Redis: %.2fx: %s\n", o, ops["batond", o] / ops["redis", o], verdict(ops["batond", o] >= 0.9 * ops["redis", o])
    }
  }' "$results_txt" >>"$out/table.md"

# Every sweep row, long form.
awk "$kv_awk"'
  BEGIN {
    print "| server | op | conns | ops/s | p50 ms | p99 ms | p99.9 ms | max ms | server CPU µs/op | errors | other cores |"
    print "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
  }
  /^target=/ && !/ rate=/ {
    parse()
    printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", f["target"], f["op"], f["conns"], f["ops_per_s"],
      f["p50_ms"], f["p99_ms"], f["p999_ms"], f["max_ms"], show(f["server_cpu_us_per_op"]), f["errors"], show(f["other_cores"])
  }' "$results_txt" >"$out/sweep.md"

# Data files for the plots: one per operation, "conns ops/s(b e r) p99(b e r)", "?" where not measured.
for op in acquire renew release cycle; do
  awk -v op="$op" -v conns_list="$conns_list" "$kv_awk"'
    /^target=/ && !/ rate=/ {
      parse()
      if (f["op"] != op) next
      ops[f["target"], f["conns"]] = f["ops_per_s"]; p99[f["target"], f["conns"]] = f["p99_ms"]
    }
    function v(x) { return x == "" ? "?" : x }
    END {
      print "# conns batond_ops etcd_ops redis_ops batond_p99_ms etcd_p99_ms redis_p99_ms"
      n = split(conns_list, cs, " ")
      for (i = 1; i <= n; i++) {
        c = cs[i]
        print c, v(ops["batond", c]), v(ops["etcd", c]), v(ops["redis", c]), v(p99["batond", c]), v(p99["etcd", c]), v(p99["redis", c])
      }
    }' "$results_txt" >"$out/sweep-$op.dat"
done
if [[ -s $sdk_txt ]]; then
  awk "$kv_awk"'
    BEGIN { print "# leases client_cores client_cpu_us_per_renew rss_per_lease_bytes rss_steady_mib" }
    /phase=steady/ { parse(); print f["leases_point"], f["client_cores"], f["client_cpu_per_renew_us"], f["rss_per_lease_bytes"], f["rss_steady_kib"] / 1024 }' \
    "$sdk_txt" >"$out/sdk.dat"
fi

if command -v gnuplot >/dev/null; then
  stamp="$(sed -n 's/^date: //p' "$out/machine.txt"), $(nproc) vCPU shared by server and load generator"
  for op in acquire renew release cycle; do
    [[ -s $results_txt ]] || break
    gnuplot <<GNUPLOT || log "gnuplot failed for $op"
set terminal svg size 760,460 dynamic font "sans,12" background rgb "white"
set datafile missing "?"
set key top left
set grid
set logscale x 2
set xlabel "connections (closed loop)"
set xtics (1, 4, 16, 64, 256)
set title "$op: throughput against connections\n{/*0.8 $stamp}"
set ylabel "$op/s"
set yrange [0:*]
set output "$out/$op-throughput.svg"
plot "$out/sweep-$op.dat" using 1:2 with linespoints lw 2 pt 7 title "batond", \
     "" using 1:3 with linespoints lw 2 pt 5 title "etcd", \
     "" using 1:4 with linespoints lw 2 pt 9 title "Redis (appendfsync always)"
set title "$op: p99 latency against connections\n{/*0.8 $stamp}"
set ylabel "p99 latency, ms (log scale)"
set logscale y 10
set yrange [*:*]
set output "$out/$op-p99.svg"
plot "$out/sweep-$op.dat" using 1:5 with linespoints lw 2 pt 7 title "batond", \
     "" using 1:6 with linespoints lw 2 pt 5 title "etcd", \
     "" using 1:7 with linespoints lw 2 pt 9 title "Redis (appendfsync always)"
GNUPLOT
  done
  if [[ -s $sdk_txt ]]; then
    gnuplot <<GNUPLOT || log "gnuplot failed for the SDK plots"
set terminal svg size 760,460 dynamic font "sans,12" background rgb "white"
set key top left
set grid
set logscale x 10
set xlabel "leases held by one process (ttl $sdk_ttl)"
set title "SDK: client CPU against held leases\n{/*0.8 $stamp}"
set ylabel "client CPU, cores"
set y2label "µs of CPU per renew"
set ytics nomirror
set y2tics
set yrange [0:*]
set y2range [0:*]
set output "$out/sdk-cpu.svg"
plot "$out/sdk.dat" using 1:2 axes x1y1 with linespoints lw 2 pt 7 title "client cores", \
     "" using 1:3 axes x1y2 with linespoints lw 2 pt 5 dt 2 title "µs per renew (right)"
set title "SDK: client memory against held leases\n{/*0.8 $stamp}"
set ylabel "RSS, MiB"
set y2label "RSS per lease, bytes"
set output "$out/sdk-memory.svg"
plot "$out/sdk.dat" using 1:5 axes x1y1 with linespoints lw 2 pt 7 title "RSS in steady state", \
     "" using 1:4 axes x1y2 with linespoints lw 2 pt 5 dt 2 title "RSS per lease (right)"
GNUPLOT
  fi
else
  log "gnuplot not installed: no plots (deploy/install-deps.sh installs gnuplot-nox)"
fi

elapsed=$(($(date +%s) - started))
echo "elapsed: ${elapsed} s" | tee -a "$out/machine.txt" >&2
echo
cat "$out/table.md"
echo
log "results in $out (table.md, sweep.md, results.txt, results.jsonl, compare.txt, open-loop.txt, sdk.txt," \
  "handoff.txt, scale.txt, *.dat, *.svg, machine.txt)"
if ((failed_requests)); then
  log "WARNING: some requests failed or leases were lost; see the WARNING lines above. The figures are not clean."
  exit 3
fi
