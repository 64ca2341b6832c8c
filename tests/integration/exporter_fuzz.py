#!/usr/bin/env python3
"""Fuzzes a live Tessel metrics exporter over loopback with malformed and unexpected requests.

    exporter_fuzz.py PORT [--seconds S] [--seed N] [--json FILE] [--pid PID]

Sends, for S seconds (default 20), a seeded random mix of request kinds (see KINDS): valid scrapes, every
method, unknown paths, malformed request lines and headers, random bytes, oversized heads and URIs,
bodies, TLS and HTTP/2 prefaces, clients that reset or vanish, a slow-loris pair and bursts of idle
connections beyond the server's connection limit. Each answer is checked against what the server
promises (monitoring/http_server.h): a valid scrape is 200 with the Prometheus text format, a malformed
head 400, an oversized one 431, an unknown path 404, another method 405, a flood's extras 503. With
--pid, the process must be alive after every request. Prints a table of kinds, counts and statuses;
exits 1 naming the first broken promise. Only 127.0.0.1 is ever contacted, and every loop is bounded in
count and time.
"""
import argparse
import json
import os
import random
import socket
import sys
import threading
import time

HOST = "127.0.0.1"


def exchange(port, payload, timeout=12.0, shut=False, reset=False):
    """Sends payload on a fresh connection; returns the raw answer (b"" when closed unanswered)."""
    s = socket.create_connection((HOST, port), timeout=timeout)
    try:
        if payload:
            s.sendall(payload)
        if reset:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            return None
        if shut:
            s.shutdown(socket.SHUT_WR)
        chunks = []
        while True:
            try:
                b = s.recv(65536)
            except ConnectionResetError:
                break
            if not b:
                break
            chunks.append(b)
        return b"".join(chunks)
    finally:
        s.close()


def status_of(raw):
    if not raw:
        return None
    line = raw.split(b"\r\n", 1)[0]
    parts = line.split(b" ")
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1."):
        return "garbled"
    return int(parts[1])


def rand_bytes(rng, n):
    return bytes(rng.getrandbits(8) for _ in range(n))


# Each kind: a function (rng) -> (payload, expected statuses, options).
def k_scrape(rng):
    return b"GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: text/plain\r\n\r\n", {200}, {}


def k_head(rng):
    return b"HEAD /metrics HTTP/1.1\r\n\r\n", {200}, {}


def k_root(rng):
    return rng.choice([b"GET / HTTP/1.1\r\n\r\n", b"GET /?x=1 HTTP/1.0\r\n\r\n"]), {200}, {}


def k_unknown_path(rng):
    path = rng.choice([b"/favicon.ico", b"/metrics/", b"/../../etc/passwd", b"/%00", b"/" + b"a" * 2000,
                       b"/admin", b"/metrics;x", b"//metrics"])
    return b"GET " + path + b" HTTP/1.1\r\n\r\n", {404}, {}


def k_method(rng):
    m = rng.choice([b"POST", b"PUT", b"DELETE", b"OPTIONS", b"PATCH", b"TRACE", b"CONNECT", b"BREW", b"get"])
    body = rand_bytes(rng, rng.randrange(0, 4096))
    return (m + b" /metrics HTTP/1.1\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body,
            {405}, {})


def k_malformed_line(rng):
    p = rng.choice([b"GET\r\n\r\n", b"GET /\r\n\r\n", b"GET  / HTTP/1.1\r\n\r\n", b" / HTTP/1.1\r\n\r\n",
                    b"GET / HTTP/1.1 x\r\n\r\n", b"GET / HTTP/1.x\r\n\r\n", b"GET / FTP/1.1\r\n\r\n",
                    b"G\x00T / HTTP/1.1\r\n\r\n", b"GET /\x7f HTTP/1.1\r\n\r\n", b"GET nope HTTP/1.1\r\n\r\n",
                    b"\xff\xfe\xfd\r\n\r\n", b"GET / HTTP/1.1\r\nbroken header\r\n\r\n",
                    b"GET / HTTP/1.1\r\n folded: x\r\n\r\n", b"GET / HTTP/1.1\r\n: x\r\n\r\n"])
    return p, {400}, {}


