#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The chaos run: real processes on loopback, faults from a seed, then the history checker.

See docs/reliability.md. Started through tests/chaos/run.sh; --help lists the options.
"""

import argparse
import errno
import http.client
import json
import os
import random
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

ALL_FAULTS = [
    "delay", "drop_replies", "drop_requests", "duplicate", "reorder", "reset", "pause_worker", "pause_server",
    "kill_server", "kill_server_in_commit", "partition", "disk_full",
    "disk_stall", "fsync_eio", "disk_enospc", "kill_in_snapshot", "bitflip", "stale_write", "power_cut",
]
ROOT_FAULTS = {"partition": "needs root for ip netns and a veth pair",
               "disk_full": "needs root to mount a tmpfs"}
# Faults of batond's data directory through the storage fault injector (tests/faultfs), preloaded into batond.
FAULTFS_FAULTS = {"disk_stall", "fsync_eio", "disk_enospc", "kill_in_snapshot", "power_cut"}
STORAGE_FAULTS = FAULTFS_FAULTS | {"bitflip"}
SERVER_FAULTS = {"pause_server", "kill_server", "kill_server_in_commit", "disk_full"} | STORAGE_FAULTS
# Faults that speak batond's own API or need its small data directory.
BATOND_ONLY_FAULTS = {"kill_server_in_commit": "its acquire burst speaks batond's API",
                      "disk_full": "etcd preallocates 64 MB log segments; the tmpfs is for batond",
                      **{f: "it injects faults into batond's log and snapshot" for f in STORAGE_FAULTS}}
# batond's exit statuses (docs/design.md): a write, fsync or rename of its files failed; its log is damaged.
EXIT_STORAGE_FAILED, EXIT_DATA_DAMAGED = 74, 65
# How long batond may take to exit after a storage failure, or to refuse a damaged log (a sanitizer build on
# a loaded machine starts in a few seconds; this is several times that).
EXIT_BOUND_S = 20


def now_us():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000


def parse_duration(text):
    m = re.fullmatch(r"(\d+)(ms|s|m|h)?", text)
    if not m:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (use 500ms, 90s, 30m, 1h)")
    n, unit = int(m.group(1)), m.group(2) or "s"
    return n * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[unit]


class EventLog:
    """The runner's own events, in the same JSON-lines format as the workers'."""

    def __init__(self, path):
        self.file = open(path, "a", buffering=1)
        self.lock = threading.Lock()

    def emit(self, ev, src="runner", **fields):
        fields.update(t=now_us(), src=src, ev=ev)
        with self.lock:
            self.file.write(json.dumps(fields) + "\n")


class Child:
    """A process whose stdout lines can be read with a timeout."""

    def __init__(self, argv, stderr_path, stdin=False, read_stdout=True, env=None):
        self.argv = argv
        log = open(stderr_path, "ab")
        # A pipe nobody reads would stop the process once full: unread stdout goes to the log.
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE if read_stdout else log,
                                     stdin=subprocess.PIPE if stdin else None, stderr=log, start_new_session=True,
                                     env=env)
        log.close()
        self.buf = b""

    def read_line(self, timeout=10.0):
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise RuntimeError(f"{self.argv[0]}: no output line within {timeout}s")
            ready, _, _ = select.select([self.proc.stdout], [], [], left)
            if ready:
                chunk = os.read(self.proc.stdout.fileno(), 4096)
                if not chunk:
                    raise RuntimeError(f"{self.argv[0]} exited (status {self.proc.poll()})")
                self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line.decode()

    def listening_port(self, timeout=10.0):
        line = self.read_line(timeout)
        m = re.search(r"listening on .*:(\d+)$", line)
        if not m:
            raise RuntimeError(f"{self.argv[0]}: unexpected first line {line!r}")
        return int(m.group(1))

    def signal(self, sig):
        if self.proc.poll() is None:
            try:
                os.kill(self.proc.pid, sig)
            except ProcessLookupError:
                pass

    def stop(self, timeout=10.0):
        """SIGCONT (a paused process cannot exit), SIGTERM, then SIGKILL after `timeout`."""
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.signal(signal.SIGKILL)
            self.proc.wait()


class Proxy(Child):
    def __init__(self, bin_dir, upstream, out, name, listen="127.0.0.1"):
        super().__init__([os.path.join(bin_dir, "fault-proxy"), "--upstream-port", str(upstream), "--listen",
                          listen], os.path.join(out, name + ".log"), stdin=True)
        self.name = name
        self.port = self.listening_port()

    def command(self, text):
        self.proc.stdin.write((text + "\n").encode())
        self.proc.stdin.flush()
        answer = self.read_line()
        if answer.startswith("error"):
            raise RuntimeError(f"fault-proxy: {answer}")
        return answer


def wal_frames(path):
    """The whole units of a batond log as (offset, size) pairs, up to the first incomplete one. A record is
    u32 payload_len | u32 crc32c | payload, little-endian; a group-commit batch is a record of type 8 whose
    u64 token is the length of the records after it, and the unit spans both (server/src/wal_record.hpp).
    Checksums are not verified."""
    with open(path, "rb") as f:
        data = f.read()
    frames, at = [], 0
    while len(data) - at >= 8:
        size = 8 + int.from_bytes(data[at:at + 4], "little")
        if size >= 17 and len(data) - at >= size and data[at + 8] == 8:
            size += int.from_bytes(data[at + 9:at + 17], "little")
        if len(data) - at < size:
            break
        frames.append((at, size))
        at += size
    return frames


def newest_wal(data_dir):
    """The log of the newest generation (wal-<16 hex digits>.log, which sort like the generations), or None."""
    logs = sorted(f for f in os.listdir(data_dir) if re.fullmatch(r"wal-[0-9a-f]{16}\.log", f))
    return os.path.join(data_dir, logs[-1]) if logs else None


def flip_bit(path, offset, bit):
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)[0]
        f.seek(offset)
        f.write(bytes([byte ^ (1 << bit)]))


def http_json(port, method, path, body=None, timeout=3.0, host="127.0.0.1"):
    """One request on a fresh connection: (status, parsed body), or (None, reason) on a transport error."""
    try:
        conn = http.client.HTTPConnection(host, port, timeout=timeout)
        conn.request(method, path, body=json.dumps(body) if body is not None else None,
                     headers={"Content-Type": "application/json"})
        res = conn.getresponse()
        data = res.read()
        conn.close()
        try:
            return res.status, json.loads(data) if data else {}
        except ValueError:
            return res.status, data.decode(errors="replace")
    except (OSError, http.client.HTTPException) as e:
        return None, str(e)


class Run:
    def __init__(self, args):
        self.args = args
        self.rng = random.Random(args.seed)
        self.bin = args.bin_dir
        self.out = args.out
        self.log = EventLog(os.path.join(self.out, "runner.jsonl"))
        self.children = []
        self.workers = []
        self.server = None
        self.server_port = None
        self.proxies = []
        self.netns = None
        self.mount = None
        self.data_dir = os.path.join(self.out, "data")
        self.keys = [f"k{i}" for i in range(args.keys)]
        # etcd grants no lease shorter than 1.5 election timeouts (2 s by default): ask for what it gives.
        self.ttl_ms = 2000 if args.server == "etcd" else 1000
        self.burst_round = 0
        self.disk_refusals = []
        self.storage = {"exits_74": 0, "refusals_65": 0, "stall_kills": 0, "snapshot_kills": 0,
                        "snapshot_probed": 0, "no_compaction": 0}
        self.faultfs_control = os.path.join(self.out, "faultfs.control")
        self.sync_record = os.path.join(self.out, "sync-record")  # what batond's syncs made durable
        self.server_env = None  # batond's environment: the injector's preload when a storage fault is on

    # ---- setup

    def setup_tmpfs(self):
        mnt = os.path.join(self.out, "disk")
        os.makedirs(mnt)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", mnt], check=True)
        self.mount = mnt
        self.data_dir = os.path.join(mnt, "data")

    def setup_netns(self):
        tag = os.getpid() % 100000
        ns, host_if, ns_if = f"baton-chaos-{tag}", f"bch{tag}", f"bcn{tag}"
        net = f"10.213.{tag % 250}"
        self.netns = (ns, host_if)
        for cmd in (["ip", "netns", "add", ns],
                    ["ip", "link", "add", host_if, "type", "veth", "peer", "name", ns_if],
                    ["ip", "link", "set", ns_if, "netns", ns],
                    ["ip", "addr", "add", f"{net}.1/30", "dev", host_if],
                    ["ip", "link", "set", host_if, "up"],
                    ["ip", "netns", "exec", ns, "ip", "addr", "add", f"{net}.2/30", "dev", ns_if],
                    ["ip", "netns", "exec", ns, "ip", "link", "set", ns_if, "up"],
                    ["ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up"]):
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        return f"{net}.1"

    def free_port(self):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]

    def start_etcd(self):
        """One etcd member on fixed loopback ports (etcd listens with SO_REUSEADDR, so a restart keeps them)."""
        if not self.server_port:
            self.server_port, self.peer_port = self.free_port(), self.free_port()
        c, p = f"http://127.0.0.1:{self.server_port}", f"http://127.0.0.1:{self.peer_port}"
        argv = ["etcd", "--name", "chaos", "--data-dir", os.path.join(self.out, "etcd-data"),
                "--listen-client-urls", c, "--advertise-client-urls", c, "--listen-peer-urls", p,
                "--initial-advertise-peer-urls", p, "--initial-cluster", "chaos=" + p]
        self.server = Child(argv, os.path.join(self.out, "server.log"), read_stdout=False)
        deadline = time.monotonic() + 60
        while http_json(self.server_port, "GET", "/version", timeout=2)[0] != 200:
            if time.monotonic() > deadline or self.server.proc.poll() is not None:
                raise RuntimeError("etcd did not start; see server.log")
            time.sleep(0.1)

    def remove_netns(self):
        if self.netns:
            subprocess.run(["ip", "netns", "del", self.netns[0]], check=False, stderr=subprocess.DEVNULL)
            subprocess.run(["ip", "link", "del", self.netns[1]], check=False, stderr=subprocess.DEVNULL)
            self.netns = None

    def server_argv(self):
        a = self.args
        if a.server == "batond":
            os.makedirs(self.data_dir, exist_ok=True)
            # Small enough that the acquire bursts of kill_in_snapshot reach a compaction within a second.
            return [a.batond, "--listen", "127.0.0.1:0", "--data-dir", self.data_dir, "--threads", "2",
                    "--compact-bytes", str(16 * 1024)]
        return [os.path.join(self.bin, "broken-lockd"), "--listen", "127.0.0.1:0", "--bug", a.server.split(":")[1]]

    def start_server(self):
        if self.args.server == "etcd":
            self.start_etcd()
            self.log.emit("server_start", pid=self.server.proc.pid, port=self.server_port)
            return
        self.server = Child(self.server_argv(), os.path.join(self.out, "server.log"), env=self.server_env)
        self.server_started(self.server.listening_port())

    def server_started(self, port):
        self.server_port = port
        self.log.emit("server_start", pid=self.server.proc.pid, port=port)
        for p in self.proxies:
            if p.role == "server":
                p.command(f"upstream {port}")

    def kill_server(self, may_have_exited=False):
        # A server that already died on its own (say, on the full disk) is recorded as such.
        exited = self.server.proc.poll()
        self.server.signal(signal.SIGKILL)
        self.server.proc.wait()
        self.log.emit("server_kill", pid=self.server.proc.pid, exited_before=exited)
        if exited is not None and not may_have_exited:
            print(f"chaos: the server had exited by itself (status {exited}) before it was killed", flush=True)

    def start(self):
        a = self.args
        self.skipped = {}
        for f in a.faults:
            if f in ROOT_FAULTS and os.geteuid() != 0:
                self.skipped[f] = ROOT_FAULTS[f]
            if f in SERVER_FAULTS and a.server.startswith("broken-lockd"):
                self.skipped[f] = "broken-lockd keeps no state to crash or fill"
            if f in BATOND_ONLY_FAULTS and a.server == "etcd":
                self.skipped[f] = BATOND_ONLY_FAULTS[f]
        if "disk_full" in a.faults and "disk_full" not in self.skipped:
            try:
                self.setup_tmpfs()
            except (subprocess.CalledProcessError, OSError) as e:
                # Root without the right to mount (a restricted container): skip the fault, not the run.
                self.skipped["disk_full"] = f"cannot mount a tmpfs: {e}"
        if any(f in FAULTFS_FAULTS and f not in self.skipped for f in a.faults):
            self.setup_faultfs()
        store_argv = [os.path.join(self.bin, "fenced-store"), "--listen", "127.0.0.1:0", "--threads", "2",
                      "--history-limit", "100000000"]
        if a.unsafe_store:
            store_argv.append("--unsafe-skip-token-check")
        self.store = Child(store_argv, os.path.join(self.out, "store.log"))
        self.store_port = self.store.listening_port()
        self.start_server()
        proxy = Proxy(self.bin, self.server_port, self.out, "proxy")
        proxy.role = "server"
        self.proxies.append(proxy)
        self.main_proxy = proxy
        ns_addr = None
        if "partition" in a.faults and "partition" not in self.skipped:
            try:
                ns_addr = self.setup_netns()
            except (subprocess.CalledProcessError, OSError) as e:
                self.skipped["partition"] = f"cannot create a network namespace and veth pair: {e}"
                self.remove_netns()
        if "partition" in a.faults and "partition" not in self.skipped:
            for role, port in (("server", self.server_port), ("store", self.store_port)):
                p = Proxy(self.bin, port, self.out, "ns-proxy-" + role, listen=ns_addr)
                p.role = role
                self.proxies.append(p)
        for i in range(a.workers):
            name = f"w{i}"
            scheme = "etcd" if a.server == "etcd" else "http"
            server_url, store_url, prefix = (f"{scheme}://127.0.0.1:{proxy.port}", f"http://127.0.0.1:{self.store_port}", [])
            if ns_addr and i == a.workers - 1:
                sp = next(p for p in self.proxies if p.role == "server" and p is not proxy)
                tp = next(p for p in self.proxies if p.role == "store")
                server_url, store_url = f"{scheme}://{ns_addr}:{sp.port}", f"http://{ns_addr}:{tp.port}"
                prefix = ["ip", "netns", "exec", self.netns[0]]
                name = f"w{i}-netns"
            argv = prefix + [os.path.join(self.bin, "chaos-worker"), "--id", name, "--server", server_url,
                             "--store", store_url, "--keys", ",".join(self.keys), "--events",
                             os.path.join(self.out, name + ".jsonl"), "--seed", str(a.seed * 1000 + i),
                             "--ttl-ms", str(self.ttl_ms)]
            if a.unsafe_worker:
                argv.append("--ignore-loss")
            elif a.server == "batond" and i % 2 == 0:
                # Every other worker raises its lease's TTL thirtyfold with a renew in half its rounds (batond's
                # extend record, which a disk stall can catch); such leases are held for seconds, so not all
                # workers do. etcd leases keep the TTL they were granted with; broken-lockd has no disk.
                argv += ["--raise-ttl-ms", str(30 * self.ttl_ms)]
            w = Child(argv, os.path.join(self.out, name + ".log"), read_stdout=False)
            w.name = name
            self.workers.append(w)

    # ---- faults

    def worker_mid_write(self):
        """A worker whose last event says it holds a lease, if any: pausing it tests the interesting case."""
        busy = []
        for w in self.workers:
            try:
                with open(os.path.join(self.out, w.name + ".jsonl"), "rb") as f:
                    f.seek(0, os.SEEK_END)
                    f.seek(max(0, f.tell() - 400))
                    last = f.read().splitlines()[-1]
                if json.loads(last)["ev"] in ("acquire_granted", "write_start", "write_done"):
                    busy.append(w)
            except (OSError, ValueError, IndexError, KeyError):
                pass
        return self.rng.choice(busy or self.workers)

    def stale_write(self):
        """A worker stopped between its last lease check and its write, as by a GC pause, for longer than its
        lease: SIGUSR1 makes its next write stop the process first (the worker's own event says when), and
        the write goes out, blocking, when it is continued. The runner continues it only once another worker
        has written the same key with a newer token and the store accepted it (or after `newer_write_bound`
        TTLs), so the fence has something to refuse: this is what makes runs report writes_rejected > 0, and
        the checker confirms each refused write was stale and each accepted one was not."""
        w = self.rng.choice(self.workers)
        events = os.path.join(self.out, w.name + ".jsonl")
        seen = os.path.getsize(events) if os.path.exists(events) else 0
        w.signal(signal.SIGUSR1)
        paused = None
        deadline = time.monotonic() + 3  # the worker's arming lasts 2 s
        while paused is None and time.monotonic() < deadline:
            time.sleep(0.02)
            with open(events, "rb") as f:
                f.seek(seen)
                for line in f.read().splitlines():
                    if b'"paused_before_write"' in line:
                        try:
                            paused = json.loads(line)
                        except ValueError:
                            paused = {}
        if paused is None:
            self.log.emit("fault", kind="stale_write", worker=w.name, skipped="no write started within 2 s")
            w.signal(signal.SIGCONT)  # harmless when it never stopped
            return
        started = time.monotonic()
        # At least two TTLs (the lease is then gone on the server whatever happened), then until a newer
        # holder's write of the key was accepted.
        time.sleep(2 * self.ttl_ms / 1000)
        newer = self.newer_write_seen(paused.get("key"), paused.get("token", 0), w.name,
                                      time.monotonic() + self.newer_write_bound * self.ttl_ms / 1000)
        self.log.emit("fault", kind="stale_write", worker=w.name, key=paused.get("key"),
                      token=paused.get("token"), seconds=round(time.monotonic() - started, 3),
                      newer_write=newer)
        w.signal(signal.SIGCONT)

    # How many TTLs stale_write waits at most for a newer holder's accepted write of the paused key.
    newer_write_bound = 10

    def newer_write_seen(self, key, token, paused_worker, until):
        """Whether another worker's write of `key` with a token above `token` was accepted before `until`
        (monotonic time): its write_done event with status 200."""
        offsets = {}
        while True:
            for other in self.workers:
                if other.name == paused_worker:
                    continue
                path = os.path.join(self.out, other.name + ".jsonl")
                try:
                    with open(path, "rb") as f:
                        f.seek(offsets.get(path, 0))
                        data = f.read()
                except OSError:
                    continue
                complete = data.rfind(b"\n") + 1  # a line still being written is read next time
                offsets[path] = offsets.get(path, 0) + complete
                for line in data[:complete].splitlines():
                    if b'"write_done"' not in line:
                        continue
                    try:
                        e = json.loads(line)
                    except ValueError:
                        continue
                    if e.get("key") == key and e.get("token", 0) > token and e.get("status") == 200:
                        return True
            if time.monotonic() >= until:
                return False
            time.sleep(0.05)

    def burst(self, count, results, pad=0):
        """`count` concurrent acquires straight to batond (each its own connection): a group commit in flight.
        `pad` more bytes in each owner make the log records larger."""
        self.burst_round += 1

        def one(i):
            key, owner = f"burst-{self.burst_round}-{i}", f"burst-{self.burst_round}-{i}" + "-" * pad
            sent = now_us()
            self.log.emit("acquire_req", src="burst", key=key)
            status, body = http_json(self.server_port, "POST", f"/v1/locks/{key}/acquire",
                                     {"owner": owner, "ttl_ms": 30000})
            if status == 200:
                self.log.emit("acquire_granted", src="burst", key=key, sent=sent, token=body["token"],
                              ttl_ms=30000, owner=owner)
                results.append((key, owner, body["token"]))
            else:
                self.log.emit("acquire_failed", src="burst", key=key, sent=sent, error=str(status) + " " + str(body))

        threads = [threading.Thread(target=one, args=(i,)) for i in range(count)]
        for t in threads:
            t.start()
        return threads

    def probe_burst(self, granted, src="burst"):
        """After a restart, every acknowledged lease in `granted` must still be held: another owner is refused.
        The lease is released afterwards, as `src` (the source that recorded its grant)."""
        for key, owner, token in granted:
            sent = now_us()
            self.log.emit("acquire_req", src="probe", key=key)
            status, body = http_json(self.server_port, "POST", f"/v1/locks/{key}/acquire",
                                     {"owner": "probe", "ttl_ms": 100})
            if status == 200:
                self.log.emit("acquire_granted", src="probe", key=key, sent=sent, token=body["token"], ttl_ms=100)
            elif status == 409:
                self.log.emit("acquire_refused", src="probe", key=key, sent=sent,
                              holder_token=body.get("token", 0))
            else:
                self.log.emit("acquire_failed", src="probe", key=key, sent=sent, error=str(status))
            self.log.emit("release_req", src=src, key=key, token=token)
            rsent = now_us()
            status, body = http_json(self.server_port, "POST", f"/v1/locks/{key}/release",
                                     {"owner": owner, "token": token})
            if status == 200:
                self.log.emit("released", src=src, key=key, token=token, sent=rsent,
                              outcome=body.get("outcome", "released"))

    def restart_server(self, down_s, may_have_exited=False):
        self.kill_server(may_have_exited)
        time.sleep(down_s)
        self.start_server()

    # ---- storage faults

    def setup_faultfs(self):
        lib = os.path.join(self.args.build_dir, "lib", "libbaton-faultfs.so")
        if not os.path.exists(lib):
            raise RuntimeError(f"{lib} is missing: build the baton_faultfs target")
        self.set_storage_fault("none")
        env = dict(os.environ)
        asan = env.get("ASAN_OPTIONS", "")
        env.update(LD_PRELOAD=os.path.abspath(lib), BATON_FAULTFS_DIR=os.path.abspath(self.data_dir),
                   BATON_FAULTFS_CONTROL=self.faultfs_control,
                   # The preload comes before a sanitizer build's runtime, which otherwise refuses to start.
                   ASAN_OPTIONS=(asan + ":" if asan else "") + "verify_asan_link_order=0")
        os.makedirs(self.data_dir, exist_ok=True)  # the injector resolves it when batond starts
        os.makedirs(self.sync_record, exist_ok=True)
        env["BATON_FAULTFS_RECORD"] = self.sync_record
        self.server_env = env

    def set_storage_fault(self, mode):
        """The injector's mode (tests/faultfs/faultfs.cpp): batond's next write, fsync or rename obeys it."""
        tmp = self.faultfs_control + ".next"
        with open(tmp, "w") as f:
            f.write(mode + "\n")
        os.replace(tmp, self.faultfs_control)

    def wait_server_exit(self, bound, watch_healthz=False):
        """Waits up to `bound` s for batond to exit by itself: (status or -1, /healthz 200s meanwhile)."""
        deadline, healthz_ok = time.monotonic() + bound, 0
        while self.server.proc.poll() is None and time.monotonic() < deadline:
            if watch_healthz and http_json(self.server_port, "GET", "/healthz", timeout=1)[0] == 200:
                healthz_ok += 1
            time.sleep(0.1)
        status = self.server.proc.poll()
        return (-1 if status is None else status), healthz_ok

    def storage_failure(self, kind):
        """A write or fsync of the log fails: batond must answer 503, stop with status 74, and recover from its
        log when restarted. Before the fix it stayed up refusing every change while /healthz said 200."""
        mode = {"fsync_eio": "eio-fsync", "disk_enospc": "enospc"}[kind]
        self.log.emit("fault", kind=kind, mode=mode)
        self.set_storage_fault(mode)
        # What a client sees: the runner's own acquire (the workers' requests may hit the failure first).
        key, sent = f"storage-{now_us()}", now_us()
        self.log.emit("acquire_req", src="runner", key=key)
        status, body = http_json(self.server_port, "POST", f"/v1/locks/{key}/acquire",
                                 {"owner": "runner", "ttl_ms": 30000})
        stored = []
        if status == 200:
            self.log.emit("acquire_granted", src="runner", key=key, sent=sent, token=body["token"], ttl_ms=30000)
            stored.append((key, "runner", body["token"]))
        else:
            self.log.emit("acquire_failed", src="runner", key=key, sent=sent, status=status,
                          error=body if isinstance(body, str) else body.get("error", ""))
        code, healthz_ok = self.wait_server_exit(EXIT_BOUND_S, watch_healthz=True)
        self.log.emit("server_exit", cause=kind, status=code, expected=EXIT_STORAGE_FAILED, healthz_ok=healthz_ok)
        self.storage["exits_74"] += code == EXIT_STORAGE_FAILED
        self.set_storage_fault("none")
        self.restart_server(self.rng.uniform(0, 0.5), may_have_exited=True)
        self.probe_burst(stored, src="runner")

    def disk_stall(self):
        """Every write and fsync of the data directory blocks for 0.5-4 s; in half the stalls batond is killed
        before the disk comes back, so whatever was stalled is lost: nothing of it may have been acknowledged."""
        hold, crash, down = self.rng.uniform(0.5, 4), self.rng.random() < 0.5, self.rng.uniform(0, 1)
        self.log.emit("fault", kind="disk_stall", seconds=hold, kill=crash)
        self.set_storage_fault("stall")
        time.sleep(hold)
        if crash:
            self.kill_server()
            self.storage["stall_kills"] += 1
        self.set_storage_fault("none")
        if crash:
            time.sleep(down)
            self.start_server()

    def power_cut(self):
        """Acquire bursts straight to batond, batond killed 0-15 ms later, and then the power: the data
        directory becomes what the injector's sync record says survives (names of the last directory fsync,
        contents of each file's last sync; half the time also a random subset of the sectors written after
        it, zeros for the others). Every acknowledged acquire must be there after the restart."""
        count, after_ms = self.rng.randint(8, 32), self.rng.uniform(0, 15)
        sectors = self.rng.random() < 0.5
        self.log.emit("fault", kind="power_cut", burst=count, kill_after_ms=after_ms, unsynced_sectors=sectors)
        self.kill_during_burst(count, after_ms, lambda: self.power_cut_image(sectors))

    def kill_during_burst(self, count, after_ms, while_down):
        """`count` concurrent acquires straight to batond, batond killed `after_ms` later, `while_down()`
        before the restart; then every acknowledged acquire of the burst is probed."""
        granted = []
        threads = self.burst(count, granted)
        time.sleep(after_ms / 1000)
        self.kill_server()
        for t in threads:
            t.join()
        while_down()
        self.start_server()
        self.probe_burst(granted)

    def power_cut_image(self, unsynced_sectors):
        """Replaces the data directory by what a power cut leaves of it (storage_faults::power_cut_image does
        the same for the C++ tests), then starts a new sync record: the image is what is durable now."""
        with open(os.path.join(self.sync_record, "dir.list")) as f:
            listing = [line.rstrip("\n").split(" ", 1) for line in f if line.strip()]
        files = {}
        for ino, name in listing:
            synced_path = os.path.join(self.sync_record, "ino-" + ino)
            content = b""
            if os.path.exists(synced_path):
                with open(synced_path, "rb") as f:
                    content = f.read()
            live = os.path.join(self.data_dir, name)
            if unsynced_sectors and os.path.exists(live) and str(os.stat(live).st_ino) == ino:
                with open(live, "rb") as f:
                    now = f.read()
                if len(now) > len(content) and now.startswith(content):
                    base, tail, end = len(content), bytearray(len(now) - len(content)), len(content)
                    at = 0
                    while at < len(tail):
                        n = min(len(tail) - at, 512 - (base + at) % 512)  # sectors at the file's offsets
                        if self.rng.random() < 0.5:
                            tail[at:at + n] = now[base + at:base + at + n]
                            end = base + at + n
                        at += n
                    content += bytes(tail[:end - base])
            files[name] = content
        for name in os.listdir(self.data_dir):
            os.unlink(os.path.join(self.data_dir, name))
        for name, content in files.items():
            with open(os.path.join(self.data_dir, name), "wb") as f:
                f.write(content)
        shutil.rmtree(self.sync_record)
        os.makedirs(self.sync_record)

    def kill_in_snapshot(self):
        """batond dies just before or just after it renames a new snapshot into place; acquire bursts with
        large records drive it to compact. Every acquire acknowledged before must survive the restart."""
        mode = self.rng.choice(["kill-before-rename", "kill-after-rename"])
        self.log.emit("fault", kind="kill_in_snapshot", mode=mode)
        self.set_storage_fault(mode)
        granted, deadline = [], time.monotonic() + EXIT_BOUND_S
        while self.server.proc.poll() is None and time.monotonic() < deadline:
            for t in self.burst(16, granted, pad=200):
                t.join()
        died = self.server.proc.poll() is not None
        self.storage["snapshot_kills"] += died
        self.storage["no_compaction"] += not died
        self.set_storage_fault("none")
        self.restart_server(self.rng.uniform(0, 0.5), may_have_exited=True)
        self.storage["snapshot_probed"] += len(granted)
        self.probe_burst(granted)

    def bitflip(self):
        """batond stopped, one bit of a record followed by others flipped: it must refuse to start (65) and
        leave the file as it is. The bit is then flipped back, and batond starts on its intact log. Before the
        fix it started, cutting the log at the damaged record and every acknowledged record after it."""
        self.kill_server()
        wal = newest_wal(self.data_dir)
        frames = wal_frames(wal) if wal else []
        if len(frames) < 2:
            self.log.emit("fault", kind="bitflip", skipped="fewer than two records in the log")
            self.start_server()
            return
        index = self.rng.randrange(len(frames) - 1)
        at, size = frames[index]
        offset, bit = at + 8 + self.rng.randrange(size - 8), self.rng.randrange(8)
        self.log.emit("fault", kind="bitflip", file=os.path.basename(wal), record=index, record_offset=at,
                      offset=offset, bit=bit)
        with open(wal, "rb") as f:
            intact = f.read()
        flip_bit(wal, offset, bit)
        with open(wal, "rb") as f:
            damaged = f.read()
        self.server = Child(self.server_argv(), os.path.join(self.out, "server.log"), env=self.server_env)
        try:
            port = self.server.listening_port(timeout=EXIT_BOUND_S)
        except RuntimeError:  # no listening line: it exited, as it should, or hangs
            code = self.wait_server_exit(EXIT_BOUND_S)[0]
            if code == -1:
                self.kill_server(may_have_exited=True)
        else:
            code = -1
            self.server_started(port)
        with open(wal, "rb") as f:
            changed = f.read() != damaged
        self.log.emit("server_exit", cause="bitflip", status=code, expected=EXIT_DATA_DAMAGED, log_changed=changed)
        if self.server.proc.poll() is None:
            # Serving on what it kept of the log: the damage is done, and the run goes on with it.
            print(f"chaos: bitflip: batond started on a log damaged at {os.path.basename(wal)} offset {at}",
                  flush=True)
            return
        self.storage["refusals_65"] += code == EXIT_DATA_DAMAGED
        with open(wal, "wb") as f:
            f.write(intact)
        self.start_server()

    def fill_disk(self):
        path = os.path.join(self.mount, "filler")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            block = b"\0" * 4096
            while True:
                os.write(fd, block)
        except OSError as e:
            if e.errno != errno.ENOSPC:
                raise
        finally:
            os.close(fd)
        return path

    def inject(self, kind):
        r = self.rng
        p = self.main_proxy
        if kind == "delay":
            ms, hold = r.randint(20, 400), r.uniform(0.5, 3)
            self.log.emit("fault", kind=kind, delay_ms=ms, seconds=hold)
            p.command(f"delay {ms}")
            time.sleep(hold)
            p.command("delay 0")
        elif kind == "drop_replies":
            n, style = r.randint(1, 3), r.choice(["hang", "reset"])
            self.log.emit("fault", kind=kind, count=n, style=style)
            p.command(f"drop-replies {n} {style}")
        elif kind == "drop_requests":
            n = r.randint(1, 3)
            self.log.emit("fault", kind=kind, count=n)
            p.command(f"drop-requests {n}")
        elif kind in ("duplicate", "reorder"):
            n, ms = r.randint(1, 4), (0 if kind == "duplicate" else r.randint(100, 1500))
            self.log.emit("fault", kind=kind, count=n, delay_ms=ms)
            p.command(f"duplicate {n} {ms}")
        elif kind == "reset":
            self.log.emit("fault", kind=kind)
            p.command("reset")
        elif kind == "pause_worker":
            w, hold = self.worker_mid_write(), r.uniform(0.2, 3 * self.ttl_ms / 1000)
            self.log.emit("fault", kind=kind, worker=w.name, seconds=hold)
            w.signal(signal.SIGSTOP)
            time.sleep(hold)
            w.signal(signal.SIGCONT)
        elif kind == "stale_write":
            self.stale_write()
        elif kind == "pause_server":
            hold = r.uniform(0.1, 2 * self.ttl_ms / 1000)
            self.log.emit("fault", kind=kind, seconds=hold)
            self.server.signal(signal.SIGSTOP)
            time.sleep(hold)
            self.server.signal(signal.SIGCONT)
        elif kind == "kill_server":
            down = r.uniform(0, 1.5)
            self.log.emit("fault", kind=kind, down_s=down)
            self.restart_server(down)
        elif kind == "kill_server_in_commit":
            count, after_ms, down = r.randint(8, 32), r.uniform(0, 15), r.uniform(0, 1)
            self.log.emit("fault", kind=kind, burst=count, kill_after_ms=after_ms, down_s=down)
            self.kill_during_burst(count, after_ms, lambda: time.sleep(down))
        elif kind == "partition":
            hold = r.uniform(0.5, 4)
            self.log.emit("fault", kind=kind, worker=self.workers[-1].name, seconds=hold)
            subprocess.run(["ip", "link", "set", self.netns[1], "down"], check=True)
            time.sleep(hold)
            subprocess.run(["ip", "link", "set", self.netns[1], "up"], check=True)
        elif kind == "disk_full":
            hold = r.uniform(0.5, 2)
            self.log.emit("fault", kind=kind, seconds=hold)
            filler = self.fill_disk()
            time.sleep(hold)
            # What a client sees now: batond must refuse with a clear error, or store and acknowledge.
            sent = now_us()
            key = f"disk-{now_us()}"
            self.log.emit("acquire_req", src="runner", key=key)
            status, body = http_json(self.server_port, "POST", f"/v1/locks/{key}/acquire",
                                     {"owner": "runner", "ttl_ms": 30000})
            stored = []
            if status == 200:
                # The write fitted in a page the log file already had: stored, so it must survive the restart.
                self.log.emit("acquire_granted", src="runner", key=key, sent=sent, token=body["token"],
                              ttl_ms=30000)
                stored.append((key, "runner", body["token"]))
            else:
                self.log.emit("acquire_failed", src="runner", key=key, sent=sent, status=status,
                              error=body if isinstance(body, str) else body.get("message", ""))
                self.disk_refusals.append((status, body))
            os.unlink(filler)
            # batond stops (status 74) once a write fails, if the acquire or a worker's request made it write:
            # only a restart recovers it. (Before the fail-stop it stayed up, refusing every change.)
            self.restart_server(0, may_have_exited=True)
            self.probe_burst(stored, src="runner")
        elif kind == "disk_stall":
            self.disk_stall()
        elif kind in ("fsync_eio", "disk_enospc"):
            self.storage_failure(kind)
        elif kind == "kill_in_snapshot":
            self.kill_in_snapshot()
        elif kind == "bitflip":
            self.bitflip()
        elif kind == "power_cut":
            self.power_cut()
        else:
            raise ValueError(kind)

    def run_faults(self):
        a = self.args
        kinds = [f for f in a.faults if f not in self.skipped]
        start = time.monotonic()
        end, report_at, injected = start + a.duration, start + 60, 0
        while time.monotonic() < end:
            if time.monotonic() >= report_at:
                print(f"chaos: {time.monotonic() - start:.0f}s, {injected} faults injected", flush=True)
                report_at += 60
            time.sleep(self.rng.uniform(0.2, 1.5))
            if not kinds or time.monotonic() >= end:
                continue
            self.inject(self.rng.choice(kinds))
            injected += 1
            for w in self.workers:
                if w.proc.poll() is not None:
                    raise RuntimeError(f"worker {w.name} exited early (status {w.proc.returncode}); see {w.name}.log")
            if self.server.proc.poll() is not None:
                raise RuntimeError(f"the server exited on its own (status {self.server.proc.returncode})")

    # ---- teardown

    def heal(self):
        for p in self.proxies:
            stats = json.loads(p.command("stats"))
            self.log.emit("proxy_stats", name=p.name, **stats)
            print(f"chaos: {p.name}: {' '.join(f'{k}={v}' for k, v in stats.items())}", flush=True)
            for cmd in ("delay 0", "drop-replies 0 hang", "drop-requests 0", "duplicate 0 0", "blackhole off"):
                p.command(cmd)
        if self.netns:
            subprocess.run(["ip", "link", "set", self.netns[1], "up"], check=False)
        if self.server_env:
            self.set_storage_fault("none")
        for c in [self.server] + self.workers:
            if c:
                c.signal(signal.SIGCONT)

    def collect_store_history(self):
        conn = http.client.HTTPConnection("127.0.0.1", self.store_port, timeout=60)
        conn.request("GET", "/history")
        res = conn.getresponse()
        data = res.read().decode()
        if res.status != 200:
            raise RuntimeError(f"fenced-store /history answered {res.status}")
        if res.getheader("History-Dropped", "0") != "0":
            raise RuntimeError("fenced-store dropped history entries: raise --history-limit")
        with open(os.path.join(self.out, "store.jsonl"), "w") as f:
            for line in data.splitlines():
                if not line.strip():
                    continue
                h = json.loads(line)
                f.write(json.dumps({"t": h["ts_us"], "src": "store", "ev": "store_write", "key": h["resource"],
                                    "token": h["token"], "accepted": h["accepted"],
                                    "highest_token": h["highest_token"]}) + "\n")

    def cleanup(self):
        for c in self.workers + [self.server, self.store] + self.proxies:
            if c:
                c.stop(5)
        self.remove_netns()
        if self.mount:
            subprocess.run(["umount", "-l", self.mount], check=False)


def main():
    ap = argparse.ArgumentParser(prog="tests/chaos/run.sh", description=__doc__)
    ap.add_argument("--seed", type=int, help="replays a run's fault schedule and workload (default: random)")
    ap.add_argument("--duration", type=parse_duration, help="how long faults are injected (default 60s; --long: 30m)")
    ap.add_argument("--long", action="store_true", help="long mode: 30 minutes unless --duration says otherwise")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--keys", type=int, default=3, help="contended keys")
    ap.add_argument("--faults", default=",".join(ALL_FAULTS), help="comma-separated fault kinds, or none")
    ap.add_argument("--server", default="batond",
                    help="batond, etcd (one member, through the SDK's etcd backend), or broken-lockd:BUG (self-test)")
    ap.add_argument("--unsafe-worker", action="store_true", help="workers ignore loss (checker self-test)")
    ap.add_argument("--unsafe-store", action="store_true", help="the store skips its token check (self-test)")
    ap.add_argument("--expect-violation", help="pass exactly when the checker finds this kind (self-test)")
    ap.add_argument("--build-dir", default=os.path.join(os.path.dirname(__file__), "..", "..", "build", "dev"))
    ap.add_argument("--batond", help="the batond executable to test (default: the build directory's); the other "
                    "processes and the storage fault injector still come from --build-dir")
    ap.add_argument("--out", help="where histories and logs go (default: a new directory under /tmp)")
    ap.add_argument("--keep", action="store_true", help="keep the output directory even when the run passes")
    a = ap.parse_args()
    if a.seed is None:
        a.seed = random.SystemRandom().randrange(1, 2**31)
    if a.duration is None:
        a.duration = 1800 if a.long else 60
    a.faults = [] if a.faults == "none" else a.faults.split(",")
    for f in a.faults:
        if f not in ALL_FAULTS:
            ap.error(f"unknown fault {f!r}; known: {', '.join(ALL_FAULTS)}")
    if a.workers < 1 or a.keys < 1 or a.duration < 0:
        ap.error("--workers and --keys must be at least 1, --duration not negative")
    if a.server not in ("batond", "etcd") and not a.server.startswith("broken-lockd:"):
        ap.error("--server must be batond, etcd or broken-lockd:BUG")
    a.bin_dir = os.path.abspath(os.path.join(a.build_dir, "bin"))
    a.batond = os.path.abspath(a.batond or os.path.join(a.bin_dir, "batond"))
    a.out = a.out or tempfile.mkdtemp(prefix="baton-chaos-")
    os.makedirs(a.out, exist_ok=True)
    print(f"chaos: seed={a.seed} duration={a.duration:g}s workers={a.workers} keys={a.keys} out={a.out}", flush=True)

    run = Run(a)
    # A SIGTERM (ctest's timeout, Ctrl-C) must still clean up the namespace and the mount.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    failed = True
    try:
        run.start()
        for f, why in run.skipped.items():
            print(f"chaos: skipping fault {f}: {why}", flush=True)
        run.log.emit("run_start", seed=a.seed, faults=[f for f in a.faults if f not in run.skipped],
                     skipped=run.skipped)
        run.run_faults()
        run.heal()
        time.sleep(2 * run.ttl_ms / 1000)  # let the workers finish their leases on a healed network
        for w in run.workers:
            w.stop(15)
        run.collect_store_history()
        failed = False
    finally:
        run.cleanup()
    if run.disk_refusals:
        status, body = run.disk_refusals[-1]
        print(f"chaos: full disk: {len(run.disk_refusals)} acquires refused; the last answer: {status} {body}",
              flush=True)
    if any(f in STORAGE_FAULTS for f in a.faults):
        print("chaos: storage: " + " ".join(f"{k}={v}" for k, v in run.storage.items()), flush=True)
    files = sorted(os.path.join(a.out, f) for f in os.listdir(a.out) if f.endswith(".jsonl"))
    argv = [os.path.join(a.bin_dir, "chaos-check"), "--seed", str(a.seed)]
    if a.expect_violation:
        argv += ["--expect-violation", a.expect_violation]
    rc = subprocess.run(argv + files).returncode
    if rc == 0 and not failed and not a.keep:
        shutil.rmtree(a.out, ignore_errors=True)
    else:
        print(f"chaos: histories and logs kept in {a.out}", flush=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
