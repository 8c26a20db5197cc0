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

import glob
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time

here = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(here, "torchrun_hosts_worker.py")
BOUND_S = 280
JOB_DEADLINE_S = 100
RDZV_PORT = 29400      # fixed: the hosts' network namespaces are fresh, nothing else listens there
METRICS_PORT = 9400    # the same: each host has its own 127.0.0.1
KILL_RANK = 3
# What the agents and workers keep of the CHORUS_* variables around the test.
KEEP = ("CHORUS_RENDEZVOUS_TIMEOUT_SECONDS", "CHORUS_CONNECT_TIMEOUT_SECONDS")
# torchrun's own variables: a test run under a launcher must not hand them on.
TORCHRUN_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "GROUP_RANK",
                 "ROLE_RANK", "GROUP_WORLD_SIZE", "ROLE_WORLD_SIZE")


def agent_env():
    env = {k: v for k, v in os.environ.items()
           if not (k.startswith("CHORUS_") and not k.startswith("CHORUS_HOSTS_") and k not in KEEP)
           and not k.startswith("TORCHELASTIC_") and k not in TORCHRUN_VARS}
    env.update(CHORUS_JOB_SECRET=secrets.token_hex(32), CHORUS_METRICS_PORT=str(METRICS_PORT), PYTHONUNBUFFERED="1")
    return env


def run_job(hosts_sh, name, api, restarts, out_dir, names):
    """Both agents of one job; returns their exit codes and outputs."""
    env = agent_env()
    worker_args = [api, out_dir] + (["--kill-rank", str(KILL_RANK)] if restarts else [])
    agents = []
    try:
        for h in (0, 1):
            log = open(os.path.join(out_dir, "agent%d.log" % h), "w")
            argv = [hosts_sh, "exec", str(h), sys.executable, "-m", "torch.distributed.run", "--nnodes", "2",
                    "--nproc_per_node", "2", "--rdzv_backend", "c10d", "--rdzv_endpoint",
                    "%s:%d" % (names[0], RDZV_PORT), "--rdzv_id", "chorus-%s-%d" % (name, os.getpid()),
                    "--max_restarts", str(restarts), "--monitor_interval", "1",
                    # torch 1.13's launcher fails on Python 3.11 unless these name one stream.
                    "--redirects", "1", "--tee", "1", WORKER] + worker_args
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


