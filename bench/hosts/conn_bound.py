#!/usr/bin/env python3
"""The most a ring across emulated hosts can move, from the connections it actually opened.

shape.sh puts each TCP connection into one of 2^B classes by its ports and caps every class
(a quarter of them, say, at a slow rate); connections that fall into one class share its cap.
So what a rank can send to the next is the smaller of its link and the sum of the caps of the
distinct classes its connections to that rank fall into, and a ring moves no faster than its
slowest neighbour pair. This reads `ss -tniH` listings taken inside each host while a job ran and
counts every connection between two neighbours that carried at least --min-bytes (1 MiB: a data
stream, not the rendezvous's or the control link's few kilobytes) in any listing, and prints

    RESULT net_bound_hosts H <payload GB/s> <pair>=<GB/s>/<classes>[:<slow>] ...

for the ring 0 -> 1 -> ... -> H-1 -> 0, payload rates as bench_hosts.sh's link_hosts line.

    conn_bound.py --addrs A0,A1,.. --link R --flow R --slow R --slow-fraction F --port-bits B \
                  [--min-bytes N] LISTING_HOST0 LISTING_HOST1 ...
"""
import argparse
import re
import sys

UNITS = {"gbit": 1e9, "mbit": 1e6, "kbit": 1e3, "bit": 1.0}


def rate_bits(text):
    """Bits per second of a tc rate such as 4gbit or 62500kbit (shape.sh's rate_bits)."""
    m = re.fullmatch(r"([0-9]+(?:\.[0-9]+)?)(gbit|mbit|kbit|bit)", text)
    if not m or float(m.group(1)) <= 0:
        raise ValueError(f"'{text}' is not a rate like 4gbit")
    return float(m.group(1)) * UNITS[m.group(2)]


def payload_gbytes(bits):
    """Payload GB/s of a rate for TCP in 1500-byte frames (shape.sh's payload_gbytes)."""
    return bits / 8 / 1e9 * 1448 / 1514


def connection_class(port_a, port_b, bits):
    """shape.sh's bucket: port bits 1..B of each end, summed modulo 2^B (the same both ways)."""
    mask = (1 << bits) - 1
    return (((port_a >> 1) & mask) + ((port_b >> 1) & mask)) % (1 << bits)


def class_is_slow(k, n, fraction):
    """shape.sh's bucket_is_slow: the scrambled index falls below fraction * n (rounded)."""
    return (k * 37 + 11) % n < int(fraction * n + 0.5)


def parse_listing(text, moved=None):
    """Adds the connections of an `ss -tniH` listing to `moved`: {frozenset of its two
    (address, port) ends: the most bytes it was seen to send or receive}; returns it."""
    moved = {} if moved is None else moved
    key = None
    for line in text.splitlines():
        ends = [f for f in line.split() if re.fullmatch(r"[0-9.]+:[0-9]+", f)]
        if len(ends) == 2 and not line.startswith(("\t", " ")):
            key = frozenset((a, int(p)) for a, p in (e.rsplit(":", 1) for e in ends))
            moved.setdefault(key, 0)
        elif key is not None:
            counts = re.findall(r"\bbytes_(?:sent|received):([0-9]+)", line)
            moved[key] = max([moved[key]] + [int(c) for c in counts])
    return moved


def ring_bound(addrs, moved, link, flow, slow, fraction, bits, min_bytes):
    """(bound in bits/s, [(pair text, bits/s, classes, slow classes)]) for the ring over addrs."""
    n_classes = 1 << bits
    pairs = []
    for i, src in enumerate(addrs):
        dst = addrs[(i + 1) % len(addrs)]
        classes = set()
        for ends, n in moved.items():
            if n >= min_bytes and {a for a, _ in ends} == {src, dst} and len(ends) == 2:
                (_, pa), (_, pb) = ends
                classes.add(connection_class(pa, pb, bits))
        slow_ones = {k for k in classes if class_is_slow(k, n_classes, fraction)}
        caps = sum(slow if k in slow_ones else flow for k in classes)
        pairs.append((f"{i}->{(i + 1) % len(addrs)}", min(link, caps), len(classes), len(slow_ones)))
    return min(p[1] for p in pairs), pairs


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--addrs", required=True)
    for opt in ("link", "flow", "slow"):
        p.add_argument(f"--{opt}", required=True, type=rate_bits)
    p.add_argument("--slow-fraction", type=float, required=True)
    p.add_argument("--port-bits", type=int, required=True, choices=range(1, 8))
    p.add_argument("--min-bytes", type=int, default=1 << 20)
    p.add_argument("listings", nargs="+")
    a = p.parse_args(argv)
    addrs = a.addrs.split(",")
    moved = {}
    for path in a.listings:
        with open(path) as f:
            parse_listing(f.read(), moved)
    bound, pairs = ring_bound(addrs, moved, a.link, a.flow, a.slow, a.slow_fraction, a.port_bits, a.min_bytes)
    if bound == 0:
        print("conn_bound: no connection between ring neighbours in the listings", file=sys.stderr)
        return 1
    detail = " ".join(f"{name}={payload_gbytes(b):.4f}/{k}" + (f":{s}" if s else "")
                      for name, b, k, s in pairs)
    print(f"RESULT net_bound_hosts {len(addrs)} {payload_gbytes(bound):.4f} {detail}")
    # Which class each data connection fell into and what it carried (the spread of a run).
    n_classes = 1 << a.port_bits
    for ends, n in sorted(moved.items(), key=lambda kv: sorted(kv[0])):
        if n >= a.min_bytes and len(ends) == 2:
            (aa, pa), (ab, pb) = sorted(ends)
            k = connection_class(pa, pb, a.port_bits)
            slow = " slow" if class_is_slow(k, n_classes, a.slow_fraction) else ""
            print(f"# connection {aa}:{pa} {ab}:{pb} class {k}{slow}: {n / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
