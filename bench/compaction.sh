#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Measures how much a background compaction delays durable answers while batond holds many locks.
#
#   bash bench/compaction.sh [--seconds 60] [--locks 200000] [--compact-bytes 8388608] [--no-build]
#
# Builds Release batond, starts it on loopback with its data on the real disk, fills the table with
# --locks held locks (distinct keys, TTL 1 h), then for --seconds runs two loads at once:
#   churn  --churn-conns connections doing acquire/release cycles on keys of --churn-key-bytes bytes, so the
#          log grows quickly and passes --compact-bytes again and again (each compaction then rewrites a
#          snapshot of all the held locks);
#   probe  a process of its own doing durable acquire + release cycles on one key in a closed loop, one
#          request at a time, timing each with CLOCK_MONOTONIC. It opens one connection per batond worker
#          thread, back to back before the churn connects (batond hands connections to its workers in
#          turn), and alternates between them, so every worker is sampled: worker 0 also runs the expiry
#          sweep, and a single connection would land on it or not depending on a race.
# Compactions are taken from batond's `wal_compacted` log lines (wall-clock timestamp of the end, `ms=`
# duration); a probe request counts as "during compaction" when it overlaps [end - ms, end]. The report
# gives the probe's p50/p99/max during compactions and outside them (also per worker), the slowest requests
# and where they fell, the writer's fsync histogram and where the CPU went. Exits 1 on a failed build, start or request.
#
# Options:
#   --seconds N          measured duration (default 60)
#   --locks N            held locks during the measurement (default 200000)
#   --compact-bytes N    batond --compact-bytes (default 8 MiB; the fill alone writes ~60 bytes per lock)
#   --churn-conns N      churn connections (default 4)
#   --churn-key-bytes N  key length of the churn locks, 16 to 512 (default 512; owner is half of it)
#   --fill-conns N       connections used to fill the table (default 32)
#   --threads N          batond --threads, and probe connections (default: the number of cores, as batond)
#   --dir DIR            where the temporary data directory goes; not tmpfs (default /var/tmp)
#   --goal-ms N          the goal for the max probe latency during compaction (default 20)
#   --no-build           use build/release/bin/batond as it is
#   --batond PATH        run this batond binary instead (implies --no-build; e.g. a copy with uprobes)
#   --keep               keep the temporary directory (batond's log, probe samples)
set -euo pipefail

cd "$(dirname "$0")/.."
# shellcheck source=bench/common.sh
source bench/common.sh
root=$(pwd)
batond=$root/build/release/bin/batond

seconds=60
locks=200000
compact_bytes=$((8 << 20))
churn_conns=4
churn_key_bytes=512
fill_conns=32
threads=""
base=/var/tmp
goal_ms=20
build=1


while (($#)); do
  case $1 in
    --seconds) seconds=$2; shift 2 ;;
    --locks) locks=$2; shift 2 ;;
    --compact-bytes) compact_bytes=$2; shift 2 ;;
    --churn-conns) churn_conns=$2; shift 2 ;;
    --churn-key-bytes) churn_key_bytes=$2; shift 2 ;;
    --fill-conns) fill_conns=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --dir) base=$2; shift 2 ;;
    --goal-ms) goal_ms=$2; shift 2 ;;
    --no-build) build=0; shift ;;
    --batond) batond=$2; build=0; shift 2 ;;
    --keep) keep=1; shift ;;
    -h | --help) usage 0 ;;
    *) log "unknown option $1"; usage 2 >&2 ;;
  esac
done
for n in "$seconds" "$locks" "$compact_bytes" "$churn_conns" "$churn_key_bytes" "$fill_conns" "$goal_ms"; do
  [[ $n =~ ^[0-9]+$ ]] || die "not a number: $n"
done
((churn_key_bytes >= 16 && churn_key_bytes <= 512)) || die "--churn-key-bytes must be 16 to 512"
((fill_conns >= 1 && churn_conns >= 1 && seconds >= 1)) || die "--seconds and the connection counts must be at least 1"
command -v python3 >/dev/null || die "python3 not found"
command -v curl >/dev/null || die "curl not found"

if ((build)); then
  log "building Release batond (build/release)"
  cmake --preset release >/dev/null
  cmake --build --preset release --target batond >/dev/null
fi
[[ -x $batond ]] || die "missing $batond (run without --no-build)"

# tmpfs would turn every fsync into a no-op, and the compaction's snapshot fsync is part of what is measured.
[[ $(stat -f -c %T "$base") != tmpfs ]] || die "$base is tmpfs; pass --dir on a real disk"
work=$(mktemp -d "$base/baton-compaction.XXXXXX")

