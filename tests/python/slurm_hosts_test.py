"""Chorus jobs under a real Slurm cluster on two emulated hosts (bench/hosts/slurm.sh):

    slurm_hosts_test.py HOSTS_SH SLURM_SH CHORUSRUN SBATCH_SCRIPT

Inside `hosts.sh run 2`, `slurm.sh up` starts munged and slurmctld on host 0 and one slurmd per
host (nodes chorus-host0 and chorus-host1); every Slurm command runs on host 0 (`slurm.sh exec
0`), with one CHORUS_JOB_SECRET exported and no CHORUS_RENDEZVOUS or MASTER_*. Five jobs of
slurm_hosts_worker.py, each with a hard bound (srun --time, a deadline, scancel by name after it):
  1. `hvd`: srun -N 2 --ntasks-per-node 2 ... hvd: four ranks meet through the SLURM_* variables
     alone; exact allreduce (sum, average), allgather, broadcast; rank = SLURM_PROCID, local size
     2, local rank = rank % 2, ranks 0-1 on chorus-host0 and 2-3 on chorus-host1 (two distinct
     host names); the bytes to the local peer went through shared-memory rings, bytes reached the
     other host's ranks (TCP);
  2. `c10d`: the same through init_process_group("chorus") with MASTER_ADDR and MASTER_PORT the
     worker derives from SLURM_* (slurm_master); every stream to the local peer has a
     shared-memory ring;
  3. `sbatch`: sbatch --wait of SBATCH_SCRIPT (examples/slurm/train.sbatch: one chorusrun per node
     in per-node mode) running the worker (hvd): exit 0, the script's banner in the output file
     (store at chorus-host0), the four ranks' reports as in 1;
  4. `kill`: rank 3 SIGKILLs itself after the first allreduce: srun exits non-zero within its
     deadline, the other ranks raise naming rank 3, and the output names rank 3's node
     (chorus-host1) and task (srun's "chorus-host1: task 3: Killed");
  5. `scancel`: a job that allreduces until cancelled: after scancel, srun and every rank end
     within 15 s.
After every job neither host's /dev/shm holds a chorus-* segment (those found are removed, so that
the next job is judged on its own); after `slurm.sh down` no process is left in either host.
Skips (exit 77) where hosts cannot be built or Slurm or munge is missing (slurm.sh check).
Bounded twice: `timeout` around `hosts.sh run` (whose trap removes the hosts) and a deadline per
job; SIGTERM ends the test through `slurm.sh down`."""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import traceback

from hosts_job import (KILL_RANK, METRICS_PORT, Hosts, check_four_ranks, check_killed, check_survivors, end_on_sigterm,
                       job_env, judged, reports_in, run_in_hosts, verdict)

here = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(here, "slurm_hosts_worker.py")
BOUND_S = 330
JOB_DEADLINE_S = 100
CANCEL_BOUND_S = 15


class Cluster(Hosts):
    """The hosts and Slurm commands on host 0."""

    def __init__(self, hosts_sh, slurm_sh, chorusrun):
        super().__init__(hosts_sh)
        self.slurm_sh = slurm_sh
        self.env = job_env(CHORUS_METRICS_PORT=str(METRICS_PORT), PYTHONUNBUFFERED="1", CHORUSRUN=chorusrun)

    def argv(self, *cmd):
        return [self.slurm_sh, "exec", "0", *cmd]

    def run(self, *cmd, timeout=30):
        return subprocess.run(self.argv(*cmd), env=self.env, capture_output=True, text=True, timeout=timeout)

    def srun(self, name, api, out_dir, *flags):
        return self.argv("srun", "-N", "2", "--ntasks-per-node", "2", "--time", "2", "--immediate=30", "-J", name,
                         sys.executable, WORKER, api, out_dir, *flags)

    def forget(self, name):
        """Cancels the jobs called `name` (if any are left) and waits until none is listed."""
        self.run("scancel", "-n", name)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if not self.run("squeue", "-h", "-n", name).stdout.strip():
                return
            time.sleep(0.5)
        raise AssertionError("job %s still listed by squeue 30 s after scancel" % name)


