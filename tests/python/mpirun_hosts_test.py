"""Open MPI's mpirun across two emulated hosts (bench/hosts/hosts.sh, bench/hosts/mpirun_agent.sh):

    mpirun_hosts_test.py HOSTS_SH MPIRUN_AGENT TESTRANK

Inside `hosts.sh run 2`, every job is `mpirun --allow-run-as-root -np 4 --host
chorus-host0:2,chorus-host1:2 --mca plm_rsh_agent MPIRUN_AGENT --timeout 60 -x
CHORUS_RENDEZVOUS=chorus-host0:29500 -x CHORUS_JOB_SECRET -x PYTHONPATH ...` started on host 0
(hosts.sh exec 0), with the secret exported there only; the agent starts Open MPI's daemon on host
1 inside that host's namespaces with a login-like environment, as ssh would, so the ranks there
get Chorus's variables only through -x. Three jobs:
  1. `hvd`: mpirun_hosts_worker.py (chorus.torch): mpirun exits 0; four reports, each with exact
     allreduce (float32 and int64 sums, average), allgather (unequal row counts) and broadcast
     (from rank 0 and rank 3); Chorus's rank, size, local rank and local size equal
     OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE and are (r, 4, r % 2, 2); ranks 0-1 ran
     on chorus-host0 and 2-3 on chorus-host1 (two distinct host names; the ranks of a host see
     one /dev/shm, the two hosts different ones); the bytes to the local peer went through
     shared-memory rings (at least 90 % of them), and bytes reached the other host's ranks (TCP);
  2. `testrank`: build/tests/chorus-testrank collectives (the C++ API): mpirun exits 0; every rank
     prints its exact pass line, on the host expected, with a ring on every stream to its local
     peer and frames through them;
  3. `kill`: rank 3 SIGKILLs itself after its first allreduce: mpirun exits non-zero within
     KILL_BOUND_S (30 s); its output names rank 3 and node chorus-host1 ("mpirun noticed that process
     rank 3 ... on node chorus-host1 exited on signal 9"); ranks 0-2 raised naming "rank 3 on
     chorus-host1" (Chorus's own error). mpirun ends the rest of a job one of whose ranks died
     by a signal (SIGTERM, then SIGKILL odls_base_sigkill_timeout = 1 s later); the worker notes
     a SIGTERM and goes on, so its report does not race mpirun's kill.
For every job: no output says a shared-memory segment could not be opened; afterwards no process
is left in either host's network namespace (mpirun, Open MPI's daemon, ranks: `ip netns pids`,
within CLEAN_BOUND_S), no process runs the worker for this job's output dir (pgrep -f), neither
host's /dev/shm holds a chorus-* entry, and the job's Open MPI session dirs (reported by the
ranks) are gone. Skips (exit 77) where hosts cannot be built (not root, no ip netns) or mpirun
is missing. Bounded three times: mpirun --timeout, a deadline per job after which mpirun's
process group and every process left in the hosts are SIGKILLed by pid, and `timeout` around
`hosts.sh run` (whose trap removes the hosts, also on failure)."""

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from hosts_job import (KEEP, KILL_RANK, METRICS_PORT, Hosts, check_four_ranks, check_killed, check_survivors,
                       end_on_sigterm, hosts_missing, job_env, judged, run_in_hosts, reports_in, verdict)

here = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(here, "mpirun_hosts_worker.py")
PYTHON = "/usr/bin/python3"  # Debian's torch is for this interpreter only
BOUND_S = 240
JOB_DEADLINE_S = 90
MPIRUN_TIMEOUT_S = 60
KILL_BOUND_S = 30
CLEAN_BOUND_S = 10
RDZV_PORT = 29500      # fixed: the hosts' network namespaces are fresh, nothing else listens there
TESTRANK_LINE = re.compile(r"mpirun-testrank: OMPI rank (\d) on (\S+) session (\S+)\n")
TESTRANK_PASS = re.compile(r"testrank: collectives exact on rank (\d) of 4, (\d+) streams, (\d+) through shared memory "
                           r"\(frames (\d+)")


