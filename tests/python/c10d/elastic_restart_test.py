"""torchrun --max_restarts 1 over the "chorus" backend: a worker killed mid-training makes every
other rank raise naming it, the agent restarts the round, and the new round trains to the end.
Hard time bound (torchrun_launch.py kills what it started). Usage: elastic_restart_test.py N"""

import os
import re
import subprocess
import sys

here = os.path.dirname(os.path.abspath(__file__))


def main():
    n = int(sys.argv[1])
    out = subprocess.run([sys.executable, os.path.join(here, "torchrun_launch.py"), "150", "--standalone",
                          "--nproc_per_node", str(n), "--max_restarts", "1", "--monitor_interval", "1", "--",
                          os.path.join(here, "elastic_worker.py")],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=200)
    text = out.stdout
    print(text)
    victim = n - 1
    raised = set(int(r) for r in re.findall(r"attempt 0 rank (\d+) raised: .*rank %d" % victim, text))
    finished = re.findall(r"attempt 1 rank (\d+) finished: (\d+)", text)
    problems = []
    if out.returncode != 0:
        problems.append(f"torchrun exited with {out.returncode}")
    if raised != set(range(n - 1)):
        problems.append(f"ranks that raised naming rank {victim} in the first attempt: {sorted(raised)}")
    want = str(10 * n * (n + 1) // 2)
    if sorted(int(r) for r, _ in finished) != list(range(n)) or any(v != want for _, v in finished):
        problems.append(f"the second attempt's results: {finished} (every rank should reach {want})")
    if problems:
        print("FAILED: " + "; ".join(problems))
        sys.exit(1)
    print("elastic restart: every survivor raised, the restarted round finished")


if __name__ == "__main__":
    main()
