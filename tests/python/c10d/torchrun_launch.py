"""Runs a command under torchrun (torch 1.13's launcher: /usr/bin/python3 -m torch.distributed.run)
with a hard time bound, killing every process it started (its own process group) when the bound
passes. torch 1.13's launcher fails on Python 3.11 unless --redirects and --tee name one stream
(its Std enum no longer lists 0): they are passed here as 1 (stdout, also shown).
Usage: torchrun_launch.py SECONDS [torchrun options] -- script-or-module args..."""

import os
import signal
import subprocess
import sys


def main():
    seconds = float(sys.argv[1])
    split = sys.argv.index("--")
    options, command = sys.argv[2:split], sys.argv[split + 1:]
    argv = [sys.executable, "-m", "torch.distributed.run", "--redirects", "1", "--tee", "1"] + options + command
    proc = subprocess.Popen(argv, start_new_session=True)
    try:
        rc = proc.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        print(f"torchrun_launch: no end within {seconds:.0f} s; killing the job", file=sys.stderr, flush=True)
        rc = 124
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # workers the agent left behind, if any
        except ProcessLookupError:
            pass
        proc.wait()
    sys.exit(rc)


if __name__ == "__main__":
    main()
