#!/usr/bin/env python3
"""Throughput of N TCP connections between two emulated hosts (no iperf3 needed).

  flowtest.py serve ADDR PORT N      accept N connections, print per-connection and total Gbit/s
  flowtest.py send ADDR PORT N SECS  open N connections, send as fast as possible for SECS
The receiver times each connection from its first to its last byte; the total is all bytes over
the span from the first connection's first byte to the last connection's last byte.
"""
import socket
import sys
import threading
import time


def serve(addr, port, n):
    ls = socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((addr, port))
    ls.listen(n)
    print("ready", flush=True)
    conns = [ls.accept()[0] for _ in range(n)]
    stats = [None] * n

    def drain(i, c):
        buf = bytearray(1 << 20)
        got, first, last = 0, None, None
        while True:
            k = c.recv_into(buf)
            if k == 0:
                break
            now = time.monotonic()
            first = first or now
            last = now
            got += k
        stats[i] = (got, first, last, c.getpeername()[1], c.getsockname()[1])

    threads = [threading.Thread(target=drain, args=(i, c)) for i, c in enumerate(conns)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    total = sum(s[0] for s in stats)
    span = max(s[2] for s in stats) - min(s[1] for s in stats)
    for got, first, last, sport, dport in stats:
        print(f"conn sport={sport} dport={dport} gbit_s={got * 8 / (last - first) / 1e9:.3f}")
    print(f"total n={n} gbit_s={total * 8 / span / 1e9:.3f}", flush=True)


def send(addr, port, n, secs):
    socks = []
    for _ in range(n):
        s = socket.create_connection((addr, port))
        socks.append(s)
    payload = memoryview(bytearray(1 << 20))
    end = time.monotonic() + secs

    def pump(s):
        while time.monotonic() < end:
            s.sendall(payload)
        s.close()

    threads = [threading.Thread(target=pump, args=(s,)) for s in socks]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


if __name__ == "__main__":
    mode, addr, port, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    if mode == "serve":
        serve(addr, port, n)
    else:
        send(addr, port, n, float(sys.argv[5]))
