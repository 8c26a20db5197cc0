"""The connection classes bench/hosts/conn_bound.py computes are the ones tc shapes by:

    conn_bound_hosts_test.py HOSTS_SH CONN_BOUND

First, without hosts: conn_bound.class_is_slow agrees with shape.sh's bucket_is_slow for every
class at 1..7 port bits and slow fractions 0, 0.25, 0.5 and 1. Then inside `hosts.sh run 2
--port-bits 2 --slow-fraction 0.25 --link 400mbit --flow 100mbit --slow 25mbit`: a listener on
host 1 takes one connection after another from host 0, each from a source port chosen so that
the four together fall into the four classes (by conn_bound.connection_class); each carries
256 KB, and host 0's htb class that conn_bound names for it (1:10 + class, on eth0) counted
those bytes while every other class counted under 16 KB of them. Then conn_bound.py reads `ss
-tniH` taken on host 0 while two further connections, in the one slow class and a fast one, are
open with 256 KB sent on each: its RESULT line gives 125 Mbit/s (100 + 25) as payload GB/s and
its ring pairs 0->1 and 1->0 name 2 classes, 1 slow. Skips (exit 77) where hosts cannot be built.
Bounded: `timeout` around `hosts.sh run` (whose trap removes the hosts), and every connection
and listener has a socket timeout."""

import importlib.util
import os
import re
import subprocess
import sys
import tempfile

from hosts_job import Hosts, hosts_missing, run_in_hosts, verdict

BOUND_S = 120
LISTEN_PORT = 5000        # fixed: host 1's network namespace is fresh
PAYLOAD = 256 * 1024
UP = ("--port-bits", "2", "--slow-fraction", "0.25", "--link", "400mbit", "--flow", "100mbit", "--slow", "25mbit")

LISTENER = r"""
import socket, sys, threading
def serve(c):
    c.settimeout(60); got = 0
    while True:
        b = c.recv(1 << 16)
        if not b: break
        got += len(b)
    c.sendall(b"%d\n" % got); c.close()
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[1]))); s.listen(8); s.settimeout(60)
print("listening", flush=True)
for _ in range(int(sys.argv[2])):
    threading.Thread(target=serve, args=(s.accept()[0],)).start()
"""

SENDER = r"""
import socket, sys, time
c = socket.socket(); c.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
c.bind(("0.0.0.0", int(sys.argv[3]))); c.settimeout(60)
c.connect((sys.argv[1], int(sys.argv[2]))); c.sendall(b"x" * int(sys.argv[4]))
if len(sys.argv) > 5:  # hold the connection open with its bytes sent until the flag file appears
    import os
    while not os.path.exists(sys.argv[5]): time.sleep(0.05)
c.shutdown(socket.SHUT_WR); print(c.recv(64).decode().strip(), flush=True); c.close()
"""


def load(path):
    spec = importlib.util.spec_from_file_location("conn_bound", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def slow_classes_agree(cb, shape_sh):
    """Problems where class_is_slow and shape.sh's bucket_is_slow differ."""
    problems = []
    for bits in range(1, 8):
        n = 1 << bits
        for fraction in (0, 0.25, 0.5, 1):
            script = 'source "%s"; for ((k = 0; k < %d; k++)); do bucket_is_slow $k %d %s && echo $k; done; true' % (
                shape_sh, n, n, fraction)
            out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60, check=True).stdout
            theirs = {int(k) for k in out.split()}
            ours = {k for k in range(n) if cb.class_is_slow(k, n, fraction)}
            if theirs != ours:
                problems.append("bits %d fraction %s: shape.sh slow %s, conn_bound %s" % (
                    bits, fraction, sorted(theirs), sorted(ours)))
    return problems


def class_bytes(h, host):
    """{htb class id: bytes sent} of host `host`'s eth0."""
    out = subprocess.run(h.exec_argv(host, "tc", "-s", "class", "show", "dev", "eth0"), capture_output=True,
                         text=True, timeout=30, check=True).stdout
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"class htb (1:[0-9a-f]+) .*?\n\s*Sent (\d+) bytes", out)}


def source_port(cb, cls, taken):
    """A free-looking even source port (Linux's connect() habit) whose class, towards
    LISTEN_PORT, is `cls`."""
    for port in range(41000, 42000, 2):
        if port not in taken and cb.connection_class(port, LISTEN_PORT, 2) == cls:
            taken.add(port)
            return port
    raise AssertionError("no source port for class %d" % cls)