def k_version(rng):
    return rng.choice([b"GET / HTTP/2.0\r\n\r\n", b"GET / HTTP/0.9\r\n\r\n", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"]), {505}, {}


def k_random(rng):
    body = rand_bytes(rng, rng.randrange(1, 2048)) + b"\r\n\r\n"
    return body, {400, 431, 505, 405, 404, 200}, {}


def k_tls(rng):
    hello = b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03" + rand_bytes(rng, 160) + b"\r\n\r\n"
    return hello, {400, 431}, {}


def k_huge_head(rng):
    kind = rng.randrange(3)
    if kind == 0:
        p = b"GET /" + b"x" * 100000 + b" HTTP/1.1\r\n\r\n"
    elif kind == 1:
        p = b"GET /metrics HTTP/1.1\r\n" + b"".join(b"X-%d: %s\r\n" % (i, b"v" * 50) for i in range(400)) + b"\r\n"
    else:
        p = b"A" * 50000  # no line end at all
    return p, {431}, {}


def k_vanish(rng):
    return rng.choice([b"", b"GET /met", b"GET /metrics HTTP/1.1\r\n\r\n"]), None, {"reset": True}


def k_half_close(rng):
    return b"GET /metrics HTTP/1.1\r\n\r\n", {200}, {"shut": True}


KINDS = {
    "scrape": (k_scrape, 6), "head": (k_head, 2), "root": (k_root, 1), "unknown_path": (k_unknown_path, 2),
    "method": (k_method, 2), "malformed_line": (k_malformed_line, 3), "version": (k_version, 1),
    "random_bytes": (k_random, 3), "tls_hello": (k_tls, 1), "huge_head": (k_huge_head, 1),
    "vanish_reset": (k_vanish, 2), "half_close": (k_half_close, 1),
}


def slow_loris(port, seconds, results):
    """Two clients that send a byte every 0.5 s: the server must answer 408 (or close) at its deadline."""
    def one():
        t0 = time.time()
        try:
            s = socket.create_connection((HOST, port), timeout=15)
        except OSError as e:
            results.append((time.time() - t0, f"connect: {e}"))
            return
        answer = b""
        try:
            for ch in b"GET /metrics HTTP/1.1\r\nX-Slow: " + b"z" * 200:
                if time.time() - t0 > seconds:
                    break
                try:
                    s.send(bytes([ch]))
                except OSError:
                    break
                s.settimeout(0.5)
                try:
                    b = s.recv(4096)
                    if b:
                        answer = b
                        break
                    break
                except socket.timeout:
                    continue
        finally:
            s.close()
        results.append((time.time() - t0, status_of(answer)))
    threads = [threading.Thread(target=one) for _ in range(2)]
    for t in threads:
        t.start()
    return threads


def flood(port, n):
    """n idle connections at once, then one scrape: beyond the limit it is 503 (or 200 if a slot freed)."""
    socks = []
    for _ in range(n):
        try:
            socks.append(socket.create_connection((HOST, port), timeout=5))
        except OSError:
            break
    time.sleep(0.2)
    try:
        st = status_of(exchange(port, b"GET /metrics HTTP/1.1\r\n\r\n", timeout=5))
    finally:
        for s in socks:
            s.close()
    time.sleep(0.2)
    return st


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("port", type=int)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--pid", type=int, default=0)
    ap.add_argument("--json", default="")
    ap.add_argument("--max-requests", type=int, default=200000)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    names = list(KINDS)
    weights = [KINDS[n][1] for n in names]
    counts = {n: 0 for n in names}
    statuses = {n: {} for n in names}
    problems = []
    loris_results = []
    loris = slow_loris(args.port, 14.0, loris_results)
    floods = []
    t0 = time.time()
    total = 0

    def alive():
        if not args.pid:
            return True
        try:
            os.kill(args.pid, 0)
        except ProcessLookupError:
            return False
        return True

    slowest = (0.0, "")
    while time.time() - t0 < args.seconds and total < args.max_requests:
        if total % 500 == 250:
            try:
                floods.append(flood(args.port, 40))
            except OSError as e:
                problems.append(f"flood: {type(e).__name__}: {e}")
                if not alive():
                    problems.append(f"the process {args.pid} died during a flood")
                    break
        name = rng.choices(names, weights)[0]
        payload, expect, opts = KINDS[name][0](rng)
        started = time.time()
        try:
            raw = exchange(args.port, payload, **opts)
        except (ConnectionRefusedError, ConnectionResetError, BrokenPipeError, socket.timeout, OSError) as e:
            raw = None
            if not alive():
                problems.append(f"the process {args.pid} died during a '{name}' request")
                break
            if expect is not None and not isinstance(e, (ConnectionResetError, BrokenPipeError)):
                problems.append(f"'{name}': {type(e).__name__}: {e}")
        total += 1
        counts[name] += 1
        slowest = max(slowest, (time.time() - started, name))
        st = status_of(raw) if raw is not None else None
        statuses[name][str(st)] = statuses[name].get(str(st), 0) + 1
        # A 503 can answer anything while the slow-loris pair and a flood hold slots: not a broken promise.
        if expect is not None and st not in expect and st != 503 and not (st is None and name == "huge_head"):
            problems.append(f"'{name}' request {payload[:60]!r}: status {st}, expected {sorted(expect)}")
        if name == "scrape" and st == 200 and b"tessel_build_info" not in raw:
            problems.append("a 200 scrape without tessel_build_info")
        if not alive():
            problems.append(f"the process {args.pid} died after a '{name}' request")
            break
        if len(problems) > 20:
            break
    for t in loris:
        t.join()
    elapsed = time.time() - t0
    for secs, st in loris_results:
        if st not in (408, None) or secs > 13:
            problems.append(f"slow client: status {st} after {secs:.1f} s (expected 408 within the 10 s deadline)")
    if any(st not in (503, 200) for st in floods):
        problems.append(f"flood scrapes answered {floods} (expected 503, or 200 once a slot is free)")

    print(f"{'kind':16} {'requests':>8}  statuses")
    for n in names:
        print(f"{n:16} {counts[n]:8}  {json.dumps(statuses[n], sort_keys=True)}")
    print(f"{'slow_loris':16} {len(loris_results):8}  {[(round(s, 1), st) for s, st in loris_results]}")
    print(f"{'flood(40 idle)':16} {len(floods):8}  {floods}")
    print(f"slowest answer: {slowest[0]:.2f} s ('{slowest[1]}')")
    print(f"total {total} requests + {len(floods) * 41} flood connections + 2 slow clients in {elapsed:.1f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"requests": total, "seconds": elapsed, "counts": counts, "statuses": statuses,
                       "floods": floods, "slow": loris_results, "problems": problems}, f, indent=1)
    for p in problems:
        print("PROBLEM:", p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