def check_reports(problems, reports, api, names, launcher):
    """The four ranks' reports of a job that passed (the docstring's list): under srun alone also
    rank = SLURM_PROCID."""
    want = (lambda rank: {"slurm_procid": str(rank)}) if launcher == "srun" else None
    check_four_ranks(problems, reports, api, names, want)


def job_passes(c, api, out_dir):
    """1. and 2.: srun alone, hvd or c10d."""
    name = "chorus-%s-%d" % (api, os.getpid())
    try:
        out = subprocess.run(c.srun(name, api, out_dir), env=c.env, capture_output=True, text=True,
                             timeout=JOB_DEADLINE_S)
    finally:
        c.forget(name)
    text = out.stdout + out.stderr
    problems = [] if out.returncode == 0 else ["srun exited %d" % out.returncode]
    check_reports(problems, reports_in(out_dir), api, c.names, "srun")
    return problems, text


def sbatch(c, script, out_dir):
    """3.: examples/slurm/train.sbatch with the worker under chorusrun, per node."""
    name, out_file = "chorus-sbatch-%d" % os.getpid(), os.path.join(out_dir, "train.out")
    try:
        out = c.run("sbatch", "--wait", "-J", name, "--chdir", out_dir, "--output", out_file, "--time", "2", script,
                    sys.executable, WORKER, "hvd", out_dir, timeout=JOB_DEADLINE_S)
    finally:
        c.forget(name)
    text = open(out_file).read() if os.path.exists(out_file) else ""
    problems = [] if out.returncode == 0 else ["sbatch --wait exited %d" % out.returncode]
    if not re.search(r"chorus-train: job \d+, 2 nodes \(chorus-host\[0-1\]\), 2 ranks each, store at chorus-host0:\d+",
                     text):
        problems.append("the batch script's banner is missing")
    check_reports(problems, reports_in(out_dir), "hvd", c.names, "chorusrun")
    return problems, "%s%s---- %s ----\n%s" % (out.stdout, out.stderr, out_file, text)


