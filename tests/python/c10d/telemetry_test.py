"""Runs test_telemetry.py under chorusrun -np 2 with metrics on a free port and a trace directory,
then checks the traces with chorus-trace: every rank's c10d-rank-<r>.trace holds a `call` record
per call (group, number, bytes, result), the timeline shows them as c10d.<call>#<n> spans, and
chorus.torch's rank-<r>.trace beside them still replays.
Usage: telemetry_test.py CHORUSRUN CHORUS_TRACE_TOOL"""

import json
import os
import socket
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))


def free_base_port():
    for _ in range(100):
        with socket.socket() as a, socket.socket() as b:
            a.bind(("127.0.0.1", 0))
            try:
                b.bind(("127.0.0.1", a.getsockname()[1] + 1))
            except OSError:
                continue
            return a.getsockname()[1]
    raise RuntimeError("no two free ports in a row")


def run(cmd, env=None):
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120, env=env)
    return out.returncode, out.stdout


def main():
    chorusrun, tool = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory(prefix="chorus-c10d-trace-") as d:
        env = dict(os.environ, CHORUS_TRACE=d, CHORUS_METRICS_PORT=str(free_base_port()), CHORUS_TEST_NO_INIT="1")
        rc, out = run([chorusrun, "-np", "2", "--timeout", "90", "--", sys.executable, "-m", "pytest", "-x", "-q",
                       "-p", "no:cacheprovider", "--rootdir=" + here, "--confcutdir=" + here,
                       os.path.join(here, "test_telemetry.py")], env)
        print(out)
        if rc != 0:
            sys.exit("the job failed")
        for r in range(2):
            rc, dump = run([tool, "dump", os.path.join(d, "c10d-rank-%d.trace" % r)])
            calls = [json.loads(line) for line in dump.splitlines() if '"kind":"call"' in line]
            reduces = [c for c in calls if c["call"] == "all_reduce" and c["group"] == "0" and c["ok"]]
            if rc != 0 or len(reduces) < 5 or sorted(c["seq"] for c in reduces)[:5] != [1, 2, 3, 4, 5] or \
                    any(c["bytes"] != 4000 for c in reduces):
                sys.exit("rank %d's c10d trace lacks its all_reduce calls:\n%s" % (r, dump))
        timeline = os.path.join(d, "timeline.json")
        rc, out = run([tool, "timeline", d, "--c10d", "-o", timeline])
        text = open(timeline).read() if rc == 0 else out
        if rc != 0 or '"c10d.all_reduce#1"' not in text or "c10d group '0'" not in text:
            sys.exit("the timeline lacks the calls:\n" + text[:2000])
        rc, out = run([tool, "replay", d])
        print(out)
        if rc != 0:
            sys.exit("chorus.torch's trace beside the backend's does not replay")
    print("telemetry: calls in the metrics, the trace and the timeline; the pipeline's trace replays")


if __name__ == "__main__":
    main()
