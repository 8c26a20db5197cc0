"""What the drivers of the tests across emulated hosts share (torchrun_hosts_test.py,
slurm_hosts_test.py, mpirun_hosts_test.py): the hosts `hosts.sh run` made (Hosts: names,
addresses, network namespaces, /dev/shm), the environment a job starts with, the workers'
reports and the checks on them (hosts_worker_checks.py writes them: four ranks two per host,
their links, the survivors of a killed rank), each job's verdict and the test's, and the outer
run (a skip without hosts, `timeout` around `hosts.sh run`). Imported from the driver's own
directory (sys.path[0] of `python3 .../<launcher>_hosts_test.py`)."""

import glob
import json
import os
import re
import secrets
import signal
import subprocess
import sys
import time

KILL_RANK = 3
METRICS_PORT = 9400  # fixed: each host has its own 127.0.0.1
# What the jobs keep of the CHORUS_* variables around the test (CTest's bounds).
KEEP = ("CHORUS_RENDEZVOUS_TIMEOUT_SECONDS", "CHORUS_CONNECT_TIMEOUT_SECONDS")
# Launchers' variables: a test run under one (CI under Slurm, torchrun, mpirun) must not hand them on.
LAUNCHER_PREFIXES = ("SLURM_", "TORCHELASTIC_", "OMPI_", "PMIX_", "PMI_")
LAUNCHER_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "GROUP_RANK",
                 "ROLE_RANK", "GROUP_WORLD_SIZE", "ROLE_WORLD_SIZE")


def job_env(**extra):
    """The environment a job starts with: this process's, less the CHORUS_* variables other than
    CHORUS_HOSTS_* and KEEP and less the launchers' variables, with a fresh CHORUS_JOB_SECRET and
    `extra`."""
    env = {k: v for k, v in os.environ.items()
           if not (k.startswith("CHORUS_") and not k.startswith("CHORUS_HOSTS_") and k not in KEEP)
           and not k.startswith(LAUNCHER_PREFIXES) and k not in LAUNCHER_VARS}
    env.update(CHORUS_JOB_SECRET=secrets.token_hex(32), **extra)
    return env


class Hosts:
    """The emulated hosts this test runs in, as `hosts.sh run` describes them (CHORUS_HOSTS_*)."""

    def __init__(self, hosts_sh):
        self.hosts_sh = hosts_sh
        self.names = os.environ["CHORUS_HOSTS_NAMES"].split(",")
        self.addrs = os.environ["CHORUS_HOSTS_ADDRS"].split(",")
        self.tag = os.environ["CHORUS_HOSTS_TAG"]

    def exec_argv(self, host, *cmd):
        """`cmd` run inside host `host`'s namespaces."""
        return [self.hosts_sh, "exec", str(host), *cmd]

    def netns_pids(self):
        """Processes in each host's network namespace: {host: [pid, ...]} for non-empty ones."""
        left = {}
        for h in range(len(self.names)):
            pids = subprocess.run(["ip", "netns", "pids", "%s%d" % (self.tag, h)], capture_output=True,
                                  text=True, timeout=30).stdout.split()
            if pids:
                left[h] = [int(p) for p in pids]
        return left

    def shm_left(self):
        """chorus-* entries in each host's /dev/shm, by host name; removed once seen, so that the
        next job is judged on its own."""
        left = {}
        for h in range(len(self.names)):
            out = subprocess.run(self.exec_argv(h, "ls", "-A", "/dev/shm"), capture_output=True, text=True,
                                 timeout=30).stdout.split()
            found = [e for e in out if e.startswith("chorus-")]
            if found:
                left[self.names[h]] = found
                subprocess.run(self.exec_argv(h, "rm", "-rf", "--", *("/dev/shm/" + e for e in found)), timeout=30)
        return left


def reports_in(out_dir, pattern="report-pid*.json"):
    """The workers' reports in `out_dir` (hosts_worker_checks.write_report)."""
    reports = []
    for path in sorted(glob.glob(os.path.join(out_dir, pattern))):
        with open(path) as f:
            reports.append(json.load(f))
    return reports


def check_clean(problems, rank, rep):
    """Whether rank `rank`'s report says that nothing raised and no check failed (else a problem)."""
    if rep["raised"] or rep["failures"]:
        problems.append("rank %d: raised %s, failures %s%s" % (rank, rep["raised"], rep["failures"],
                                                               "\n" + rep["traceback"] if rep.get("traceback") else ""))
        return False
    return True


