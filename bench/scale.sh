#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A million held leases (issue 28, goal 4): what batond costs per lease, and what other requests see while
# that many are held, after a kill -9, and while they all expire.
#
#   bash bench/scale.sh [--leases 1000000] [--no-build] [--keep] [--perf]
#
# Builds Release, then, with batond's data on the real disk (fsync must be real):
#  0. reference: the probe against an empty batond (the disk's floor): open loop on 4 connections, first
#     acquires (each waits for an fsync), then renews of those locks (answered from memory, so a stall of
#     batond shows undiluted);
#  1. fill: baton-loadgen --acquire-count N acquires N distinct keys (32 connections) with TTL --ttl-ms;
#  2. held: batond's RSS and data files per lease, its CPU while merely holding them (10 s, no requests),
#     then the probe on other keys (p50/p99/max, latency from the intended send time);
#  3. recovery: a sample of leases read (owner, token), kill -9, batond started again on the same port;
#     recovery time is from the start to the first successful answer about a held key, with batond's CPU
#     until then; the sample is read again (each lease must be back with its owner and token), the probe
#     runs again;
#  4. expiry: a restart restores every lease for its TTL from the restart, so they all fall due in the same
#     second (the worst case for the expiry sweep); the probe's renews run from 2 s before that instant,
#     and acquire+release cycles (open loop, two durable requests each) alongside from 3 s before it.
# Figures go to stdout and, as key=value lines, to OUT/scale-N.txt (OUT: --out, default
# build/release/bench). With --perf, `perf record -g` samples batond while it holds the leases (step 2)
# and while it expires them (step 4), and the top of each profile goes to OUT/scale-N.perf-*.txt.
#
# Options:
#   --leases N       held leases (default $SCALE_LEASES or 1000000)
#   --ttl-ms N       their TTL; must outlast the fill and step 2 (default 60 s + 0.18 ms per lease)
#   --rate N         probe requests per second (default 200)
#   --seconds N      measured seconds of each probe (default 10)
#   --dir DIR        where the temporary data directory goes; not tmpfs (default /var/tmp)
#   --out DIR        where the results go (default build/release/bench)
#   --no-build       use build/release/bin as it is
#   --perf           profile batond with perf in steps 2 and 4
#   --keep           keep the temporary directory (batond's logs, probe output)
set -euo pipefail

cd "$(dirname "$0")/.."
# shellcheck source=bench/common.sh
source bench/common.sh
root=$(pwd)
bin=${BENCH_BIN:-$root/build/release/bin}

leases=${SCALE_LEASES:-1000000}
ttl_ms=""
rate=200
probe_seconds=10
base=${BENCH_DIR:-/var/tmp}
out=${BENCH_OUT:-$root/build/release/bench}
build=1
perf=0


while (($#)); do
  case $1 in
    --leases) leases=$2; shift 2 ;;
    --ttl-ms) ttl_ms=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --seconds) probe_seconds=$2; shift 2 ;;
    --dir) base=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --no-build) build=0; shift ;;
    --perf) perf=1; shift ;;
    --keep) keep=1; shift ;;
    -h | --help) usage 0 ;;
    *) log "unknown option $1"; usage 2 >&2 ;;
  esac
done
# The fill runs at about 10,000 acquires/s on the 2-core machine of docs/benchmarks.md.
[[ -n $ttl_ms ]] || ttl_ms=$((60000 + leases * 18 / 100))
for n in "$leases" "$ttl_ms" "$rate" "$probe_seconds"; do
  [[ $n =~ ^[0-9]+$ ]] || die "not a number: $n"
done
((leases >= 1000)) || die "--leases must be at least 1000"
command -v python3 >/dev/null || die "python3 not found"
((perf == 0)) || command -v perf >/dev/null || die "perf not found"

if ((build)); then
  log "building Release (build/release)"
  cmake --preset release >/dev/null
  cmake --build --preset release --target batond baton-loadgen >/dev/null
fi
[[ -x $bin/batond && -x $bin/baton-loadgen ]] || die "missing $bin/batond or $bin/baton-loadgen"
[[ $(stat -f -c %T "$base") != tmpfs ]] || die "$base is tmpfs; pass --dir on a real disk"
mkdir -p "$out"
work=$(mktemp -d "$base/baton-scale.XXXXXX")
results=$out/scale-$leases.txt
: >"$results"

