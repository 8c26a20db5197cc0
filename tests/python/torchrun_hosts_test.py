"""torchrun across two emulated hosts (bench/hosts/hosts.sh), one agent per host:

    torchrun_hosts_test.py HOSTS_SH

Each job is `python -m torch.distributed.run --nnodes 2 --nproc_per_node 2 --rdzv_backend c10d
--rdzv_endpoint chorus-host0:29400` started on host 0 and on host 1 (hosts.sh exec), running
torchrun_hosts_worker.py; the rendezvous endpoint is a host name, resolved through the hosts'
/etc/hosts, and torchrun hands the workers MASTER_ADDR = the host name of the agent that got group
rank 0. The same CHORUS_JOB_SECRET is exported to both agents. Four jobs:
  1. `hvd`: chorus.torch (hvd.init(); Chorus's store at MASTER_PORT+1);
  2. `c10d`: torch.distributed.init_process_group("chorus") (torch's store at MASTER_PORT);
  3. and 4. the same two under --max_restarts 1, where rank 3 (host 1) SIGKILLs itself after the
     first allreduce of attempt 0.
For every job: both agents exit 0; in the last round all four ranks report exact allreduce
(float32 and int64 sums of known per-rank values), allgather (unequal row counts) and broadcast
(from rank 0 and rank 3), and that Chorus's rank, size, local rank and local size are torchrun's;
ranks 0-1 ran on host 0 and ranks 2-3 on host 1: two distinct host names, each the name hosts.sh
gave that host and resolving (getfqdn too) to its eth0 address, the network namespace of that
host and one /dev/shm per host; MASTER_ADDR is host 0's name. Lanes inside a host only: under
c10d every stream to the local peer has a shared-memory ring (shm_streams == streams, frames went
through them) across 2 hosts; under hvd bytes went through rings, at most those sent to the
local peer, and bytes reached the other host's ranks (TCP); no agent's output
says that a shared-memory segment could not be opened. For the restart jobs also: rank 3 was
killed in attempt 0 (on host 1, and wrote no report), ranks 0 and 1 raised naming rank 3, and
exactly one more rendezvous round ran (a new MASTER_PORT), which passed all of the above, with
TORCHELASTIC_RESTART_COUNT=1 on host 1 (0 or 1 on host 0: see judge()).
Skips (exit 77) where hosts cannot be built (not root, no ip netns). Bounded twice: `timeout`
around `hosts.sh run` (whose trap removes the hosts, also on failure) and a deadline per job, after
which (and after every job) both agents' process groups (agent and workers) are SIGKILLed."""

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from hosts_job import (KILL_RANK, METRICS_PORT, Hosts, check_clean, check_killed, check_links, check_placement,
                       end_on_sigterm, hosts_missing, job_env, judged, reports_in, run_in_hosts, verdict)

here = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(here, "torchrun_hosts_worker.py")
BOUND_S = 280
JOB_DEADLINE_S = 100
RDZV_PORT = 29400      # fixed: the hosts' network namespaces are fresh, nothing else listens there


