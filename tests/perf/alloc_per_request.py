#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""batond's heap allocations, instructions or system calls per request, one figure per route
(docs/benchmarks.md, "Allocations and instructions per request"). Counts, unlike times, do not depend on
what else the machine runs.

Usage: alloc_per_request.py BATOND [--mode alloc|callgrind|strace] [--requests 2000] [--preload SO]

Starts BATOND on a free loopback port with a fresh data directory and sends, on one keep-alive connection,
`requests` each of: acquire (a new key each), renew, GET, then release of those keys. Each phase is
measured alone:
  alloc      BATOND runs with tests/perf/alloc_count.so preloaded (built here if --preload is not given);
             allocations and bytes per request, from counter snapshots around the phase (SIGUSR2);
  callgrind  BATOND runs under valgrind --tool=callgrind; the counters are zeroed before and dumped after
             each phase (callgrind_control), instructions per request from the dump's totals;
  strace     strace -c -f attaches to BATOND for the phase; system calls per request by name.
Every thread of batond is counted, the journal's included (one client: one group commit per write).
"""

import argparse
import glob
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
OWNER = "perf-client-1"
TTL = 600000


def key(i):
    return f"perf/alloc/key-{i:06d}"


def request(conn, method, path, body=None):
    headers = {"Content-Type": "application/json"} if body is not None else {}
    conn.request(method, path, body=None if body is None else json.dumps(body), headers=headers)
    r = conn.getresponse()
    data = r.read()
    if r.status != 200:
        sys.exit(f"{method} {path}: {r.status} {data[:200]!r}")
    return json.loads(data)


def phases(n):
    tokens = {}

    def acquire():
        for i in range(n):
            tokens[i] = call("POST", f"/v1/locks/{key(i).replace('/', '%2F')}/acquire",
                                      {"owner": OWNER, "ttl_ms": TTL})["token"]

    def renew():
        for i in range(n):
            call("POST", f"/v1/locks/{key(i).replace('/', '%2F')}/renew",
                          {"owner": OWNER, "token": tokens[i], "ttl_ms": TTL})

    def get():
        for i in range(n):
            call("GET", f"/v1/locks/{key(i).replace('/', '%2F')}")

    def release():
        for i in range(n):
            call("POST", f"/v1/locks/{key(i).replace('/', '%2F')}/release",
                          {"owner": OWNER, "token": tokens[i]})

    return [("acquire", acquire), ("renew", renew), ("get", get), ("release", release)]


conn = None


def call(method, path, body=None):
    return request(conn, method, path, body)


def start(cmd, env=None):
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    for line in proc.stdout:
        m = re.search(r"listening on [^ ]*:(\d+)", line)
        if m:
            return proc, int(m.group(1))
    sys.exit("batond did not start")


def main():
    global conn
    ap = argparse.ArgumentParser()
    ap.add_argument("batond")
    ap.add_argument("--mode", choices=["alloc", "callgrind", "strace"], default="alloc")
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--preload")
    a = ap.parse_args()
    n = a.requests
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "data")
        args = [a.batond, "--listen", "127.0.0.1:0", "--data-dir", data, "--log-level", "warn"]
        env = dict(os.environ)
        counts = os.path.join(tmp, "counts")
        if a.mode == "alloc":
            so = a.preload
            if not so:
                so = os.path.join(tmp, "alloc_count.so")
                subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", so, os.path.join(HERE, "alloc_count.c")],
                               check=True)
            env["LD_PRELOAD"] = so
            env["BATON_ALLOC_COUNT_FILE"] = counts
            cmd = args
        elif a.mode == "callgrind":
            cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={tmp}/cg.%p"] + args
        else:
            cmd = args
        proc, port = start(cmd, env)
        conn = http.client.HTTPConnection("127.0.0.1", port)
        request(conn, "GET", "/healthz")  # the connection is open and batond past its start

        def alloc_snapshot():
            os.kill(proc.pid, signal.SIGUSR2)
            time.sleep(0.2)
            with open(counts) as f:
                return [int(x) for x in f.read().split()]

        try:
            for name, run in phases(n):
                if a.mode == "alloc":
                    before = alloc_snapshot()
                    run()
                    after = alloc_snapshot()
                    print(f"{name:8} allocations/request={(after[0] - before[0]) / n:.2f} "
                          f"bytes/request={(after[1] - before[1]) / n:.0f}")
                elif a.mode == "callgrind":
                    subprocess.run(["callgrind_control", "-z", str(proc.pid)], check=True,
                                   stdout=subprocess.DEVNULL)
                    run()
                    for f in glob.glob(f"{tmp}/cg.{proc.pid}*"):
                        os.unlink(f)
                    subprocess.run(["callgrind_control", "-d", str(proc.pid)], check=True,
                                   stdout=subprocess.DEVNULL)
                    total = 0
                    for f in glob.glob(f"{tmp}/cg.{proc.pid}*"):
                        with open(f) as fh:
                            for line in fh:
                                if line.startswith("summary:") or line.startswith("totals:"):
                                    total += int(line.split()[1])
                                    break
                    print(f"{name:8} instructions/request={total / n:.0f}")
                else:
                    out = os.path.join(tmp, f"strace.{name}")
                    st = subprocess.Popen(["strace", "-c", "-f", "-o", out, "-p", str(proc.pid)],
                                          stderr=subprocess.DEVNULL)
                    time.sleep(1.0)  # attached to every thread
                    run()
                    st.send_signal(signal.SIGINT)
                    st.wait()
                    calls = {}
                    with open(out) as fh:
                        for line in fh:
                            f = line.split()
                            if len(f) >= 5 and f[-1] not in ("syscall", "total") and f[3].isdigit():
                                calls[f[-1]] = int(f[3])
                    per = ", ".join(f"{k}={v / n:.2f}" for k, v in sorted(calls.items(), key=lambda kv: -kv[1])
                                    if v / n >= 0.01)
                    print(f"{name:8} syscalls/request={sum(calls.values()) / n:.2f} ({per})")
        finally:
            conn.close()
            proc.terminate()
            proc.wait()


if __name__ == "__main__":
    main()