server_pid=""
perf_pid=""
stop_server() {
  [[ -n $server_pid ]] || return 0
  kill -"${1:-TERM}" "$server_pid" 2>/dev/null || true
  for _ in $(seq 300); do
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
  server_pid=""
}
cleanup() {
  [[ -z $perf_pid ]] || kill -INT "$perf_pid" 2>/dev/null || true
  stop_server
  if ((keep)); then
    log "kept $work"
  else
    rm -rf "$work"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

load() { cut -d' ' -f1-3 /proc/loadavg; }
# record KEY VALUE: one figure, to the results file and the terminal.
record() {
  echo "$1=$2" >>"$results"
  log "$1=$2"
}
cpu_seconds() { awk -v hz="$(getconf CLK_TCK)" '{ printf "%.2f", ($14 + $15) / hz }' "/proc/$1/stat"; }
rss_bytes() { awk '/^VmRSS:/ { print $2 * 1024 }' "/proc/$1/status"; }

# Reads (sample FILE) or checks (check FILE) the leases the fill took, by key, over one keep-alive
# connection; waits for the first successful answer (ready), printing the seconds since START.
helper=$(
  cat <<'PY'
import http.client, json, sys, time
mode, port = sys.argv[1], int(sys.argv[2])
def keys(leases, conns=32, n=1000):
    # The fill's keys are "scale/<connection>/<i>", connection c taking about leases/conns of them.
    per = leases // conns
    return [f"scale%2F{k % conns}%2F{(k * 7919) % per}" for k in range(n)]
def get(c, key):
    c.request("GET", "/v1/locks/" + key)
    r = c.getresponse()
    return r.status, r.read()
if mode == "ready":
    # Started before batond (an interpreter takes a while to start): prints "polling", then the time of
    # the first 200 for a held key.
    key, start = keys(int(sys.argv[3]))[0], time.time()
    print("polling", flush=True)
    while time.time() < start + 300:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            if get(c, key)[0] == 200:
                print(f"{time.time():.3f}")
                break
        except OSError:
            pass
        time.sleep(0.002)
    else:
        sys.exit("no answer 300 s after the restart")
    sys.exit(0)
c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
leases, path = int(sys.argv[3]), sys.argv[4]
seen = {}
for key in keys(leases):
    status, body = get(c, key)
    seen[key] = json.loads(body) if status == 200 else None
if mode == "sample":
    json.dump(seen, open(path, "w"))
    print(sum(v is not None for v in seen.values()))
else:
    before = json.load(open(path))
    # Connections take keys at their own pace, so some sampled numbers were never acquired: only the
    # leases held before the kill count.
    held = {k: v for k, v in before.items() if v is not None}
    same = [k for k, v in held.items()
            if seen[k] is not None and (seen[k]["owner"], seen[k]["token"]) == (v["owner"], v["token"])]
    print(len(same), len(held))
PY
)

port=$(free_port)
url=http://127.0.0.1:$port
start_batond() {
  "$bin/batond" --data-dir "$work/data" --listen "127.0.0.1:$port" --log-level info \
    --max-locks $((leases + 10000)) >>"$work/batond.out" 2>>"$work/batond.err" &
  server_pid=$!
}
wait_listening() {
  for _ in $(seq 600); do
    [[ $(grep -c "batond listening on" "$work/batond.out" 2>/dev/null) -ge $1 ]] && return 0
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
  done
  cat "$work/batond.err" >&2
  die "batond did not start"
}
# probe NAME [SECONDS]: open loop on keys of its own, 4 connections: acquires (durable: each waits for an
# fsync), then renews of those locks (answered from memory: a stall of batond shows undiluted).
probe() {
  local name=$1 secs=${2:-$probe_seconds} lines op f
  curl -s "$url/metrics" >"$work/metrics-before" || true
  lines=$("$bin/baton-loadgen" --url "$url" --ops acquire,renew --conns 4 --rate "$rate" --seconds "$secs" \
    --warmup 1 --key-prefix "probe-$name" --ttl-ms 600000 --server-pid "$server_pid" \
    --json "$work/probe.jsonl" | grep '^target=') || true
  echo "$lines" >>"$work/probe.txt"
  for op in acquire renew; do
    for f in p50_ms p99_ms max_ms errors; do
      record "${name}_${op}_$f" "$(grep " op=$op " <<<"$lines" | sed -n "s/.* $f=\([0-9.]*\).*/\1/p")"
    done
  done
  record "${name}_probe_load" "\"$(load)\""
  # The log writer's batches meanwhile (the disk's share of a durable request's latency): how many, their
  # mean write+fsync time, and how many took over 25 ms.
  curl -s "$url/metrics" >"$work/metrics-after" || true
  record "${name}_fsyncs" "\"$(awk '
    { at = FILENAME == ARGV[1] ? "before" : "after" }
    /^baton_wal_fsync_seconds_(count|sum) / { v[at, $1] = $2 }
    /^baton_wal_fsync_seconds_bucket\{le="0.025"\}/ { v[at, "fast"] = $2 }
    END {
      n = v["after", "baton_wal_fsync_seconds_count"] - v["before", "baton_wal_fsync_seconds_count"]
      sum = v["after", "baton_wal_fsync_seconds_sum"] - v["before", "baton_wal_fsync_seconds_sum"]
      slow = n - (v["after", "fast"] - v["before", "fast"])
      printf "n=%d mean_ms=%.2f over_25ms=%d", n, n ? sum * 1000 / n : 0, slow
    }' "$work/metrics-before" "$work/metrics-after")\""
}
perf_start() {
  ((perf)) || return 0
  perf record -g -o "$work/perf-$1.data" -p "$server_pid" >/dev/null 2>&1 &
  perf_pid=$!
}
perf_stop() {
  ((perf)) || return 0
  kill -INT "$perf_pid" 2>/dev/null || true
  wait "$perf_pid" 2>/dev/null || true
  perf_pid=""
  perf report -i "$work/perf-$1.data" --no-children --percent-limit 1.5 --stdio -g none 2>/dev/null |
    grep -v '^#' | grep -v '^$' | head -40 >"$out/scale-$leases.perf-$1.txt" || true
  log "profile ($1): $out/scale-$leases.perf-$1.txt"
}

log "$leases leases, TTL $ttl_ms ms, probe $rate cycles/s for $probe_seconds s; $(nproc) cores; load $(load)"
record leases "$leases"
record commit "$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)$(
  git -C "$root" diff --quiet HEAD -- server 2>/dev/null || echo +modified)"