class Mpirun(Hosts):
    """The two hosts and mpirun on host 0."""

    def __init__(self, hosts_sh, agent):
        super().__init__(hosts_sh)
        self.agent = agent
        self.env = job_env()

    def mpirun(self, *cmd):
        forward = ["-x", "CHORUS_JOB_SECRET", "-x", "CHORUS_RENDEZVOUS=%s:%d" % (self.names[0], RDZV_PORT),
                   "-x", "CHORUS_METRICS_PORT=%d" % METRICS_PORT, "-x", "OMP_NUM_THREADS=1",
                   "-x", "PYTHONDONTWRITEBYTECODE=1", "-x", "PYTHONPATH=%s" % os.environ.get("PYTHONPATH", "")]
        for k in KEEP:
            if k in os.environ:
                forward += ["-x", k]
        return self.exec_argv(0, "mpirun", "--allow-run-as-root", "-np", "4", "--host",
                              "%s:2,%s:2" % (self.names[0], self.names[1]), "--mca", "plm_rsh_agent", self.agent,
                              "--timeout", str(MPIRUN_TIMEOUT_S), *forward, *cmd)


def describe(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return "%d %s" % (pid, f.read().replace(b"\0", b" ").decode(errors="replace")[:160])
    except OSError:
        return "%d (gone)" % pid


def run_mpirun(h, argv, deadline_s):
    """mpirun's exit code (or a string when it did not end), output and seconds taken."""
    started = time.monotonic()
    proc = subprocess.Popen(argv, env=h.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=deadline_s)
        code = proc.returncode
    except subprocess.TimeoutExpired:
        code = "no end within %d s" % deadline_s
        os.killpg(proc.pid, signal.SIGKILL)  # mpirun and the ranks it started on host 0
        out, _ = proc.communicate()
    return code, out, time.monotonic() - started


def leftovers(h, out_dir, sessions):
    """What a finished job left behind (the docstring's list); SIGKILLs leftover processes by pid."""
    problems = []
    deadline = time.monotonic() + CLEAN_BOUND_S
    left = h.netns_pids()
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = h.netns_pids()
    for host, pids in sorted(left.items()):
        problems.append("%d s after mpirun ended, processes on host %d: %s" % (
            CLEAN_BOUND_S, host, "; ".join(describe(p) for p in pids)))
        for p in pids:
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
    workers = subprocess.run(["pgrep", "-f", "%s %s" % (WORKER, out_dir)], capture_output=True, text=True).stdout.split()
    if workers:
        problems.append("worker processes left: %s" % "; ".join(describe(int(p)) for p in workers))
        for p in workers:
            try:
                os.kill(int(p), signal.SIGKILL)
            except ProcessLookupError:
                pass
    shm = h.shm_left()
    if shm:
        problems.append("chorus segments left in /dev/shm: %s" % shm)
    stale = sorted(d for d in sessions if d and os.path.exists(d))
    if stale:
        problems.append("Open MPI session dirs left: %s" % stale)
    return problems


def check_ompi(problems, rank, rep):
    """Chorus's rank, size, local rank and local size are Open MPI's OMPI_COMM_WORLD_*."""
    ompi = rep["ompi"]
    for key, var in (("rank", "RANK"), ("size", "SIZE"), ("local_rank", "LOCAL_RANK"),
                     ("local_size", "LOCAL_SIZE")):
        if str(rep[key]) != ompi["OMPI_COMM_WORLD_" + var]:
            problems.append("rank %d: Chorus's %s %r but OMPI_COMM_WORLD_%s=%r" % (
                rank, key, rep[key], var, ompi["OMPI_COMM_WORLD_" + var]))


def job_hvd(h, out_dir):
    code, text, took = run_mpirun(h, h.mpirun(PYTHON, WORKER, out_dir), JOB_DEADLINE_S)
    problems = [] if code == 0 else ["mpirun exited %s" % code]
    reports = reports_in(out_dir)
    check_four_ranks(problems, reports, "hvd", h.names, more=check_ompi, shm_devs=True)
    by_rank = {r.get("rank"): r for r in reports}
    print("test: hvd: mpirun exited %s in %.1f s; ranks on %s; OMPI_MCA_orte_hnp_uri on host 1: %s" % (
        code, took, {r: rep["hostname"] for r, rep in sorted(by_rank.items())},
        (by_rank.get(2) or {}).get("ompi", {}).get("OMPI_MCA_orte_hnp_uri")), flush=True)
    return problems, text, {r["ompi"]["OMPI_MCA_orte_jobfam_session_dir"] for r in reports}


def job_testrank(h, testrank):
    wrapper = ('echo "mpirun-testrank: OMPI rank $OMPI_COMM_WORLD_RANK on $(hostname) session '
               '$OMPI_MCA_orte_jobfam_session_dir"; exec "$0" collectives')
    code, text, took = run_mpirun(h, h.mpirun("/bin/sh", "-c", wrapper, testrank), JOB_DEADLINE_S)
    problems = [] if code == 0 else ["mpirun exited %s" % code]
    where = {int(m.group(1)): m.group(2) for m in TESTRANK_LINE.finditer(text)}
    if where != {r: h.names[r // 2] for r in range(4)}:
        problems.append("ranks ran on %s, expected 0-1 on %s and 2-3 on %s" % (where, h.names[0], h.names[1]))
    passed = set()
    for m in TESTRANK_PASS.finditer(text):
        rank, streams, shm, frames = (int(g) for g in m.groups())
        passed.add(rank)
        if not (streams > 0 and shm == streams and frames > 0):
            problems.append("rank %d: %d streams, %d with rings, %d frames through them" % (rank, streams, shm, frames))
    if passed != {0, 1, 2, 3}:
        problems.append("pass lines from ranks %s, not 0-3" % sorted(passed))
    print("test: testrank: mpirun exited %s in %.1f s; pass lines from ranks %s" % (code, took, sorted(passed)),
          flush=True)
    return problems, text, {m.group(3) for m in TESTRANK_LINE.finditer(text)}


def job_kill(h, out_dir):
    node = h.names[KILL_RANK // 2]
    code, text, took = run_mpirun(h, h.mpirun(PYTHON, WORKER, out_dir, "--kill-rank", str(KILL_RANK)), KILL_BOUND_S)
    problems = [] if isinstance(code, int) and code != 0 else ["mpirun exited %s" % code]
    check_killed(problems, text, "mpirun-worker", node)
    if not re.search(r"process rank %d with PID \d+ on node %s exited on signal 9" % (KILL_RANK, re.escape(node)),
                     text):
        problems.append("mpirun's output does not name rank %d and node %s" % (KILL_RANK, node))
    reports = reports_in(out_dir)
    raised = check_survivors(problems, reports, "rank %d on %s" % (KILL_RANK, node))
    print("test: kill: mpirun exited %s in %.1f s; SIGTERM from mpirun before the report in ranks %s; rank 0 raised %r"
          % (code, took, sorted(r.get("rank") for r in reports if r.get("sigterm")), raised.get(0)), flush=True)
    return problems, text, {r["ompi"]["OMPI_MCA_orte_jobfam_session_dir"] for r in reports}


def inner(hosts_sh, agent, testrank):
    end_on_sigterm()
    h = Mpirun(hosts_sh, agent)
    tmp = tempfile.mkdtemp(prefix="chorus-mpirun-hosts-")
    failed = []
    try:
        for name, job in (("hvd", lambda d: job_hvd(h, d)), ("testrank", lambda d: job_testrank(h, testrank)),
                          ("kill", lambda d: job_kill(h, d))):
            started = time.monotonic()
            out_dir = os.path.join(tmp, name)
            os.mkdir(out_dir)
            problems, text, sessions = job(out_dir)
            if "cannot open shared-memory segment" in text:
                problems.append("a rank tried a shared-memory ring it could not open")
            problems += leftovers(h, out_dir, sessions)
            if not judged(name, problems, started, text, "mpirun-worker:"):
                failed.append(name)
    finally:
        for pids in h.netns_pids().values():  # only after a failure or a signal: leftovers() cleared them
            for p in pids:
                try:
                    os.kill(p, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        shutil.rmtree(tmp, ignore_errors=True)
    return verdict(failed)


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--inner":
        return inner(*sys.argv[2:5])
    hosts_sh, agent, testrank = (os.path.abspath(a) for a in sys.argv[1:4])
    missing = hosts_missing(hosts_sh)
    if missing:
        print("SKIP: emulated hosts unavailable: %s" % missing, flush=True)
        return 77
    if not shutil.which("mpirun"):
        print("SKIP: no mpirun (Debian: openmpi-bin; scripts/deps.sh installs it)", flush=True)
        return 77
    return run_in_hosts(hosts_sh, BOUND_S, 10, __file__, hosts_sh, agent, testrank)


if __name__ == "__main__":
    sys.exit(main())