server_pid=""
stop_server() {
  [[ -n $server_pid ]] || return 0
  local status=0
  kill -TERM "$server_pid" 2>/dev/null || true
  if ! timeout 10 tail --pid="$server_pid" -f /dev/null; then
    log "batond $server_pid ignored SIGTERM for 10 s; killing it"
    kill -KILL "$server_pid" 2>/dev/null || true
  fi
  wait "$server_pid" 2>/dev/null || status=$?
  server_pid=""
  return "$status"
}
client_pids=()
cleanup() {
  for p in "${client_pids[@]}"; do
    kill "$p" 2>/dev/null || true
  done
  stop_server || true
  if ((keep)); then
    log "kept $work (batond.stderr, probe.json, churn.json, metrics.*)"
  else
    rm -rf "$work"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The load clients and the report. The probe runs in a process of its own: sharing an interpreter with the
# churn threads would add the GIL's switch interval (5 ms) to its latencies.
helper=$(
  cat <<'PY'
import bisect, json, os, re, socket, sys, threading, time
from datetime import datetime, timezone


class connection:
    """One keep-alive HTTP/1.1 connection, one request at a time; cheap enough to keep up with batond."""

    def __init__(self, address):
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.host = address.encode()
        self.buf = b""

    def post(self, path, body):
        data = json.dumps(body, separators=(",", ":")).encode()
        self.sock.sendall(b"POST " + path.encode() + b" HTTP/1.1\r\nHost: " + self.host +
                          b"\r\nContent-Type: application/json\r\nContent-Length: " +
                          str(len(data)).encode() + b"\r\n\r\n" + data)
        while (end := self.buf.find(b"\r\n\r\n")) < 0:
            self._receive()
        head = self.buf[:end]
        length = re.search(rb"\r\ncontent-length: *([0-9]+)", head, re.I)
        if not length:
            raise RuntimeError("response without Content-Length: " + head[:200].decode(errors="replace"))
        total = end + 4 + int(length.group(1))
        while len(self.buf) < total:
            self._receive()
        status, reply = int(head[9:12]), self.buf[end + 4:total]
        self.buf = self.buf[total:]
        return status, reply

    def _receive(self):
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("batond closed the connection")
        self.buf += chunk


def cpu_seconds():
    t = os.times()
    return t.user + t.system


def in_threads(count, work):
    """Runs work(i) in `count` threads; returns the first exception any of them raised."""
    failures = []

    def run(i):
        try:
            work(i)
        except Exception as e:  # reported by the caller, which exits non-zero
            failures.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return failures[0] if failures else None


def fill(address, locks, conns):
    refused = []

    def work(i):
        c = connection(address)
        for n in range(i, locks, conns):
            status, reply = c.post(f"/v1/locks/held-{n:07d}/acquire", {"owner": "filler", "ttl_ms": 3600000})
            if status != 200:
                refused.append((n, status, reply[:200]))
                return

    started = time.monotonic()
    failure = in_threads(conns, work)
    elapsed = time.monotonic() - started
    if failure or refused:
        sys.exit(f"fill failed: {failure or refused[0]}")
    print(f"filled {locks} locks in {elapsed:.1f} s ({locks / elapsed:.0f}/s)")


def churn(address, conns, key_bytes, seconds, out):
    cycles = [0] * conns
    connected = threading.Barrier(conns + 1, timeout=30)
    deadline = None

    def work(i):
        c = connection(address)
        connected.wait()
        connected.wait()  # the deadline is set between the two
        key = f"churn-{i}-".ljust(key_bytes, "k")
        path_acquire, path_release = f"/v1/locks/{key}/acquire", f"/v1/locks/{key}/release"
        owner = f"churner-{i}-".ljust(key_bytes // 2, "o")
        while time.monotonic() < deadline:
            status, reply = c.post(path_acquire, {"owner": owner, "ttl_ms": 60000})
            if status != 200:
                raise RuntimeError(f"churn acquire: {status} {reply[:200]}")
            token = json.loads(reply)["token"]
            status, reply = c.post(path_release, {"owner": owner, "token": token})
            if status != 200:
                raise RuntimeError(f"churn release: {status} {reply[:200]}")
            cycles[i] += 1

    def start():
        nonlocal deadline
        connected.wait()
        deadline = time.monotonic() + seconds
        open(out + ".ready", "w").close()
        connected.wait()

    starter = threading.Thread(target=start)
    starter.start()
    failure = in_threads(conns, work)
    starter.join()
    with open(out, "w") as f:
        json.dump({"cycles": sum(cycles), "cpu_s": cpu_seconds(), "error": str(failure) if failure else None}, f)
    if failure:
        sys.exit(f"churn failed: {failure}")


def clock_offset_ns():
    """CLOCK_REALTIME minus CLOCK_MONOTONIC, from the tightest of a few readings (batond logs wall time)."""
    best = None
    for _ in range(20):
        m0 = time.monotonic_ns()
        w = time.time_ns()
        m1 = time.monotonic_ns()
        if best is None or m1 - m0 < best[0]:
            best = (m1 - m0, w - (m0 + m1) // 2)
    return best[1]


def probe(address, conns, seconds, out, start_after):
    connections = [connection(address) for _ in range(conns)]
    open(out + ".ready", "w").close()
    while not os.path.exists(start_after):  # the churn is connected and running
        time.sleep(0.01)
    owner = "probe"
    samples = []
    offset_before = clock_offset_ns()
    deadline = time.monotonic_ns() + seconds * 1_000_000_000
    error = None
    cycle = 0
    while error is None and time.monotonic_ns() < deadline:
        n = cycle % conns
        c = connections[n]
        cycle += 1
        token = None
        for op in ("acquire", "release"):
            body = {"owner": owner, "ttl_ms": 60000} if op == "acquire" else {"owner": owner, "token": token}
            t0 = time.monotonic_ns()
            status, reply = c.post(f"/v1/locks/probe/{op}", body)
            t1 = time.monotonic_ns()
            samples.append((op, t0, t1, n))
            if status != 200:
                error = f"probe {op}: {status} {reply[:200]}"
                break
            if op == "acquire":
                token = json.loads(reply)["token"]
    with open(out, "w") as f:
        json.dump({"offset_before_ns": offset_before, "offset_after_ns": clock_offset_ns(),
                   "cpu_s": cpu_seconds(), "error": error, "samples": samples}, f)
    if error:
        sys.exit(error)


def read_compactions(stderr_path, offset_ns):
    """The wal_compacted lines, each as a window [start, end] on CLOCK_MONOTONIC (ns)."""
    line_re = re.compile(r"^ts=(\S+) level=info event=wal_compacted (.*)$")
    out = []
    for line in open(stderr_path, errors="replace"):
        m = line_re.match(line)
        if not m:
            continue
        fields = dict(kv.split("=", 1) for kv in m.group(2).split())
        wall = datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)
        wall_ns = int(wall.timestamp()) * 1_000_000_000 + wall.microsecond * 1000
        ms = int(fields["ms"])
        # `ms` is truncated and the timestamp, taken just after it, to the millisecond: widen by 2 ms.
        end = wall_ns - offset_ns + 2_000_000
        start = end - (ms + 4) * 1_000_000
        out.append({"start": start, "end": end, "began": end - (ms + 2) * 1_000_000, "ms": ms, "entries": int(fields["entries"]),
                    "records": int(fields["records"]), "generation": int(fields["generation"])})
    return out


def percentile(sorted_values, q):
    if not sorted_values:
        return float("nan")
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def describe(name, latencies_ms):
    v = sorted(latencies_ms)
    if not v:
        return f"{name:<22} requests=0"
    return (f"{name:<22} requests={len(v):<7} p50_ms={percentile(v, 0.50):.2f} p99_ms={percentile(v, 0.99):.2f} "
            f"p999_ms={percentile(v, 0.999):.2f} max_ms={v[-1]:.2f}")


def histogram_counts(path, name):
    counts = {}
    for line in open(path):
        m = re.match(name + r'_bucket\{le="([^"]+)"\} ([0-9]+)', line)
        if m:
            counts[m.group(1)] = int(m.group(2))
    return counts


def cpu_report(before_path, after_path, clients_cpu_s):
    """Cores busy during the measurement: everything, batond, the load clients, and the rest."""
    before, after = [open(p).read().split() for p in (before_path, after_path)]
    # Files: CLK_TCK, uptime in seconds, the `cpu` line of /proc/stat (label dropped), batond's utime and stime.
    hz = int(after[0])
    seconds_measured = float(after[1]) - float(before[1])
    total_before, total_after = before[2:-2], after[2:-2]
    # All but idle, iowait and guest time (guest is counted in user already).
    busy = lambda f: sum(int(x) for i, x in enumerate(f) if i not in (3, 4, 8, 9))
    total = (busy(total_after) - busy(total_before)) / hz / seconds_measured
    server = (int(after[-2]) + int(after[-1]) - int(before[-2]) - int(before[-1])) / hz / seconds_measured
    clients = clients_cpu_s / seconds_measured
    return (f"cores busy (of {os.cpu_count()}): total={total:.2f} batond={server:.2f} load_clients={clients:.2f} "
            f"others={max(0.0, total - server - clients):.2f}")


def report(work, goal_ms, workers, accepted_before):
    p = json.load(open(f"{work}/probe.json"))
    ch = json.load(open(f"{work}/churn.json"))
    samples = p["samples"]
    offset = (p["offset_before_ns"] + p["offset_after_ns"]) // 2
    drift_ms = abs(p["offset_after_ns"] - p["offset_before_ns"]) / 1e6
    first, last = samples[0][1], samples[-1][2]
    seconds_measured = (last - first) / 1e9
    all_windows = read_compactions(f"{work}/batond.stderr", offset)
    windows = [w for w in all_windows if w["end"] >= first and w["start"] <= last]
    ends = [w["end"] for w in windows]

    def window_of(t0, t1):
        i = bisect.bisect_left(ends, t0)
        if i < len(windows) and windows[i]["start"] <= t1:
            return windows[i]
        return None

    during, outside, tagged = [], [], []
    at_cut = []  # the part of `during` that overlaps the first 10 ms: the cut and the new log's first writes
    per_connection = {}
    for op, t0, t1, n in samples:
        ms = (t1 - t0) / 1e6
        w = window_of(t0, t1)
        (during if w else outside).append(ms)
        if w and t0 <= w["began"] + 10_000_000:
            at_cut.append(ms)
        per_connection.setdefault((n, bool(w)), []).append(ms)
        tagged.append((ms, op, t0, n, w))

    print(f"measured {seconds_measured:.1f} s; churn {ch['cycles']} acquire/release cycles "
          f"({ch['cycles'] / seconds_measured:.0f}/s)")
    print(f"compactions: {len(all_windows)} in all, {len(windows)} overlapping the measurement")
    for w in all_windows:
        where = "measured" if w in windows else ("fill" if w["end"] < first else "after")
        print(f"  generation={w['generation']} entries={w['entries']} records={w['records']} ms={w['ms']} "
              f"({where}{', at +%.1f s' % ((w['end'] - first) / 1e9) if where == 'measured' else ''})")
    covered = sum(min(w["end"], last) - max(w["start"], first) for w in windows) / 1e9
    print(f"time inside compaction windows: {covered:.1f} s of {seconds_measured:.1f} s")
    print(describe("probe all", [t[0] for t in tagged]))
    print(describe("probe during compaction", during))
    print(describe("  in its first 10 ms", at_cut))
    print(describe("probe outside", outside))
    # batond hands accepted connections to its workers in turn; the fill and two metrics scrapes came first.
    worker = lambda n: (accepted_before + n) % workers
    for (n, in_window) in sorted(per_connection):
        print(describe(f"  worker {worker(n)} {'during' if in_window else 'outside'}", per_connection[n, in_window]))
    print("  (worker 0 also runs the once-a-second expiry sweep)")
    print("slowest probe requests:")
    for ms, op, t0, n, w in sorted(tagged, key=lambda t: -t[0])[:10]:
        at = f"+{(t0 - first) / 1e9:.2f} s"
        if w:
            into = (t0 - w["began"]) / 1e6
            where = (f"during compaction generation={w['generation']} ({w['ms']} ms), sent "
                     f"{abs(into):.0f} ms {'after' if into >= 0 else 'before'} it began")
        else:
            where = "outside compaction"
        print(f"  {ms:8.2f} ms {op:<8} worker {worker(n)} at {at:>9}  {where}")

    before = histogram_counts(f"{work}/metrics.before", "baton_wal_fsync_seconds")
    after = histogram_counts(f"{work}/metrics.after", "baton_wal_fsync_seconds")
    cumulative = [(le, after[le] - before.get(le, 0)) for le in after]
    buckets, previous = [], 0
    for le, c in cumulative:
        buckets.append(f"<={le}s:{c - previous}")
        previous = c
    print("writer fdatasync during the measurement (baton_wal_fsync_seconds): " + " ".join(buckets))
    print(cpu_report(f"{work}/cpu.before", f"{work}/cpu.after", p["cpu_s"] + ch["cpu_s"]))
    print(f"clock offset drift during the run: {drift_ms:.3f} ms")
    if not windows:
        print(f"goal: max probe latency during compaction <= {goal_ms} ms: NOT MEASURED (no compaction happened)")
        return 1
    if not during:
        print(f"goal: max probe latency during compaction <= {goal_ms} ms: NOT MEASURED (no probe overlapped one)")
        return 1
    worst = max(during)
    verdict = "met" if worst <= goal_ms else "NOT met"
    print(f"goal: max probe latency during compaction <= {goal_ms} ms: {worst:.2f} ms: {verdict}")
    return 0


mode = sys.argv[1]
if mode == "fill":
    fill(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
elif mode == "churn":
    churn(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6])
elif mode == "probe":
    probe(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6])
elif mode == "report":
    sys.exit(report(sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])))
