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
import textwrap
import threading
import time

ALL_FAULTS = [
    "delay", "drop_replies", "drop_requests", "duplicate", "reorder", "reset", "pause_worker", "pause_server",
    "kill_server", "kill_server_in_commit", "partition", "disk_full",
    "disk_stall", "fsync_eio", "disk_enospc", "kill_in_snapshot", "bitflip", "stale_write", "power_cut",
    "etcd_disk_stall",
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
# The leader of an etcd cluster stalled on its disk (Run.etcd_disk_stall): etcd's fault, not batond's.
ETCD_CLUSTER_FAULTS = {"etcd_disk_stall": "it stalls the disk of an etcd cluster's leader (--server etcd "
                                          "--etcd-members 3)"}
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


class EtcdMember:
    """One etcd member: its name, loopback ports, data directory and process (None until started)."""

    def __init__(self, name, client_port, peer_port, initial_cluster, out):
        self.name, self.client_port, self.peer_port = name, client_port, peer_port
        self.out = out
        self.initial_cluster = initial_cluster
        self.child = None

    def start(self):
        c, p = f"http://127.0.0.1:{self.client_port}", f"http://127.0.0.1:{self.peer_port}"
        # On a restart etcd ignores the --initial-* flags and rejoins from its data directory.
        argv = ["etcd", "--name", self.name, "--data-dir", os.path.join(self.out, "etcd-" + self.name),
                "--listen-client-urls", c, "--advertise-client-urls", c, "--listen-peer-urls", p,
                "--initial-advertise-peer-urls", p, "--initial-cluster", self.initial_cluster,
                "--initial-cluster-token", "baton-chaos", "--initial-cluster-state", "new"]
        self.child = Child(argv, os.path.join(self.out, f"etcd-{self.name}.log"), read_stdout=False)

    def signal(self, sig):
        self.child.signal(sig)


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


def wait_traced(pid, tracer, bound):
    """Whether `tracer` (a Popen) is tracing process `pid` within `bound` seconds; False once it has exited."""
    deadline = time.monotonic() + bound
    while tracer.poll() is None and time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/status") as f:
                if any(line.split() == ["TracerPid:", str(tracer.pid)] for line in f):
                    return True
        except OSError:
            return False
        time.sleep(0.01)
    return False


def strace_refusal():
    """Why strace cannot stall an etcd member here, or None. A sibling process stands in for the member:
    whether ptrace may attach depends on the relation (kernel.yama.ptrace_scope 1 allows only descendants, a
    container may lack CAP_SYS_PTRACE), so the check is an attach like the fault's."""
    if not shutil.which("strace"):
        return "needs strace (deploy/install-deps.sh test)"
    target = subprocess.Popen(["sleep", "30"])
    tracer = subprocess.Popen(["strace", "-qq", "-e", "trace=none", "-p", str(target.pid), "-o", "/dev/null"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        if wait_traced(target.pid, tracer, 10):
            return None
        tracer.kill()
        err = tracer.communicate()[1].decode(errors="replace").strip().splitlines()
        return "strace cannot attach to a process here (ptrace: root, or kernel.yama.ptrace_scope=0): " + \
            (err[-1] if err else "no attach within 10 s")
    finally:
        for p in (tracer, target):
            if p.poll() is None:
                p.terminate()
            p.wait()


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
        self.members = []  # etcd: EtcdMember, one per --etcd-members
        self.stall = None  # etcd_disk_stall: the strace holding the leader's fsyncs, while it runs
        self.proxies = []
        self.netns = None
        self.mount = None
        self.data_dir = os.path.join(self.out, "data")
        self.keys = [f"k{i}" for i in range(args.keys)]
        # Semaphores of --permits permits beside the locks (broken-lockd, the self-test's server, has none).
        self.semaphore_keys = [] if args.server.startswith("broken-lockd") else \
            [f"s{i}" for i in range(args.semaphore_keys)]
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
        """The etcd members on fixed loopback ports (etcd listens with SO_REUSEADDR, so a restart keeps them),
        then a wait until every one names the same leader."""
        n = self.args.etcd_members
        if not self.members:
            ports = [(self.free_port(), self.free_port()) for _ in range(n)]
            cluster = ",".join(f"m{i}=http://127.0.0.1:{peer}" for i, (_, peer) in enumerate(ports))
            self.members = [EtcdMember(f"m{i}", client, peer, cluster, self.out) for i, (client, peer) in
                            enumerate(ports)]
        for m in self.members:
            m.start()  # all at once: a member of a new cluster serves clients once a quorum has met
        for m in self.members:
            self.member_started(m)
        if self.etcd_leader(60) is None:
            raise RuntimeError("the etcd members did not agree on a leader within 60 s; see etcd-m*.log")

    def member_started(self, m):
        """Waits until member `m`, just started, answers clients."""
        deadline = time.monotonic() + 60
        while http_json(m.client_port, "GET", "/version", timeout=2)[0] != 200:
            if time.monotonic() > deadline or m.child.proc.poll() is not None:
                raise RuntimeError(f"etcd member {m.name} did not start; see etcd-{m.name}.log")
            time.sleep(0.1)
        # One member is the whole server, as batond is; a member of a cluster is not.
        self.log.emit("server_start" if len(self.members) == 1 else "member_start", member=m.name,
                      pid=m.child.proc.pid, port=m.client_port)

    def kill_member(self, m):
        exited = m.child.proc.poll()
        m.child.signal(signal.SIGKILL)
        m.child.proc.wait()
        self.log.emit("server_kill" if len(self.members) == 1 else "member_kill", member=m.name,
                      pid=m.child.proc.pid, exited_before=exited)
        if exited is not None:
            print(f"chaos: etcd member {m.name} had exited by itself (status {exited}) before it was killed",
                  flush=True)

    def etcd_status(self, m, timeout=1.0):
        """(member id, leader id) as member `m` sees them (POST /v3/maintenance/status; the leader is 0 while
        it knows of none), or None when it does not answer."""
        status, body = http_json(m.client_port, "POST", "/v3/maintenance/status", {}, timeout=timeout)
        if status != 200 or not isinstance(body, dict):
            return None
        # The gateway writes uint64 fields as strings.
        return int(body.get("header", {}).get("member_id", 0)), int(body.get("leader", 0))

    def etcd_leader(self, bound):
        """The member every answering one (a majority at least) names as leader, and which says so itself; None
        when there is none within `bound` seconds (an election, a leader that hangs)."""
        deadline = time.monotonic() + bound
        while True:
            seen = [(m, self.etcd_status(m)) for m in self.members]
            answered = [(m, st) for m, st in seen if st]
            leaders = {st[1] for _, st in answered}
            if len(answered) > len(self.members) // 2 and len(leaders) == 1 and 0 not in leaders:
                for m, (member_id, leader) in answered:
                    if member_id == leader:
                        return m
            if time.monotonic() >= deadline:
                return None
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
            if f in ETCD_CLUSTER_FAULTS and (a.server != "etcd" or a.etcd_members < 3):
                self.skipped[f] = ETCD_CLUSTER_FAULTS[f]
        if "etcd_disk_stall" in a.faults and "etcd_disk_stall" not in self.skipped:
            why = strace_refusal()
            if why:
                self.skipped["etcd_disk_stall"] = why
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
        # One proxy for batond; one for each etcd member, whose client port the SDK's URL names in its place.
        upstreams = [("", self.server_port)] if not self.members else \
            [("-" + m.name if len(self.members) > 1 else "", m.client_port) for m in self.members]
        for suffix, port in upstreams:
            p = Proxy(self.bin, port, self.out, "proxy" + suffix)
            p.role = "server"
            self.proxies.append(p)
        self.server_proxies = list(self.proxies)
        ns_addr = None
        if "partition" in a.faults and "partition" not in self.skipped:
            try:
                ns_addr = self.setup_netns()
            except (subprocess.CalledProcessError, OSError) as e:
                self.skipped["partition"] = f"cannot create a network namespace and veth pair: {e}"
                self.remove_netns()
        ns_server_proxies = []
        if "partition" in a.faults and "partition" not in self.skipped:
            for suffix, port in upstreams + [("store", self.store_port)]:
                p = Proxy(self.bin, port, self.out, "ns-proxy-" + (suffix.lstrip("-") or "server"), listen=ns_addr)
                p.role = "store" if suffix == "store" else "server"
                self.proxies.append(p)
                if p.role == "server":
                    ns_server_proxies.append(p)
        for i in range(a.workers):
            name = f"w{i}"
            scheme = "etcd" if a.server == "etcd" else "http"
            host, proxies, prefix = "127.0.0.1", self.server_proxies, []
            store_url = f"http://127.0.0.1:{self.store_port}"
            if ns_addr and i == a.workers - 1:
                tp = next(p for p in self.proxies if p.role == "store")
                host, proxies, store_url = ns_addr, ns_server_proxies, f"http://{ns_addr}:{tp.port}"
                prefix = ["ip", "netns", "exec", self.netns[0]]
                name = f"w{i}-netns"
            # Every etcd member is named, each worker starting at another one: the SDK fails over in URL order,
            # so the workers are spread over the members and a fault of one member meets some of them first.
            order = proxies[i % len(proxies):] + proxies[:i % len(proxies)]
            server_url = f"{scheme}://" + ",".join(f"{host}:{p.port}" for p in order)
            argv = prefix + [os.path.join(self.bin, "chaos-worker"), "--id", name, "--server", server_url,
                             "--store", store_url, "--keys", ",".join(self.keys), "--events",
                             os.path.join(self.out, name + ".jsonl"), "--seed", str(a.seed * 1000 + i),
                             "--ttl-ms", str(self.ttl_ms)]
            if self.semaphore_keys:
                argv += ["--semaphore-keys", ",".join(self.semaphore_keys), "--permits", str(a.permits)]
            if a.unsafe_worker:
                argv.append("--ignore-loss")
            elif a.server == "batond" and i % 2 == 0:
                # Every other worker raises its lease's TTL thirtyfold with a renew in half its rounds (batond's
                # extend record, which a disk stall can catch); such leases are held for seconds, so not all
                # workers do. etcd leases keep the TTL they were granted with; broken-lockd has no disk.
                argv += ["--raise-ttl-ms", str(30 * self.ttl_ms)]
            elif len(self.members) > 1:
                # Leases held for up to 8 TTLs: an etcd leader's disk stall (1.5-3 TTLs) can only make etcd
                # revoke a lease held from before it began until after it ended.
                argv += ["--long-hold-ms", str(8 * self.ttl_ms)]
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

    # How long strace delays each fsync and fdatasync of the stalled leader: longer than any stall, which ends
    # when strace lets go of the process.
    STALL_DELAY_US = 60_000_000

    def etcd_disk_stall(self):
        """The leader's disk stalls for 1.5-3 TTLs: strace holds each of its fsync and fdatasync calls (etcd is
        a Go binary, LD_PRELOAD does not reach its system calls), then lets go. The other members elect a
        leader meanwhile and keep the workers' leases alive; etcd 3.4 before 3.4.31 then revokes some of them
        as expired on the old leader's lease clock (etcd issues 12528 and 15247). The holder's key watch must
        report such a loss before the next holder is granted the key, and the fence covers a write in between.
        The workers' own acquires and releases give the leader log entries to sync."""
        hold = self.rng.uniform(1.5, 3) * self.ttl_ms / 1000
        leader = self.etcd_leader(10)
        if leader is None:
            self.log.emit("fault", kind="etcd_disk_stall", seconds=hold, skipped="no leader agreed on within 10 s")
            return
        pid = leader.child.proc.pid
        self.log.emit("fault", kind="etcd_disk_stall", seconds=hold, member=leader.name, pid=pid)
        self.stall = Child(["strace", "-f", "-qq", "-p", str(pid), "-e", "trace=fsync,fdatasync", "-e",
                            f"inject=fsync,fdatasync:delay_enter={self.STALL_DELAY_US}", "-o", "/dev/null"],
                           os.path.join(self.out, "strace.log"), read_stdout=False)
        if not wait_traced(pid, self.stall.proc, 10):
            status = self.stall.proc.poll()
            self.stall.stop(5)
            self.stall = None
            raise RuntimeError(f"strace did not attach to etcd member {leader.name} within 10 s (status {status}); "
                               "see strace.log")
        time.sleep(hold)
        self.stall.stop(10)  # SIGTERM: strace detaches, and the held calls go on to the disk
        self.log.emit("stall_end", member=leader.name, strace_status=self.stall.proc.returncode)
        self.stall = None

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

    def fault_target(self):
        """What a proxy or server fault acts on: batond and its proxy, or an etcd member (one of a cluster, at
        random) and the proxy in front of it, with the fields that name the member in the fault's line."""
        if not self.members:
            return None, self.server_proxies[0], {}
        i = self.rng.randrange(len(self.members)) if len(self.members) > 1 else 0
        m = self.members[i]
        fields = {}
        if len(self.members) > 1:
            st = self.etcd_status(m, timeout=0.5)
            fields = {"member": m.name, "leader": bool(st and st[0] == st[1])}
        return m, self.server_proxies[i], fields

    def inject(self, kind):
        r = self.rng
        if kind in ("delay", "drop_replies", "drop_requests", "duplicate", "reorder", "reset", "pause_server",
                    "kill_server"):
            member, p, where = self.fault_target()
        if kind == "delay":
            ms, hold = r.randint(20, 400), r.uniform(0.5, 3)
            self.log.emit("fault", kind=kind, delay_ms=ms, seconds=hold, **where)
            p.command(f"delay {ms}")
            time.sleep(hold)
            p.command("delay 0")
        elif kind == "drop_replies":
            n, style = r.randint(1, 3), r.choice(["hang", "reset"])
            self.log.emit("fault", kind=kind, count=n, style=style, **where)
            p.command(f"drop-replies {n} {style}")
        elif kind == "drop_requests":
            n = r.randint(1, 3)
            self.log.emit("fault", kind=kind, count=n, **where)
            p.command(f"drop-requests {n}")
        elif kind in ("duplicate", "reorder"):
            n, ms = r.randint(1, 4), (0 if kind == "duplicate" else r.randint(100, 1500))
            self.log.emit("fault", kind=kind, count=n, delay_ms=ms, **where)
            p.command(f"duplicate {n} {ms}")
        elif kind == "reset":
            self.log.emit("fault", kind=kind, **where)
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
            self.log.emit("fault", kind=kind, seconds=hold, **where)
            target = member or self.server
            target.signal(signal.SIGSTOP)
            time.sleep(hold)
            target.signal(signal.SIGCONT)
        elif kind == "kill_server":
            down = r.uniform(0, 1.5)
            self.log.emit("fault", kind=kind, down_s=down, **where)
            if member:
                self.kill_member(member)
                time.sleep(down)
                member.start()
                self.member_started(member)
            else:
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
        elif kind == "etcd_disk_stall":
            self.etcd_disk_stall()
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
            for what, c in [(f"etcd member {m.name}", m.child) for m in self.members] or [("the server", self.server)]:
                if c.proc.poll() is not None:
                    raise RuntimeError(f"{what} exited on its own (status {c.proc.returncode})")

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
        for c in [self.server] + [m.child for m in self.members] + self.workers:
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
                # A permit's write names its slot (Fencing-Slot): its resource is key#slot, as the workers say.
                key = f"{h['resource']}#{h['slot']}" if "slot" in h else h["resource"]
                f.write(json.dumps({"t": h["ts_us"], "src": "store", "ev": "store_write", "key": key,
                                    "token": h["token"], "accepted": h["accepted"],
                                    "highest_token": h["highest_token"]}) + "\n")

    def cleanup(self):
        # strace first: it lets go of the member it stalls when it stops.
        for c in [self.stall] + self.workers + [self.server, self.store] + [m.child for m in self.members] + \
                self.proxies:
            if c:
                c.stop(5)
        self.remove_netns()
        if self.mount:
            subprocess.run(["umount", "-l", self.mount], check=False)


def early_losses(out_dir):
    """The leases the server told a worker's SDK were gone while it still owed them (before the last grant's
    or renew's send time + TTL, the checker's certain validity): on etcd, leases it revoked early. One dict
    per loss: holder, key, token, how the SDK learned it (`watch` or `renew`), and `next_grant_ms`, when the
    key's next grant (a larger token) arrived after the loss (negative: before it; None: never)."""
    events = []
    for name in os.listdir(out_dir):
        if name.endswith(".jsonl") and name not in ("runner.jsonl", "store.jsonl"):
            with open(os.path.join(out_dir, name)) as f:
                for line in f:
                    try:
                        events.append(json.loads(line))
                    except ValueError:
                        pass  # a worker killed mid-line
    events.sort(key=lambda e: e["t"])
    owed, grants, losses = {}, {}, []
    for e in events:
        lease = (e.get("src"), e.get("key"), e.get("token"))
        if e["ev"] == "acquire_granted":
            owed[lease] = e["sent"] + e["ttl_ms"] * 1000
            grants.setdefault(e["key"], []).append(e)
        elif e["ev"] == "renewed" and lease in owed:
            ttl_ms = e.get("ttl_ms") or next(g["ttl_ms"] for g in grants[e["key"]] if g["token"] == e["token"])
            owed[lease] = max(owed[lease], e["sent"] + ttl_ms * 1000)
        elif e["ev"] == "lost" and lease in owed and e["t"] < owed[lease]:
            # The server's word (lease_fsm's reasons), not the client's own deadline passing.
            reason = e.get("reason", "")
            by = "watch" if "seen by the key watch" in reason else \
                "renew" if reason.startswith("server refused the renew") else None
            if by:
                losses.append({"holder": e["src"], "key": e["key"], "token": e["token"], "t": e["t"], "by": by})
    for loss in losses:
        later = [g["t"] for g in grants[loss["key"]] if g["token"] > loss["token"]]
        loss["next_grant_ms"] = (min(later) - loss["t"]) / 1000 if later else None
    return losses


# One line per fault kind for --help (docs/reliability.md has the details); the servers it applies to last.
FAULT_HELP = {
    "delay": "the proxy delays every chunk 20-400 ms for 0.5-3 s",
    "drop_replies": "the proxy swallows the next 1-3 replies",
    "drop_requests": "the proxy swallows the next 1-3 requests",
    "duplicate": "the proxy sends the next 1-4 requests twice",
    "reorder": "as duplicate, the copy 100-1500 ms later",
    "reset": "the proxy resets every open connection",
    "pause_worker": "SIGSTOP of a worker for 0.2 s to 3 TTLs",
    "pause_server": "SIGSTOP of the server for 0.1 s to 2 TTLs",
    "kill_server": "kill -9 of the server, restarted after 0-1.5 s",
    "kill_server_in_commit": "kill -9 of batond 0-15 ms into an acquire burst",
    "partition": "the namespaced worker's link down for 0.5-4 s (root)",
    "disk_full": "batond's tmpfs filled (root)",
    "disk_stall": "batond's writes and fsyncs block 0.5-4 s, then sometimes kill -9",
    "fsync_eio": "batond's next fsync fails with EIO",
    "disk_enospc": "batond's writes fail with ENOSPC",
    "kill_in_snapshot": "batond dies around its snapshot rename",
    "bitflip": "one bit of batond's log flipped while it is down",
    "stale_write": "a worker stopped between its lease check and its write",
    "power_cut": "kill -9 of batond in an acquire burst, then only what it synced survives",
    "etcd_disk_stall": "strace holds the etcd leader's fsyncs 1.5-3 TTLs (needs ptrace)",
}
FAULT_SERVERS = {f: "batond" for f in BATOND_ONLY_FAULTS} | {"etcd_disk_stall": "etcd, 3 members or more"}


def fault_epilog():
    rows = [f"  {f:<22} {FAULT_HELP[f]} [{FAULT_SERVERS.get(f, 'batond, etcd')}]" for f in ALL_FAULTS]
    text = ("Fault kinds (--faults; default: all of them), with the servers each applies to; a kind that does "
            "not apply is skipped with a line saying why. With --server etcd a server fault acts on one member, "
            "and with more than one member a proxy fault acts on the proxy in front of one, both at random. "
            "broken-lockd (the self-test) takes the proxy and worker faults only.")
    return textwrap.fill(text, 100, break_on_hyphens=False) + "\n" + "\n".join(rows)


def main():
    ap = argparse.ArgumentParser(prog="tests/chaos/run.sh", description=__doc__, epilog=fault_epilog(),
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, help="replays a run's fault schedule and workload (default: random)")
    ap.add_argument("--duration", type=parse_duration, help="how long faults are injected (default 60s; --long: 30m)")
    ap.add_argument("--long", action="store_true", help="long mode: 30 minutes unless --duration says otherwise")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--keys", type=int, default=3, help="contended keys")
    ap.add_argument("--semaphore-keys", type=int, default=1,
                    help="contended semaphores, beside the keys (default 1; not with broken-lockd)")
    ap.add_argument("--permits", type=int, default=2, help="each semaphore's permit count (default 2)")
    ap.add_argument("--faults", default=",".join(ALL_FAULTS), help="comma-separated fault kinds, or none")
    ap.add_argument("--server", default="batond",
                    help="batond, etcd (through the SDK's etcd backend), or broken-lockd:BUG (self-test)")
    ap.add_argument("--etcd-members", type=int, default=1,
                    help="members of the etcd cluster (default 1); the workers' URL names every one")
    ap.add_argument("--unsafe-worker", action="store_true", help="workers ignore loss (checker self-test)")
    ap.add_argument("--unsafe-store", action="store_true", help="the store skips its token check (self-test)")
    ap.add_argument("--expect-violation", help="pass exactly when the checker finds this kind (self-test)")
    ap.add_argument("--known-violation", action="append", default=[], metavar="KIND",
                    help="violations of KIND, a defect of the server under test, are shown and counted but do not "
                    "fail the run (etcd_revoked_live_lease: etcd 3.4 before 3.4.31 after its leader's disk stall)")
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
    if a.semaphore_keys < 0 or not 2 <= a.permits <= 65535:
        ap.error("--semaphore-keys must not be negative, --permits must be 2 to 65535")
    if a.server not in ("batond", "etcd") and not a.server.startswith("broken-lockd:"):
        ap.error("--server must be batond, etcd or broken-lockd:BUG")
    if a.etcd_members < 1 or (a.etcd_members != 1 and a.server != "etcd"):
        ap.error("--etcd-members must be at least 1, and goes with --server etcd")
    a.bin_dir = os.path.abspath(os.path.join(a.build_dir, "bin"))
    a.batond = os.path.abspath(a.batond or os.path.join(a.bin_dir, "batond"))
    a.out = a.out or tempfile.mkdtemp(prefix="baton-chaos-")
    os.makedirs(a.out, exist_ok=True)
    print(f"chaos: seed={a.seed} duration={a.duration:g}s workers={a.workers} keys={a.keys} "
          f"semaphores={a.semaphore_keys}x{a.permits} out={a.out}", flush=True)

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
    if a.server == "etcd":
        # etcd's early revocations (etcd_disk_stall) are no violation by themselves; the checker says whether
        # a second lease overlapped the first. What the holders saw, and how long before the next grant:
        losses = early_losses(a.out)
        by = {how: sum(loss["by"] == how for loss in losses) for how in ("watch", "renew")}
        gaps = sorted(loss["next_grant_ms"] for loss in losses if loss["next_grant_ms"] is not None)
        print(f"chaos: etcd: leases lost while still owed by the server: {len(losses)} (key watch {by['watch']}, "
              f"renew {by['renew']}); the key's next grant came after the loss by (ms, negative: before it): "
              f"{' '.join(f'{g:.1f}' for g in gaps) or 'none'}", flush=True)
    files = sorted(os.path.join(a.out, f) for f in os.listdir(a.out) if f.endswith(".jsonl"))
    argv = [os.path.join(a.bin_dir, "chaos-check"), "--seed", str(a.seed)]
    if a.expect_violation:
        argv += ["--expect-violation", a.expect_violation]
    for kind in a.known_violation:
        argv += ["--known-violation", kind]
    rc = subprocess.run(argv + files).returncode
    if rc == 0 and not failed and not a.keep:
        shutil.rmtree(a.out, ignore_errors=True)
    else:
        print(f"chaos: histories and logs kept in {a.out}", flush=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
