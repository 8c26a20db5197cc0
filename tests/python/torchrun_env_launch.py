"""Starts N ranks of a script with the environment torchrun gives its workers (RANK, WORLD_SIZE,
LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT) instead of chorusrun's: chorus.torch
must find its job from them. (Debian's torchrun 1.13 itself fails before starting workers.)
Hard time bound; kills every process it started. Usage: torchrun_env_launch.py N script args..."""

import os
import secrets
import socket
import subprocess
import sys
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    n, argv = int(sys.argv[1]), sys.argv[2:]
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), WORLD_SIZE=str(n),
               LOCAL_WORLD_SIZE=str(n), CHORUS_JOB_SECRET=secrets.token_hex(32))
    for k in [k for k in env if k.startswith("CHORUS_") and k not in ("CHORUS_JOB_SECRET", "CHORUS_METRICS_PORT")]:
        del env[k]
    procs = [subprocess.Popen([sys.executable] + argv, env=dict(env, RANK=str(r), LOCAL_RANK=str(r)))
             for r in range(n)]
    deadline = time.monotonic() + 90
    codes = []
    try:
        for p in procs:
            codes.append(p.wait(timeout=max(1.0, deadline - time.monotonic())))
    except subprocess.TimeoutExpired:
        print("torchrun_env_launch: ranks still running after 90 s; killing them", file=sys.stderr)
        return 124
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    print("torchrun_env_launch: exit codes %s" % codes)
    return 0 if all(c == 0 for c in codes) else 1


if __name__ == "__main__":
    sys.exit(main())