def check_round(problems, reports, api, names, addrs, tag):
    """The checks the last rendezvous round of every job meets (the docstring's list)."""
    if sorted(reports) != [0, 1, 2, 3]:
        problems.append("reports from ranks %s, not 0-3" % sorted(reports))
        return
    for rank, rep in sorted(reports.items()):
        w, host = rep["where"], rank // 2
        if rep["raised"] or rep["failures"]:
            problems.append("rank %d: raised %s, failures %s%s" % (rank, rep["raised"], rep["failures"],
                                                                   "\n" + rep["traceback"] if rep.get("traceback") else ""))
        want = {"hostname": names[host], "fqdn": names[host], "resolves_to": addrs[host], "eth0": addrs[host],
                "netns": netns_inode(tag, host), "master_addr": names[0]}
        for key, value in want.items():
            if w[key] != value:
                problems.append("rank %d: %s is %r, expected %r (host %d)" % (rank, key, w[key], value, host))
        links = rep.get("links") or {}
        if api == "c10d":
            if not (links.get("hosts") == 2 and links.get("streams", 0) > 0 and links.get("shm_streams") == links[
                    "streams"] and links.get("shm_frames", 0) > 0):
                problems.append("rank %d: lanes are not shared memory inside the host only: %s" % (rank, links))
        else:
            sent = {int(p): b for p, b in links.get("peer_sent_bytes", {}).items()}
            local, remote = rank ^ 1, [p for p in sent if p // 2 != host]
            shm = links.get("shm_sent_bytes", 0)
            # A frame may go on the TCP connection beside a ring (too big, or the ring stayed
            # full for long: runtime/transport/shm/shm_link.hpp), so no lower bound but > 0.
            if not 0 < shm <= sent.get(local, 0):
                problems.append("rank %d: %.0f bytes through rings, %.0f sent to local rank %d" % (
                    rank, shm, sent.get(local, 0), local))
            if sum(sent[p] for p in remote) <= 0:
                problems.append("rank %d: nothing sent to the other host's ranks: %s" % (rank, sent))
    if len({reports[r]["where"]["hostname"] for r in reports}) != 2:
        problems.append("the ranks did not run on two distinct host names")
    for host in (0, 1):
        if reports[2 * host]["where"]["shm_dev"] != reports[2 * host + 1]["where"]["shm_dev"]:
            problems.append("host %d's ranks see two /dev/shm" % host)
    if reports[0]["where"]["shm_dev"] == reports[2]["where"]["shm_dev"]:
        problems.append("both hosts see one /dev/shm")
    if len({rep["where"]["master_port"] for rep in reports.values()}) != 1:
        problems.append("ranks were told different MASTER_PORTs")


def judge(name, api, restarts, codes, outputs, out_dir, names, addrs, tag):
    """Problems found in one job's exit codes, outputs and reports (empty: passed)."""
    problems = ["agent on host %d: exit %s" % (h, c) for h, c in enumerate(codes) if c != 0]
    if any("cannot open shared-memory segment" in text for text in outputs):
        problems.append("a rank tried a shared-memory ring it could not open")

    # The workers' reports by rendezvous round (each round's MASTER_PORT), rounds in start order.
    by_port = {}
    for path in glob.glob(os.path.join(out_dir, "%s-rank*-pid*.json" % api)):
        with open(path) as f:
            rep = json.load(f)
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
        if "rank %d SIGKILLs itself" % KILL_RANK not in outputs[1]:
            problems.append("host 1's agent did not show rank %d's last words" % KILL_RANK)
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
    check_round(problems, final, api, names, addrs, tag)
    ports = [next(iter(r.values()))["where"]["master_port"] for r in rounds]
    print("test: %s: agents exited %s; MASTER_ADDR %s, MASTER_PORT per round %s; last round's attempts %s, ranks on %s"
          % (name, codes, final.get(0, {}).get("where", {}).get("master_addr"), ports, attempts,
             {r: rep["where"]["hostname"] for r, rep in sorted(final.items())}), flush=True)
    return problems


def inner(hosts_sh):
    # hosts.sh run passes its timeout on as SIGTERM: end through the `finally`s that kill the agents.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    addrs = os.environ["CHORUS_HOSTS_ADDRS"].split(",")
    names = os.environ["CHORUS_HOSTS_NAMES"].split(",")
    tag = os.environ["CHORUS_HOSTS_TAG"]
    failed = []
    for name, api, restarts in (("hvd", "hvd", 0), ("c10d", "c10d", 0), ("hvd-restart", "hvd", 1),
                                ("c10d-restart", "c10d", 1)):
        out_dir = tempfile.mkdtemp(prefix="chorus-torchrun-hosts-%s-" % name)
        try:
            started = time.monotonic()
            codes, outputs = run_job(hosts_sh, name, api, restarts, out_dir, names)
            problems = judge(name, api, restarts, codes, outputs, out_dir, names, addrs, tag)
            print("test: %s: %s in %.1f s" % (name, "FAILED" if problems else "passed", time.monotonic() - started),
                  flush=True)
            if problems:
                for h, text in enumerate(outputs):
                    print("---- agent on host %d ----\n%s" % (h, text), flush=True)
                print("test: %s: %s" % (name, "\n  ".join(problems)), flush=True)
                failed.append(name)
        finally:
            shutil.rmtree(out_dir, ignore_errors=True)
    if failed:
        print("FAILED: %s" % ", ".join(failed), flush=True)
        return 1
    print("PASS", flush=True)
    return 0


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--inner":
        return inner(sys.argv[2])
    hosts_sh = sys.argv[1]
    check = subprocess.run([hosts_sh, "check"], capture_output=True, text=True)
    if check.returncode != 0:
        print("SKIP: emulated hosts unavailable: %s" % (check.stdout + check.stderr).strip(), flush=True)
        return 77
    return subprocess.run(["timeout", "-s", "TERM", "-k", "10", str(BOUND_S), hosts_sh, "run", "2", "--",
                           sys.executable, os.path.abspath(__file__), "--inner", hosts_sh]).returncode


if __name__ == "__main__":
    sys.exit(main())
