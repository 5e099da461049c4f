#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Server CPU per renewed lease: batond's own CPU time (utime + stime from /proc/PID/stat) over many
POST /v1/renew batches, and over as many single renews for comparison (docs/benchmarks.md, "Batch renewal").

Usage: renew_batch_cpu.py BATOND [--batch 100] [--batches 5000] [--singles 50000]

Starts BATOND on a free loopback port with a fresh data directory and --max-body-bytes large enough for the
batch, holds `batch` leases, then renews them, each time with the TTL they already have (the common case:
nothing to log, answered from memory). One keep-alive connection; the client's own CPU is not counted.
"""

import argparse
import http.client
import json
import os
import re
import subprocess
import sys
import tempfile
import time

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime


def post(conn, path, body):
    conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    data = r.read()
    if r.status not in (200, 409):
        sys.exit(f"{path}: {r.status} {data[:200]!r}")
    return r.status, data


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("batond")
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--batches", type=int, default=5000)
    ap.add_argument("--singles", type=int, default=50000)
    a = ap.parse_args()
    ttl = 600000
    with tempfile.TemporaryDirectory() as data:
        proc = subprocess.Popen(
            [a.batond, "--listen", "127.0.0.1:0", "--data-dir", data, "--max-body-bytes", "262144",
             "--log-level", "warn"],
            stdout=subprocess.PIPE, text=True)
        try:
            port = None
            for line in proc.stdout:
                m = re.search(r"listening on [^ ]*:(\d+)", line)
                if m:
                    port = int(m.group(1))
                    break
            if port is None:
                sys.exit("batond did not start")
            conn = http.client.HTTPConnection("127.0.0.1", port)
            leases = []
            for i in range(a.batch):
                key = f"bench/lease-{i:04d}"
                _, body = post(conn, f"/v1/locks/bench%2Flease-{i:04d}/acquire",
                               json.dumps({"owner": "bench-owner", "ttl_ms": ttl}))
                leases.append({"key": key, "owner": "bench-owner", "token": json.loads(body)["token"],
                               "ttl_ms": ttl})
            batch = json.dumps({"leases": leases})
            status, body = post(conn, "/v1/renew", batch)
            answer = json.loads(body)["results"]
            if status != 200 or any("error" in r for r in answer):
                sys.exit("the batch was not renewed")

            before, wall = cpu_seconds(proc.pid), time.monotonic()
            for _ in range(a.batches):
                post(conn, "/v1/renew", batch)
            batch_cpu, batch_wall = cpu_seconds(proc.pid) - before, time.monotonic() - wall

            single = json.dumps({"owner": "bench-owner", "token": leases[0]["token"], "ttl_ms": ttl})
            before, wall = cpu_seconds(proc.pid), time.monotonic()
            for _ in range(a.singles):
                post(conn, "/v1/locks/bench%2Flease-0000/renew", single)
            single_cpu, single_wall = cpu_seconds(proc.pid) - before, time.monotonic() - wall

            renewed = a.batch * a.batches
            print(f"batch of {a.batch}: {a.batches} requests, {renewed} leases renewed in {batch_wall:.1f} s; "
                  f"batond CPU {batch_cpu:.2f} s = {batch_cpu / renewed * 1e6:.2f} us per lease, "
                  f"{batch_cpu / a.batches * 1e6:.0f} us per request (body {len(batch)} bytes)")
            print(f"single renews: {a.singles} in {single_wall:.1f} s; batond CPU {single_cpu:.2f} s = "
                  f"{single_cpu / a.singles * 1e6:.2f} us per lease")
        finally:
            proc.terminate()
            proc.wait(timeout=30)


if __name__ == "__main__":
    main()
