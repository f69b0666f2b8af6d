#!/usr/bin/env python3
"""Memory a proxy holds for idle keep-alive connections.

Opens COUNT connections to URL (http or https; certificates are not checked), sends one
request on each and reads its whole answer (so the connection is fully set up, TLS and
HTTP/1.1 keep-alive included), then holds them all open and idle. Reads the resident memory
(VmRSS in /proc/PID/status) of the proxy's processes before and while holding, each once it
holds still; --children adds each PID's child processes (nginx: master and workers). Prints
one JSON object:

  {"open": 10000, "failed": 0, "closed_by_peer": 0, "rss_before_kib": ..., "rss_holding_kib": ...,
   "rss_after_kib": ..., "mib_per_10k": ...}

The caller raises `ulimit -n` (this process needs COUNT descriptors, and so does the proxy).

  idle_conns.py --url http://127.0.0.1:18082/v1/chat/completions --pid 1234 --children
"""

import argparse
import asyncio
import json
import os
import ssl
import sys
import time
import urllib.parse


def children(pid):
    out = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                out += [int(c) for c in f.read().split()]
    except OSError:
        pass
    return out


def rss_kib(pids, with_children):
    total = 0
    for pid in pids:
        procs = [pid] + (children(pid) if with_children else [])
        for p in procs:
            try:
                with open(f"/proc/{p}/status") as f:
                    for line in f:
                        if line.startswith("VmRSS:"):
                            total += int(line.split()[1])
            except OSError:
                pass
    return total


async def settled_rss(pids, with_children, most_s=20.0):
    """The RSS once it holds still (within 1 % over 2 s), or after most_s: a server frees
    memory for a while after its start (a password hash, the demo data)."""
    samples = []
    t0 = time.monotonic()
    while True:
        samples.append(rss_kib(pids, with_children))
        last = samples[-5:]
        if len(last) == 5 and max(last) - min(last) <= max(256, last[-1] // 100):
            return last[-1], True
        if time.monotonic() - t0 > most_s:
            return last[-1], False
        await asyncio.sleep(0.5)


async def read_response(reader):
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    length = None
    chunked = False
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if name == b"content-length":
            length = int(value.strip())
        elif name == b"transfer-encoding" and b"chunked" in value.lower():
            chunked = True
    if chunked:
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            await reader.readexactly(size + 2)
            if size == 0:
                break
    elif length:
        await reader.readexactly(length)
    return status


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--header", action="append", default=[], help="NAME: VALUE, repeatable")
    ap.add_argument("--count", type=int, default=10000)
    ap.add_argument("--pid", type=int, action="append", required=True)
    ap.add_argument("--children", action="store_true")
    ap.add_argument("--parallel", type=int, default=100, help="connections being set up at once")
    ap.add_argument("--hold", type=float, default=3.0, help="seconds idle before reading memory")
    a = ap.parse_args()

    u = urllib.parse.urlsplit(a.url)
    tls = None
    if u.scheme == "https":
        tls = ssl.create_default_context()
        tls.check_hostname = False
        tls.verify_mode = ssl.CERT_NONE
    port = u.port or (443 if tls else 80)
    path = (u.path or "/") + (f"?{u.query}" if u.query else "")
    request = (
        f"GET {path} HTTP/1.1\r\nHost: {u.hostname}:{port}\r\n"
        + "".join(f"{h}\r\n" for h in a.header)
        + "\r\n"
    ).encode()

    before, before_still = await settled_rss(a.pid, a.children)

    gate = asyncio.Semaphore(a.parallel)
    conns = []
    failed = 0
    errors = {}

    async def one():
        nonlocal failed
        async with gate:
            try:
                r, w = await asyncio.open_connection(u.hostname, port, ssl=tls)
                w.write(request)
                status = await read_response(r)
                if status != 200:
                    raise RuntimeError(f"status {status}")
                conns.append((r, w))
            except Exception as e:  # noqa: BLE001 - counted and named
                failed += 1
                key = type(e).__name__ + ": " + str(e)[:80]
                errors[key] = errors.get(key, 0) + 1

    t0 = time.monotonic()
    await asyncio.gather(*(one() for _ in range(a.count)))
    setup_s = time.monotonic() - t0

    await asyncio.sleep(a.hold)
    holding, holding_still = await settled_rss(a.pid, a.children)
    closed = sum(1 for r, _ in conns if r.at_eof())

    for _, w in conns:
        w.close()
    await asyncio.sleep(1.0)
    after = rss_kib(a.pid, a.children)

    still = len(conns) - closed
    per10k = (holding - before) / 1024 * 10000 / still if still else None
    print(
        json.dumps(
            {
                "open": still,
                "failed": failed,
                "closed_by_peer": closed,
                "errors": errors,
                "setup_s": round(setup_s, 2),
                "rss_before_kib": before,
                "rss_holding_kib": holding,
                "rss_after_kib": after,
                "rss_settled": before_still and holding_still,
                "mib_per_10k": round(per10k, 1) if per10k is not None else None,
            }
        )
    )


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(130)