def kill(c, out_dir):
    """4.: rank 3 SIGKILLs itself."""
    name = "chorus-kill-%d" % os.getpid()
    try:
        out = subprocess.run(c.srun(name, "hvd", out_dir, "--kill-rank", str(KILL_RANK)), env=c.env,
                             capture_output=True, text=True, timeout=JOB_DEADLINE_S)
    finally:
        c.forget(name)
    text = out.stdout + out.stderr
    node = c.names[KILL_RANK // 2]
    problems = [] if out.returncode != 0 else ["srun exited 0 although rank %d was killed" % KILL_RANK]
    check_killed(problems, text, "slurm-worker", node)
    if not re.search(r"%s: task %d: Killed" % (re.escape(node), KILL_RANK), text):
        problems.append("the output does not name rank %d's node %s and task" % (KILL_RANK, node))
    raised = check_survivors(problems, reports_in(out_dir), "rank %d" % KILL_RANK)
    named = [r for r, why in raised.items() if node in why]
    print("test: kill: srun exited %d; the survivors' errors %s the node (%s): %s" % (
        out.returncode, "name" if named else "do not name", node, raised.get(0)), flush=True)
    return problems, text


def scancel(c, out_dir):
    """5.: scancel of a job whose ranks allreduce until cancelled."""
    name = "chorus-scancel-%d" % os.getpid()
    proc = subprocess.Popen(c.srun(name, "hvd", out_dir, "--loop"), env=c.env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    lines, problems = [], []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + JOB_DEADLINE_S
        looping = []
        while time.monotonic() < deadline and proc.poll() is None:
            looping = [(r["rank"], r["pid"]) for r in reports_in(out_dir) if r.get("looping")]
            if len(looping) == 4:
                break
            time.sleep(0.2)
        if len(looping) != 4:
            return ["only ranks %s were looping (srun: %s)" % (sorted(r for r, _ in looping), proc.poll())], \
                "".join(lines)
        job = c.run("squeue", "-h", "-n", name, "-o", "%i").stdout.split()
        cancelled = time.monotonic()
        out = c.run("scancel", *job)
        if not job or out.returncode != 0:
            problems.append("scancel %s exited %d: %s" % (job, out.returncode, out.stderr))
        pids = [pid for _, pid in looping]

        def alive():
            return [p for p in pids if os.path.exists("/proc/%d" % p) and "slurm_hosts_worker" in
                    open("/proc/%d/cmdline" % p, errors="replace").read()]

        while (alive() or proc.poll() is None) and time.monotonic() < cancelled + CANCEL_BOUND_S:
            time.sleep(0.1)
        took = time.monotonic() - cancelled
        print("test: scancel: job %s; srun exited %s and ranks %s alive %.1f s after scancel" % (
            job, proc.poll(), alive(), took), flush=True)
        if alive() or proc.poll() is None:
            problems.append("%d s after scancel: srun %s, ranks with pids %s alive" % (
                CANCEL_BOUND_S, "running" if proc.poll() is None else "ended", alive()))
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        reader.join(5)
        c.forget(name)
    return problems, "".join(lines)


def inner(hosts_sh, slurm_sh, chorusrun, script):
    end_on_sigterm()
    c = Cluster(hosts_sh, slurm_sh, chorusrun)
    up = subprocess.run(["timeout", "-k", "5", "90", slurm_sh, "up"])
    if up.returncode != 0:
        print("FAILED: slurm.sh up exited %d" % up.returncode, flush=True)
        subprocess.run(["timeout", "-k", "5", "30", slurm_sh, "down"])
        return 77 if up.returncode == 77 else 1
    tmp = tempfile.mkdtemp(prefix="chorus-slurm-hosts-")
    failed = []
    try:
        for name, job in (("hvd", lambda d: job_passes(c, "hvd", d)), ("c10d", lambda d: job_passes(c, "c10d", d)),
                          ("sbatch", lambda d: sbatch(c, script, d)), ("kill", lambda d: kill(c, d)),
                          ("scancel", lambda d: scancel(c, d))):
            started = time.monotonic()
            out_dir = os.path.join(tmp, name)
            os.mkdir(out_dir)
            try:
                problems, text = job(out_dir)
            except subprocess.TimeoutExpired as e:
                problems, text = ["no end within %s s" % e.timeout], (e.stdout or b"").decode(errors="replace")
            except Exception:  # noqa: BLE001  (a broken check fails this job, and the next jobs still run)
                problems, text = ["the check raised"], traceback.format_exc()
            left = c.shm_left()
            if left:
                problems.append("chorus segments left in /dev/shm: %s" % left)
            if not judged(name, problems, started, text, "slurm-worker:"):
                failed.append(name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        down = subprocess.run(["timeout", "-k", "5", "40", slurm_sh, "down"])
    if down.returncode != 0:
        failed.append("slurm.sh down (exit %d)" % down.returncode)
    for h, pids in sorted(c.netns_pids().items()):
        failed.append("processes left on host %d: %s" % (h, pids))
    return verdict(failed)


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--inner":
        return inner(*sys.argv[2:6])
    hosts_sh, slurm_sh, chorusrun, script = (os.path.abspath(a) for a in sys.argv[1:5])
    check = subprocess.run([slurm_sh, "check"], capture_output=True, text=True)
    if check.returncode != 0:
        print("%s: %s" % ("SKIP" if check.returncode == 77 else "FAILED: slurm.sh check",
                          (check.stdout + check.stderr).strip()), flush=True)
        return 77 if check.returncode == 77 else 1
    return run_in_hosts(hosts_sh, BOUND_S, 20, __file__, hosts_sh, slurm_sh, chorusrun, script)


if __name__ == "__main__":
    sys.exit(main())