def inner(conn_bound):
    cb = load(conn_bound)
    h = Hosts(os.environ["CHORUS_HOSTS_SH"])
    problems, taken = [], set()
    n_classes = 1 << 2
    listener = subprocess.Popen(h.exec_argv(1, sys.executable, "-c", LISTENER, str(LISTEN_PORT), str(n_classes + 2)),
                                stdout=subprocess.PIPE, text=True)
    try:
        listener.stdout.readline()
        for cls in range(n_classes):
            before = class_bytes(h, 0)
            port = source_port(cb, cls, taken)
            out = subprocess.run(h.exec_argv(0, sys.executable, "-c", SENDER, h.addrs[1], str(LISTEN_PORT), str(port),
                                             str(PAYLOAD)), capture_output=True, text=True, timeout=60)
            if out.stdout.strip() != str(PAYLOAD):
                problems.append("connection from port %d: listener got %r (%s)" % (port, out.stdout, out.stderr[-300:]))
                continue
            after = class_bytes(h, 0)
            want = "1:%x" % (16 + cls)
            grew = {c: after.get(c, 0) - before.get(c, 0) for c in after}
            if grew.get(want, 0) < PAYLOAD:
                problems.append("class %d (port %d): htb %s counted %d bytes of %d" % (
                    cls, port, want, grew.get(want, 0), PAYLOAD))
            others = {c: g for c, g in grew.items() if c not in (want, "1:1") and g >= 16 * 1024}
            if others:
                problems.append("class %d (port %d): other htb classes counted %s" % (cls, port, others))
        # Two connections held open (one slow class, one fast) while ss lists them.
        slow = [k for k in range(n_classes) if cb.class_is_slow(k, n_classes, 0.25)]
        fast = [k for k in range(n_classes) if k not in slow]
        if len(slow) != 1:
            problems.append("expected one slow class of 4 at fraction 0.25, got %s" % slow)
        with tempfile.TemporaryDirectory() as tmp:
            flag = os.path.join(tmp, "done")
            senders = [subprocess.Popen(h.exec_argv(0, sys.executable, "-c", SENDER, h.addrs[1], str(LISTEN_PORT),
                                                    str(source_port(cb, k, taken)), str(PAYLOAD), flag),
                                        stdout=subprocess.PIPE, text=True) for k in (slow[0], fast[0])]
            listing = os.path.join(tmp, "host0")
            for _ in range(100):  # until both have their bytes acknowledged
                text = subprocess.run(h.exec_argv(0, "ss", "-tniH", "state", "established"), capture_output=True,
                                      text=True, timeout=30).stdout
                if len(re.findall(r"bytes_acked:(\d+)", text)) >= 2 and all(
                        int(a) > PAYLOAD for a in re.findall(r"bytes_acked:(\d+)", text)):
                    break
                subprocess.run(["sleep", "0.1"])
            with open(listing, "w") as f:
                f.write(text)
            bound = subprocess.run([sys.executable, conn_bound, "--addrs", ",".join(h.addrs), "--link", "400mbit",
                                    "--flow", "100mbit", "--slow", "25mbit", "--slow-fraction", "0.25", "--port-bits",
                                    "2", "--min-bytes", str(PAYLOAD // 2), listing, listing], capture_output=True,
                                   text=True, timeout=60)
            open(flag, "w").close()
            for s in senders:
                s.communicate(timeout=60)
        want = "RESULT net_bound_hosts 2 %.4f 0->1=%.4f/2:1 1->0=%.4f/2:1" % ((cb.payload_gbytes(125e6),) * 3)
        if not bound.stdout.startswith(want + "\n"):
            problems.append("conn_bound.py printed %r (stderr %r), want %r first" % (bound.stdout, bound.stderr, want))
    finally:
        listener.kill()
        listener.wait()
    for p in problems:
        print("conn_bound_hosts: " + p, flush=True)
    return verdict(["classes"] if problems else [])


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--inner":
        return inner(sys.argv[2])
    hosts_sh, conn_bound = (os.path.abspath(a) for a in sys.argv[1:3])
    shape_sh = os.path.join(os.path.dirname(hosts_sh), "shape.sh")
    problems = slow_classes_agree(load(conn_bound), shape_sh)
    for p in problems:
        print("conn_bound_hosts: " + p, flush=True)
    if problems:
        return verdict(["slow classes"])
    missing = hosts_missing(hosts_sh)
    if missing:
        print("SKIP: emulated hosts unavailable: %s" % missing, flush=True)
        return 77
    os.environ["CHORUS_HOSTS_SH"] = hosts_sh
    return run_in_hosts(hosts_sh, BOUND_S, 10, __file__, conn_bound, up=UP)


if __name__ == "__main__":
    sys.exit(main())