else:
    sys.exit(f"unknown mode {mode}")
PY
)
py() { python3 -c "$helper" "$@"; }

# CLK_TCK, uptime, the cpu line of /proc/stat without its label, batond's utime and stime (fields 14 and
# 15; the comm field "(batond)" has no spaces).
cpu_snapshot() {
  {
    getconf CLK_TCK
    cut -d' ' -f1 /proc/uptime
    sed -n '1s/^cpu *//p' /proc/stat
    awk '{ print $14, $15 }' "/proc/$server_pid/stat"
  } | tr '\n' ' ' >"$1"
}

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "cpu: $(nproc) x $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)"
  echo "disk: $(findmnt -no SOURCE,FSTYPE -T "$work" | tr -s " ")"
  if [[ $batond == "$root/build/release/bin/batond" ]]; then
    echo "batond: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$root" diff --quiet HEAD -- server common 2>/dev/null || echo ' (with uncommitted changes in server/ or common/)')"
  else
    echo "batond: $batond"
  fi
  echo "options: --locks $locks --compact-bytes $compact_bytes --seconds $seconds --churn-conns $churn_conns --churn-key-bytes $churn_key_bytes${threads:+ --threads $threads}"
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
} >&2

thread_opt=()
[[ -n $threads ]] && thread_opt=(--threads "$threads")
"$batond" --data-dir "$work/data" --listen 127.0.0.1:0 --log-level info --max-ttl-ms 3600000 \
  --compact-bytes "$compact_bytes" "${thread_opt[@]}" >"$work/batond.stdout" 2>"$work/batond.stderr" &
