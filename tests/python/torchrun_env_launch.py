"""Starts N ranks of a script with the environment torchrun gives its workers (RANK, WORLD_SIZE,
LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT) instead of chorusrun's: chorus.torch
must find its job from them. (Debian's torchrun 1.13 itself fails before starting workers.) Like
torchrun's agent it holds MASTER_PORT; it also holds MASTER_PORT + 1 and hands it to rank 0.
Hard time bound; kills every process it started. Usage: torchrun_env_launch.py N script args..."""

import os
import secrets
import socket
import subprocess
import sys
import time


def held_ports():
    """Sockets listening on MASTER_PORT (held, as torchrun's agent holds it for torch's TCPStore)
    and on MASTER_PORT + 1, where Chorus serves its store: rank 0 inherits that one
    (CHORUS_RENDEZVOUS_FD), so no other process (another test) can take either port meanwhile.
    A pair whose second port is taken is let go and another tried."""
    for _ in range(100):
        master = socket.socket()
        master.bind(("127.0.0.1", 0))
        master.listen()
        store = socket.socket()
        try:
            store.bind(("127.0.0.1", master.getsockname()[1] + 1))
            store.listen()
            return master, store
        except (OSError, OverflowError):
            master.close()
            store.close()
    raise RuntimeError("torchrun_env_launch: no free pair of ports P, P+1 on 127.0.0.1 in 100 tries")


def main():
    n, argv = int(sys.argv[1]), sys.argv[2:]
    master, store = held_ports()
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(master.getsockname()[1]), WORLD_SIZE=str(n),
               LOCAL_WORLD_SIZE=str(n), CHORUS_JOB_SECRET=secrets.token_hex(32))
    for k in [k for k in env if k.startswith("CHORUS_") and k not in ("CHORUS_JOB_SECRET", "CHORUS_METRICS_PORT")]:
        del env[k]
    procs = []
    for r in range(n):
        extra = {"CHORUS_RENDEZVOUS_FD": str(store.fileno())} if r == 0 else {}
        procs.append(subprocess.Popen([sys.executable] + argv, env=dict(env, RANK=str(r), LOCAL_RANK=str(r), **extra),
                                      pass_fds=(store.fileno(),) if r == 0 else ()))
        if r == 0:
            store.close()  # rank 0 holds it now
    deadline = time.monotonic() + 90
    codes = []
    try:
        for p in procs:
            codes.append(p.wait(timeout=max(1.0, deadline - time.monotonic())))
    except subprocess.TimeoutExpired:
        print("torchrun_env_launch: ranks still running after 90 s; killing them", file=sys.stderr)
        return 124
    finally:
        master.close()
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    print("torchrun_env_launch: exit codes %s" % codes)
    return 0 if all(c == 0 for c in codes) else 1


if __name__ == "__main__":
    sys.exit(main())