def run_job(hosts, name, api, restarts, out_dir):
    """Both agents of one job; returns their exit codes and outputs."""
    env = job_env(CHORUS_METRICS_PORT=str(METRICS_PORT), PYTHONUNBUFFERED="1")
    worker_args = [api, out_dir] + (["--kill-rank", str(KILL_RANK)] if restarts else [])
    agents = []
    try:
        for h in (0, 1):
            log = open(os.path.join(out_dir, "agent%d.log" % h), "w")
            argv = hosts.exec_argv(h, sys.executable, "-m", "torch.distributed.run", "--nnodes", "2",
                                   "--nproc_per_node", "2", "--rdzv_backend", "c10d", "--rdzv_endpoint",
                                   "%s:%d" % (hosts.names[0], RDZV_PORT), "--rdzv_id",
                                   "chorus-%s-%d" % (name, os.getpid()), "--max_restarts", str(restarts),
                                   "--monitor_interval", "1",
                                   # torch 1.13's launcher fails on Python 3.11 unless these name one stream.
                                   "--redirects", "1", "--tee", "1", WORKER, *worker_args)
            agents.append((subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=True), log))
        deadline = time.monotonic() + JOB_DEADLINE_S
        codes = []
        for proc, _ in agents:
            try:
                codes.append(proc.wait(timeout=max(1.0, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                codes.append("no end within %d s" % JOB_DEADLINE_S)
    finally:
        for proc, log in agents:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # the agent and the workers it started
            except ProcessLookupError:
                pass
            proc.wait()
            log.close()
    outputs = [open(os.path.join(out_dir, "agent%d.log" % h)).read() for h in (0, 1)]
    return codes, outputs


def netns_inode(tag, host):
    return os.stat("/run/netns/%s%d" % (tag, host)).st_ino


def check_round(problems, reports, api, hosts):
    """The checks the last rendezvous round of every job meets (the docstring's list)."""
    if sorted(reports) != [0, 1, 2, 3]:
        problems.append("reports from ranks %s, not 0-3" % sorted(reports))
        return
    names, addrs = hosts.names, hosts.addrs
    for rank, rep in sorted(reports.items()):
        w, host = rep["where"], rank // 2
        check_clean(problems, rank, rep)
        want = {"hostname": names[host], "fqdn": names[host], "resolves_to": addrs[host], "eth0": addrs[host],
                "netns": netns_inode(hosts.tag, host), "master_addr": names[0]}
        for key, value in want.items():
            if w[key] != value:
                problems.append("rank %d: %s is %r, expected %r (host %d)" % (rank, key, w[key], value, host))
        # A frame may go on the TCP connection beside a ring (too big, or the ring stayed full for
        # long: runtime/transport/shm/shm_link.hpp), so no lower bound on the share through rings.
        check_links(problems, rank, api, rep.get("links") or {}, 0.0)
    check_placement(problems, [reports[r]["where"]["hostname"] for r in range(4)],
                    [reports[r]["where"]["shm_dev"] for r in range(4)])
    if len({rep["where"]["master_port"] for rep in reports.values()}) != 1:
        problems.append("ranks were told different MASTER_PORTs")


def judge(name, api, restarts, codes, outputs, out_dir, hosts):
    """Problems found in one job's exit codes, outputs and reports (empty: passed)."""
    problems = ["agent on host %d: exit %s" % (h, c) for h, c in enumerate(codes) if c != 0]
    if any("cannot open shared-memory segment" in text for text in outputs):
        problems.append("a rank tried a shared-memory ring it could not open")

    # The workers' reports by rendezvous round (each round's MASTER_PORT), rounds in start order.
    by_port = {}
    for rep in reports_in(out_dir, "%s-rank*-pid*.json" % api):
        round_reports = by_port.setdefault(rep["where"]["master_port"], {})
        if rep["rank"] in round_reports:
            problems.append("two reports of rank %d at MASTER_PORT %d" % (rep["rank"], rep["where"]["master_port"]))
        round_reports[rep["rank"]] = rep
    rounds = sorted(by_port.values(), key=lambda r: min(rep["started"] for rep in r.values()))
    if len(rounds) != 1 + restarts:
        problems.append("%d rendezvous rounds ran, expected %d" % (len(rounds), 1 + restarts))
        return problems
    if restarts:
        first = rounds[0]
        if not os.path.exists(os.path.join(out_dir, "killed")) or KILL_RANK in first:
            problems.append("rank %d did not kill itself in attempt 0" % KILL_RANK)
        check_killed(problems, outputs[1], "torchrun-hosts-worker", hosts.names[KILL_RANK // 2])
        for rank in (0, 1):
            raised = (first.get(rank) or {}).get("raised") or ""
            if not re.search(r"\brank %d\b" % KILL_RANK, raised):
                problems.append("attempt 0 rank %d did not raise naming rank %d: %r" % (rank, KILL_RANK, raised))
        if any(rep["attempt"] != 0 for rep in first.values()):
            problems.append("the first round's attempts: %s" % {r: rep["attempt"] for r, rep in first.items()})
    final = rounds[-1]
    # Host 1's agent counts the restart (its worker died); host 0's does too when it sees its own
    # workers fail first, but torchrun does not count a restart it makes because another agent
    # waits in the rendezvous, so attempt 0 is allowed there.
    attempts = {r: rep["attempt"] for r, rep in sorted(final.items())}
    if any(attempts.get(r) != restarts for r in (2, 3)) or any(attempts.get(r) not in (0, restarts) for r in (0, 1)):
        problems.append("the last round's attempts (TORCHELASTIC_RESTART_COUNT): %s" % attempts)
    check_round(problems, final, api, hosts)
    ports = [next(iter(r.values()))["where"]["master_port"] for r in rounds]
    print("test: %s: agents exited %s; MASTER_ADDR %s, MASTER_PORT per round %s; last round's attempts %s, ranks on %s"
          % (name, codes, final.get(0, {}).get("where", {}).get("master_addr"), ports, attempts,
             {r: rep["where"]["hostname"] for r, rep in sorted(final.items())}), flush=True)
    return problems


def inner(hosts_sh):
    end_on_sigterm()
    hosts = Hosts(hosts_sh)
    failed = []
    for name, api, restarts in (("hvd", "hvd", 0), ("c10d", "c10d", 0), ("hvd-restart", "hvd", 1),
                                ("c10d-restart", "c10d", 1)):
        out_dir = tempfile.mkdtemp(prefix="chorus-torchrun-hosts-%s-" % name)
        try:
            started = time.monotonic()
            codes, outputs = run_job(hosts, name, api, restarts, out_dir)
            problems = judge(name, api, restarts, codes, outputs, out_dir, hosts)
            output = "".join("---- agent on host %d ----\n%s" % (h, text) for h, text in enumerate(outputs))
            if not judged(name, problems, started, output):
                failed.append(name)
        finally:
            shutil.rmtree(out_dir, ignore_errors=True)
    return verdict(failed)


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--inner":
        return inner(sys.argv[2])
    hosts_sh = sys.argv[1]
    missing = hosts_missing(hosts_sh)
    if missing:
        print("SKIP: emulated hosts unavailable: %s" % missing, flush=True)
        return 77
    return run_in_hosts(hosts_sh, BOUND_S, 10, __file__, hosts_sh)


if __name__ == "__main__":
    sys.exit(main())