record batond_built "$(date -u -r "$bin/batond" +%Y-%m-%dT%H:%M:%SZ)"

# 0. The disk's floor: the same probe against an empty batond.
start_batond
wait_listening 1
probe empty 5
stop_server
rm -rf "$work/data"
: >"$work/batond.out"

# 1. Fill.
start_batond
wait_listening 1
rss_empty=$(rss_bytes "$server_pid")
fill_from=$(date +%s.%N)
fill=$("$bin/baton-loadgen" --url "$url" --acquire-count "$leases" --conns 32 --ttl-ms "$ttl_ms" \
  --key-prefix scale --server-pid "$server_pid" | head -1) || die "fill failed: $fill"
fill_s=$(echo "$(date +%s.%N) - $fill_from" | bc)
log "fill: $fill"
[[ $fill == *" errors=0 "* ]] || die "the fill had errors: $fill"
record fill_seconds "$fill_s"
record fill_per_s "$(sed -n 's/.* ops_per_s=\([0-9]*\).*/\1/p' <<<"$fill")"

# 2. Held.
sleep 2
rss=$(rss_bytes "$server_pid")
disk=$(du -sb "$work/data" | cut -f1)
record rss_mb $((rss >> 20))
record rss_bytes_per_lease $(((rss - rss_empty) / leases))
record disk_bytes_per_lease $((disk / leases))
perf_start held
cpu0=$(cpu_seconds "$server_pid")
sleep 10
record idle_cores "$(echo "scale=3; ($(cpu_seconds "$server_pid") - $cpu0) / 10" | bc)"
record idle_load "\"$(load)\""
probe held
perf_stop held

# 3. Recovery after kill -9.
python3 -c "$helper" sample "$port" "$leases" "$work/sample.json" >/dev/null
elapsed_ms=$(echo "($(date +%s.%N) - $fill_from) * 1000 / 1" | bc)
((elapsed_ms < ttl_ms)) || die "the leases expired before the restart; pass a longer --ttl-ms"
stop_server KILL
python3 -c "$helper" ready "$port" "$leases" >"$work/ready.txt" &
poller=$!
for _ in $(seq 100); do
  grep -qs polling "$work/ready.txt" && break
  sleep 0.05
done
restart_at=$(date +%s.%N)
start_batond
wait "$poller" || die "batond did not answer after the restart"
record recovery_seconds "$(echo "scale=3; ($(tail -1 "$work/ready.txt") - $restart_at) / 1" | bc)"
record recovery_cpu_seconds "$(cpu_seconds "$server_pid")"
record recovery_load "\"$(load)\""
wait_listening 2
read -r same total < <(python3 -c "$helper" check "$port" "$leases" "$work/sample.json")
record sample_back "$same/$total"
((same == total)) || log "WARNING: $((total - same)) sampled leases did not come back with their token"
record rss_after_recovery_mb $(($(rss_bytes "$server_pid") >> 20))
probe recovered

# 4. Expiry: every lease was restored for ttl_ms from the restart, so all fall due together. The probe is
# started so that its renews run from 2 s before that instant; a second probe of acquire+release cycles
# (two durable requests each) runs alongside from 3 s before it.
due=$(echo "$restart_at + $ttl_ms / 1000" | bc)
wait_s=$(echo "$due - $(date +%s.%N) - 4 - $probe_seconds" | bc)
[[ $wait_s == -* ]] || sleep "$wait_s"
perf_start expiring
probe expiring &
probe_pid=$!
wait_s=$(echo "$due - $(date +%s.%N) - 3" | bc)
[[ $wait_s == -* ]] || sleep "$wait_s"
cycle=$("$bin/baton-loadgen" --url "$url" --ops cycle --conns 4 --rate "$rate" --seconds "$probe_seconds" \
  --warmup 0 --key-prefix probe-cycle --ttl-ms 60000 | grep '^target=') || true
wait "$probe_pid" || true
for f in p50_ms p99_ms max_ms errors; do
  record "expiring_cycle_$f" "$(sed -n "s/.* $f=\([0-9.]*\).*/\1/p" <<<"$cycle")"
done
perf_stop expiring
held_now=$(curl -s "$url/metrics" | awk '/^baton_locks_held /{ print $2 }')
record held_after_expiry_with_probes "${held_now:-unknown}"

log "figures in $results"
cat "$results"
