#!/usr/bin/env python3
"""How long a route change takes to reach the gateway's traffic.

Switches a route between two endpoints (PATCH /api/v1/routes/{id}) ROUNDS times, back and
forth, and after each PATCH's answer polls the gateway as fast as one keep-alive connection
allows until the answer comes from the new endpoint's upstream (its body contains that
endpoint's marker). Prints one JSON object: per round the milliseconds from the PATCH's
answer and from its send to the first answer of the new upstream, the polls that still got
the old one, and median and max of both times (each includes one poll's round trip, whose
median is given too).

  route_switch.py --api http://127.0.0.1:18083/api/v1 --token TOKEN --route ROUTE \
      --endpoint EP1=cmpl-1 --endpoint EP2=cmpl-2 \
      --gateway http://127.0.0.1:18090/v1/chat/completions --gateway-token syg_...
"""

import argparse
import http.client
import json
import socket
import ssl
import statistics
import sys
import time
import urllib.parse


def connect(url):
    u = urllib.parse.urlsplit(url)
    if u.scheme == "https":
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        c = http.client.HTTPSConnection(u.hostname, u.port or 443, context=ctx, timeout=10)
    else:
        c = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=10)
    c.connect()
    # Small requests, one at a time: no Nagle delay on the client side.
    c.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return c, (u.path or "/") + (f"?{u.query}" if u.query else "")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--api", required=True, help="http://HOST:PORT/api/v1")
    ap.add_argument("--token", required=True, help="an API token of a tenant admin")
    ap.add_argument("--route", required=True, help="the route's id")
    ap.add_argument("--endpoint", action="append", required=True, help="ID=MARKER, two of them")
    ap.add_argument("--gateway", required=True, help="a URL the route serves")
    ap.add_argument("--gateway-token", required=True)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--pause", type=float, default=0.2, help="seconds between rounds")
    a = ap.parse_args()
    endpoints = [e.split("=", 1) for e in a.endpoint]
    if len(endpoints) != 2:
        sys.exit("give two --endpoint ID=MARKER")

    api, api_base = connect(a.api)
    gw, gw_path = connect(a.gateway)
    api_headers = {"authorization": f"Bearer {a.token}", "content-type": "application/json"}
    gw_headers = {"authorization": f"Bearer {a.gateway_token}"}

    def ask_gateway():
        gw.request("GET", gw_path, headers=gw_headers)
        r = gw.getresponse()
        return r.status, r.read()

    def patch(endpoint_id):
        api.request(
            "PATCH",
            f"{api_base}/routes/{a.route}",
            body=json.dumps({"endpoint_id": endpoint_id}),
            headers=api_headers,
        )
        r = api.getresponse()
        body = r.read()
        if r.status != 200:
            sys.exit(f"PATCH: {r.status} {body[:200]!r}")

    # Start from the first endpoint, its upstream answering.
    patch(endpoints[0][0])
    deadline = time.monotonic() + 10
    while endpoints[0][1].encode() not in ask_gateway()[1]:
        if time.monotonic() > deadline:
            sys.exit("the gateway never answered from the first endpoint")

    # One poll's round trip, for reference (every time below includes at least one).
    polls = []
    for _ in range(200):
        t = time.perf_counter()
        ask_gateway()
        polls.append((time.perf_counter() - t) * 1000)

    rounds = []
    for i in range(a.rounds):
        ep, marker = endpoints[(i + 1) % 2]
        marker = marker.encode()
        time.sleep(a.pause)
        t_send = time.perf_counter()
        patch(ep)
        t_answer = time.perf_counter()
        stale = 0
        errors = 0
        while True:
            status, body = ask_gateway()
            if status == 200 and marker in body:
                break
            if status == 200:
                stale += 1
            else:
                errors += 1
            if time.perf_counter() - t_answer > 30:
                sys.exit("the route change did not take effect within 30 s")
        t_seen = time.perf_counter()
        rounds.append(
            {
                "from_answer_ms": round((t_seen - t_answer) * 1000, 3),
                "from_send_ms": round((t_seen - t_send) * 1000, 3),
                "patch_ms": round((t_answer - t_send) * 1000, 3),
                "stale_polls": stale,
                "error_polls": errors,
            }
        )

    def col(k):
        return [r[k] for r in rounds]

    print(
        json.dumps(
            {
                "rounds": len(rounds),
                "median_from_answer_ms": round(statistics.median(col("from_answer_ms")), 3),
                "max_from_answer_ms": max(col("from_answer_ms")),
                "median_from_send_ms": round(statistics.median(col("from_send_ms")), 3),
                "max_from_send_ms": max(col("from_send_ms")),
                "median_patch_ms": round(statistics.median(col("patch_ms")), 3),
                "median_poll_ms": round(statistics.median(polls), 3),
                "stale_polls": sum(col("stale_polls")),
                "error_polls": sum(col("error_polls")),
                "each": rounds,
            }
        )
    )


if __name__ == "__main__":
    main()