server_pid=$!
address=""
for _ in $(seq 100); do
  if grep -q "batond listening on" "$work/batond.stdout"; then
    address=$(sed -n 's/^batond listening on //p' "$work/batond.stdout")
    break
  fi
  kill -0 "$server_pid" 2>/dev/null || break
  sleep 0.1
done
[[ -n $address ]] || {
  cat "$work/batond.stderr" >&2
  die "batond did not start"
}
log "batond pid=$server_pid on $address; filling $locks locks over $fill_conns connections"
py fill "$address" "$locks" "$fill_conns" >&2 || die "filling the table failed"
held=$(curl -sf "http://$address/metrics" | sed -n 's/^baton_locks_held \([0-9]*\).*/\1/p')
[[ $held == "$locks" ]] || die "batond reports $held held locks, expected $locks"

probe_conns=${threads:-$(nproc)}
log "measuring for $seconds s: $churn_conns churn connections, $probe_conns probe connections"
curl -sf "http://$address/metrics" >"$work/metrics.before"
cpu_snapshot "$work/cpu.before"
# The probe connects first, alone, so that its connections land on consecutive workers; it starts timing
# once the churn is connected and running.
py probe "$address" "$probe_conns" "$seconds" "$work/probe.json" "$work/churn.json.ready" &
client_pids+=($!)
wait_for() {
  for _ in $(seq 300); do
    [[ -e $1 ]] && return 0
    kill -0 "$2" 2>/dev/null || return 1
    sleep 0.05
  done
  return 1
}
wait_for "$work/probe.json.ready" "${client_pids[0]}" || die "the probe did not connect"
py churn "$address" "$churn_conns" "$churn_key_bytes" "$seconds" "$work/churn.json" &
client_pids+=($!)
failed=0
for p in "${client_pids[@]}"; do
  wait "$p" || failed=1
done
client_pids=()
cpu_snapshot "$work/cpu.after"
curl -sf "http://$address/metrics" >"$work/metrics.after"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
((failed == 0)) || die "a load client failed (see above)"

# batond lets a running compaction finish before it exits, so its line is in the log afterwards.
stop_server || die "batond exited with status $? on SIGTERM (log in $work/batond.stderr)"
grep -q "event=stopped" "$work/batond.stderr" || die "batond did not log a clean stop"
echo
# Connections batond accepted before the probe's: the fill's and the two metrics scrapes.
py report "$work" "$goal_ms" "$probe_conns" $((fill_conns + 2))
