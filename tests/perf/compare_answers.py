#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Sends the same requests to two batond binaries (each on a fresh data directory) and compares every answer
byte for byte: status line, headers in their order, body. For a change to how batond writes its answers,
which must not change what a client reads (docs/benchmarks.md, "Allocations and instructions per request").

Usage: compare_answers.py BATOND_BEFORE BATOND_AFTER

The requests cover every route, answers that quote what the client sent (keys, owners and values with
quotes, backslashes and U+2028), refusals (409 held, lost, not_owner; 400, 404, 405, 413, 415, 403) and a
keep-alive connection. `ttl_remaining_ms` depends on timing and is left out of the comparison.
"""
import socket, subprocess, re, sys, tempfile, time, json
def start(binary, d):
    p = subprocess.Popen([binary, "--listen", "127.0.0.1:0", "--data-dir", d, "--log-level", "warn"], stdout=subprocess.PIPE, text=True)
    for line in p.stdout:
        m = re.search(r"listening on [^ ]*:(\d+)", line)
        if m: return p, int(m.group(1))
def req(method, path, body=None, ctype="application/json", extra=""):
    b = b"" if body is None else (body if isinstance(body, bytes) else body.encode())
    h = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    if body is not None: h += f"Content-Type: {ctype}\r\nContent-Length: {len(b)}\r\n"
    return (h + extra + "\r\n").encode() + b
K = "/v1/locks/a%22b%5C%E2%80%A8c"
reqs = [
 req("GET", "/healthz"), req("GET", "/v1/capabilities"),
 req("POST", K + "/acquire", '{"owner":"o\\"1\\\\\\u2028","ttl_ms":60000,"value":"v\\"\\\\\\u2028"}'),
 req("POST", K + "/acquire", '{"owner":"o2","ttl_ms":60000}'),
 req("GET", K), req("GET", "/v1/locks/none"),
 req("POST", K + "/renew", '{"owner":"o\\"1\\\\\\u2028","token":1,"ttl_ms":60000}'),
 req("POST", K + "/renew", '{"owner":"o\\"1\\\\\\u2028","token":7,"ttl_ms":60000}'),
 req("POST", K + "/renew", '{"owner":"x","token":1,"ttl_ms":60000}'),
 req("POST", "/v1/locks/free/renew", '{"owner":"x","token":1,"ttl_ms":60000}'),
 req("POST", "/v1/renew", '{"leases":[{"key":"a\\"b\\\\\\u2028c","owner":"o\\"1\\\\\\u2028","token":1,"ttl_ms":60000},{"key":"zz","owner":"q","token":3,"ttl_ms":1000}]}'),
 req("POST", "/v1/renew", '{"leases":[]}'),
 req("POST", K + "/release", '{"owner":"o2","token":1}'),
 req("POST", K + "/acquire", '{"owner":"o","owner":"p","ttl_ms":60000}'),
 req("POST", K + "/acquire", '{"owner":"o"'),
 req("POST", K + "/acquire", '{"ttl_ms":60000}'),
 req("POST", K + "/acquire", '{"owner":"o","ttl_ms":1.5}'),
 req("POST", K + "/acquire", '{"owner":"o","ttl_ms":60000}', ctype="text/plain"),
 req("GET", K + "/acquire"), req("GET", "/v1/nothing/here/at/all/x"), req("GET", "/v1/locks/%FF"),
 req("GET", K + "?wait_ms=x"),
 req("POST", K + "/release", '{"owner":"o\\"1\\\\\\u2028","token":1}'),
 req("POST", K + "/release", '{"owner":"o\\"1\\\\\\u2028","token":1}'),
 req("GET", "/v1/locks/k", extra="Origin: http://evil\r\n"),
 req("HEAD", "/v1/locks/k"),
 req("POST", K + "/acquire", '{"owner":"o","ttl_ms":60000}', extra="Transfer-Encoding: gzip\r\n"),
]
def run(binary):
    out = []
    with tempfile.TemporaryDirectory() as d:
        p, port = start(binary, d)
        try:
            for r in reqs:
                s = socket.create_connection(("127.0.0.1", port)); s.sendall(r); s.shutdown(socket.SHUT_WR)
                data = b""
                while True:
                    c = s.recv(65536)
                    if not c: break
                    data += c
                s.close(); out.append(data)
            # keep-alive: two requests on one connection
            s = socket.create_connection(("127.0.0.1", port)); s.sendall(req("GET", "/healthz") + req("GET", "/v1/locks/none") + req("POST", "/v1/locks/big/acquire", "x" * 20000))
            try: s.shutdown(socket.SHUT_WR)
            except OSError: pass
            data = b""
            while True:
                try: c = s.recv(65536)
                except OSError: break
                if not c: break
                data += c
            out.append(data)
        finally:
            p.terminate(); p.wait()
    return out
a = run(sys.argv[1]); b = run(sys.argv[2])
same = 0
for i, (x, y) in enumerate(zip(a, b)):
    x = re.sub(rb"ttl_remaining_ms\":\d+", b"T", x); y = re.sub(rb"ttl_remaining_ms\":\d+", b"T", y)
    if x != y: print("DIFF", i, x, y, sep="\n")
    else: same += 1
print(same, "of", len(a), "answers identical")
sys.exit(0 if same == len(a) else 1)