def check_links(problems, rank, api, links, least_shm_share):
    """Lanes inside a host only, for rank `rank` of four, two per host (ranks r and r ^ 1 share one).
    c10d (the group's link use): two hosts, and every stream to the local peer has a shared-memory
    ring, frames went through them. hvd (the rank's counters): bytes went through rings, at least
    `least_shm_share` of those sent to the local peer and at most all of them, and bytes reached
    the other host's ranks (TCP)."""
    if api == "c10d":
        if not (links.get("hosts") == 2 and links.get("streams", 0) > 0 and links.get("shm_streams") == links[
                "streams"] and links.get("shm_frames", 0) > 0):
            problems.append("rank %d: lanes are not shared memory inside the host only: %s" % (rank, links))
        return
    sent = {int(p): b for p, b in links.get("peer_sent_bytes", {}).items()}
    local, shm = rank ^ 1, links.get("shm_sent_bytes", 0)
    to_local = sent.get(local, 0)
    if not (shm > 0 and to_local > 0 and least_shm_share * to_local <= shm <= to_local):
        problems.append("rank %d: %.0f bytes through rings, %.0f sent to local rank %d" % (rank, shm, to_local, local))
    if sum(b for p, b in sent.items() if p // 2 != rank // 2) <= 0:
        problems.append("rank %d: nothing sent to the other host's ranks: %s" % (rank, sent))


def check_placement(problems, hostnames, shm_devs=None):
    """Ranks 0-1 on one host and 2-3 on the other: two distinct host names and, when the ranks'
    /dev/shm devices are given, one /dev/shm per host."""
    if len(set(hostnames)) != 2:
        problems.append("the ranks did not run on two distinct host names")
    if shm_devs is None:
        return
    for host in (0, 1):
        if shm_devs[2 * host] != shm_devs[2 * host + 1]:
            problems.append("host %d's ranks see two /dev/shm (devices by rank %s)" % (host, shm_devs))
    if shm_devs[0] == shm_devs[2]:
        problems.append("both hosts see one /dev/shm (devices by rank %s)" % shm_devs)


def check_four_ranks(problems, reports, api, names, want=None, more=None, shm_devs=False):
    """The reports of a job of four ranks, two per host, that passed: ranks 0-3 once each, none
    raised or failed a check; size 4, local size 2, local rank = rank % 2, host name names[rank //
    2], and the values want(rank) adds; more(problems, rank, report) for what else a report must
    hold; links as check_links with at least 90 % of the bytes to the local peer through rings;
    placement as check_placement (shm_devs: the reports hold /dev/shm's device). Returns the
    reports by rank, or None when the ranks are not 0-3 once each."""
    by_rank = {r.get("rank"): r for r in reports}
    if sorted(by_rank, key=str) != [0, 1, 2, 3] or len(reports) != 4:
        problems.append("reports from ranks %s, not 0-3 once each" % [r.get("rank") for r in reports])
        return None
    for rank, rep in sorted(by_rank.items()):
        if not check_clean(problems, rank, rep):
            continue
        expected = {"size": 4, "local_size": 2, "local_rank": rank % 2, "hostname": names[rank // 2]}
        expected.update(want(rank) if want else {})
        for key, value in expected.items():
            if rep[key] != value:
                problems.append("rank %d: %s is %r, expected %r" % (rank, key, rep[key], value))
        if more:
            more(problems, rank, rep)
        check_links(problems, rank, api, rep.get("links") or {}, 0.9)
    check_placement(problems, [by_rank[r]["hostname"] for r in range(4)],
                    [by_rank[r]["shm_dev"] for r in range(4)] if shm_devs else None)
    return by_rank


def check_killed(problems, output, marker, node):
    """The output holds rank KILL_RANK's last words before its SIGKILL (hosts_worker_checks.kill_self)
    on host `node`."""
    if "%s: rank %d SIGKILLs itself on %s" % (marker, KILL_RANK, node) not in output:
        problems.append("rank %d did not kill itself on %s" % (KILL_RANK, node))


def check_survivors(problems, reports, naming):
    """The reports of a job whose rank KILL_RANK killed itself: from ranks 0-2 once each, every one
    raised an error naming `naming` (whole words: "rank 3", "rank 3 on chorus-host1"). Returns
    what each raised, by rank."""
    ranks = sorted((r.get("rank") for r in reports), key=str)
    if ranks != [0, 1, 2]:
        problems.append("reports from ranks %s, not 0-2 once each" % ranks)
    raised = {r.get("rank"): r["raised"] or "" for r in reports}
    for rank, why in sorted(raised.items(), key=lambda item: str(item[0])):
        if not re.search(r"\b%s\b" % re.escape(naming), why):
            problems.append("rank %s did not raise naming %s: %r" % (rank, naming, why))
    return raised


def judged(name, problems, started, output, marker=None):
    """Prints one job's verdict (after the workers' lines in its output, those holding `marker`),
    and its output and problems when it failed; returns whether it passed."""
    if marker:
        print("".join(line + "\n" for line in output.splitlines() if marker in line), end="", flush=True)
    print("test: %s: %s in %.1f s" % (name, "FAILED" if problems else "passed", time.monotonic() - started),
          flush=True)
    if problems:
        print("---- %s output ----\n%s\ntest: %s:\n  %s" % (name, output, name, "\n  ".join(problems)), flush=True)
    return not problems


def verdict(failed):
    """The test's last line and exit code: FAILED naming what failed (1), or PASS (0)."""
    if failed:
        print("FAILED: %s" % ", ".join(failed), flush=True)
        return 1
    print("PASS", flush=True)
    return 0


def end_on_sigterm():
    """hosts.sh run passes its timeout on as SIGTERM: end through the `finally`s that kill what the
    test started."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))


def hosts_missing(hosts_sh):
    """Why emulated hosts cannot be built here (hosts.sh check: not root, no ip netns), or None."""
    check = subprocess.run([hosts_sh, "check"], capture_output=True, text=True)
    return None if check.returncode == 0 else (check.stdout + check.stderr).strip() or "hosts.sh check failed"


def run_in_hosts(hosts_sh, bound_s, kill_after_s, script, *args, up=()):
    """`script --inner args` inside `hosts.sh run 2 [up]` (whose trap removes the hosts, also on
    failure), under `timeout`: SIGTERM after bound_s, SIGKILL kill_after_s later. Returns its exit
    code."""
    return subprocess.run(["timeout", "-s", "TERM", "-k", str(kill_after_s), str(bound_s), hosts_sh, "run", "2",
                           *up, "--", sys.executable, os.path.abspath(script), "--inner", *args]).returncode
