#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes the seed corpus of fuzz_lock_service (tests/fuzz/corpus/fuzz_lock_service/) from readable scripts.

The target reads its input with libFuzzer's FuzzedDataProvider: numbers and choices from the end of the
input, raw request text from the front. Each script below is a list of steps in the target's terms; this
file turns them into those bytes, so a seed can be read (and changed) here rather than in hex.

usage: python3 tests/fuzz/lock_service_seeds.py   (rewrites the seeds)
"""

from pathlib import Path

# The target's small sets, by index (fuzz_lock_service.cpp).
KEYS = ["a", "b", "jobs/nightly"]
OWNERS = ["o1", "o2", "o3"]
CLIENTS = ["", "team"]
TTLS = [100, 250, 1000, 5000, 3_600_000]
ADVANCES = [1, 99, 100, 150, 250, 999, 1000, 60_000]
KINDS = ["acquire", "renew", "release", "get"]
# Which token a renew or release sends: the acknowledged one, the table's, an older one, the next one, 1, max.
TOKENS = ["told", "held", "older", "next", "one", "max"]


class Script:
    def __init__(self, disk_running=True):
        self.front = b""  # raw request text, consumed from the front
        self.back = []  # bytes in the order they are consumed from the end
        self.boolean(disk_running)

    def integer(self, value, lo, hi):
        span, offset, raw = hi - lo, 0, []
        rest = value - lo
        while offset < 64 and (span >> offset) > 0:
            offset += 8
            raw.append(0)
        for i in range(len(raw)):  # most significant byte first
            raw[i] = (rest >> (8 * (len(raw) - 1 - i))) & 0xFF
        self.back += raw
        return self

    def boolean(self, value):
        self.back.append(1 if value else 0)
        return self

    def pick(self, options, value):
        return self.integer(options.index(value), 0, len(options) - 1)

    def request(self, kind, key="a", owner="o1", client="", ttl=1000, token="told"):
        self.integer(0, 0, 9)  # ops 0-3 are requests
        who = KEYS.index(key) + len(KEYS) * (OWNERS.index(owner) + len(OWNERS) * CLIENTS.index(client))
        self.integer(who, 0, len(KEYS) * len(OWNERS) * len(CLIENTS) - 1)
        self.integer(KINDS.index(kind) + 4 * TTLS.index(ttl), 0, 4 * len(TTLS) - 1)
        if kind in ("renew", "release"):
            self.pick(TOKENS, token)
        self.back.append(0)  # no byte mutated
        return self

    def raw(self, text):
        self.integer(4, 0, 9)
        self.front += text.replace(b"\\", b"\\\\") + b"\\\n"
        return self

    def advance(self, ms):
        return self.integer(5, 0, 9).pick(ADVANCES, ms)

    def sweep(self):
        return self.integer(6, 0, 9)

    def disk_catches_up(self):
        return self.integer(7, 0, 9)

    def crash(self, torn_bytes=0, advance=1, disk_running=True):
        self.integer(8, 0, 9).boolean(torn_bytes > 0)
        if torn_bytes:
            self.integer(torn_bytes, 1, 37)
        return self.pick(ADVANCES, advance).boolean(disk_running)

    def data(self):
        return self.front + bytes(reversed(self.back))


def seeds():
    yield "acquire_renew_release_restart", (
        Script()
        .request("acquire", ttl=1000)
        .request("renew", ttl=5000)
        .request("get")
        .crash()
        .request("get")
        .request("release")
        .crash()
        .request("acquire", owner="o2")
    )
    yield "contention_and_expiry", (
        Script()
        .request("acquire", ttl=100)
        .request("acquire", owner="o2", client="team")
        .advance(99)
        .request("renew", ttl=100)
        .advance(100)
        .request("acquire", owner="o2")
        .request("release", token="older")
        .sweep()
        .crash(advance=60_000)
        .request("renew", owner="o2", token="held")
    )
    yield "stalled_disk_crash", (
        Script(disk_running=False)
        .request("acquire", key="jobs/nightly")
        .request("acquire", key="jobs/nightly", owner="o2")
        .crash(torn_bytes=20, disk_running=False)
        .request("acquire", key="jobs/nightly", owner="o3")
        .request("renew", key="jobs/nightly", owner="o3", ttl=3_600_000)
        .disk_catches_up()
        .crash(torn_bytes=9)
        .request("get", key="jobs/nightly")
    )
    script = Script()
    for i in range(6):
        script.request("acquire", key=KEYS[i % 3], owner=OWNERS[i % 3]).request(
            "release", key=KEYS[i % 3], owner=OWNERS[i % 3]
        )
    yield "compaction_and_token_floor", script.crash().request("acquire", key="b")
    yield "malformed_requests", (
        Script()
        .request("acquire")
        .raw(b'POST /v1/locks/a/acquire HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 27\r\n\r\n'
             b'{"owner":"o2","owner":"o1"}')
        .raw(b"GET /v1/locks/a/renew HTTP/1.1\r\n\r\n")
        .request("release", token="next")
    )

def main():
    out = Path(__file__).resolve().parent / "corpus" / "fuzz_lock_service"
    out.mkdir(parents=True, exist_ok=True)
    for name, script in seeds():
        (out / name).write_bytes(script.data())


if __name__ == "__main__":
    main()
