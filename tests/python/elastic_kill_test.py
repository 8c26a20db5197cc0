"""Kills a rank of an elastic job and checks what Horovod promises.

    elastic_kill_test.py CHORUSRUN EXAMPLE continue   3 ranks, --min-np 2, --no-blacklist (all on this
        host, which horovodrun would blacklist, ending the job: see `blacklist`); SIGKILL one mid-epoch:
        the survivors start again within 30 s, from no earlier than their last commit, and end
        with identical parameters; chorusrun exits 0.
    elastic_kill_test.py CHORUSRUN EXAMPLE continue0  the same, killing rank 0 (nothing is special
        about it: chorusrun serves the store, worker 1 becomes rank 0 and its state wins).
    elastic_kill_test.py CHORUSRUN EXAMPLE below      2 ranks, --min-np 2; SIGKILL one: every rank
        ends with the launcher's error (no hang, Horovod #3494); chorusrun exits 1.
    elastic_kill_test.py CHORUSRUN EXAMPLE blacklist  3 ranks, --min-np 2, a script offering 3 slots
        on this host, blacklisting on (the default, as horovodrun): SIGKILL one; this host is
        blacklisted for the rest of the job, so the survivors there are stopped and none replaces
        them: every rank ends with the launcher's reason naming the blacklist; chorusrun exits 1.
    elastic_kill_test.py CHORUSRUN EXAMPLE resetlimit 3 ranks, --min-np 1, --no-blacklist, --reset-limit
        1: SIGKILL worker 2, the others go on (reset 1); SIGKILL worker 1: the job ends instead of a
        second reset, worker 0 with the launcher's reason naming --reset-limit; chorusrun exits 1.
    elastic_kill_test.py CHORUSRUN EXAMPLE add        2 ranks, --max-np 3, a --host-discovery-script
        that offers a third slot mid-epoch: a third worker joins, the three go on at size 3 (the
        new one synced, Horovod #2652: no hang in the state broadcast) and end with identical
        parameters; chorusrun exits 0.
    elastic_kill_test.py CHORUSRUN EXAMPLE remove     3 ranks, --min-np 2, a script whose slots go
        from 3 to 2 mid-epoch: worker 2 (the highest id) leaves at its next commit with exit status
        0, workers 0 and 1 go on at size 2 without a rollback and end with identical parameters;
        chorusrun exits 0 and never needed SIGTERM.
    elastic_kill_test.py CHORUSRUN EXAMPLE recover    2 ranks, --min-np 2, --no-blacklist, a script offering 2
        slots, then 1 (--min-np keeps 2); SIGKILL worker 1: chorusrun waits (--elastic-timeout 60); 2 s
        later the script offers 2 slots, worker 2 starts and the two finish at size 2; exit 0.
    elastic_kill_test.py CHORUSRUN EXAMPLE timeout    as recover, --elastic-timeout 3, and no slot
        comes: after 3 s every rank ends with chorusrun's reason naming the timeout; exit 1.

The job runs in its own process group, killed at the end whatever happens; the whole test is
bounded by DEADLINE_S (and by CTest's TIMEOUT)."""

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

DEADLINE_S = 100
RECOVERY_BOUND_S = 30

LINE = re.compile(r"^\[(\d+)\] (start|commit|final) (.*)$")


class Job:
    """chorusrun with the example; every output line kept with its arrival time."""

    def __init__(self, chorusrun, example, np, min_np, max_np=None, extra=(), prefix=(), epochs=3, deadline=DEADLINE_S):
        cmd = [*prefix, chorusrun, "-np", str(np), "--min-np", str(min_np), "--max-np", str(max_np or np),
               "--timeout", str(deadline), *extra, "--", sys.executable, example, "--epochs", str(epochs),
               "--batch-sleep", "0.03", "--batches-per-commit", "4"]
        print("running:", " ".join(cmd), flush=True)
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     start_new_session=True)
        self.lines = []  # (time, text)
        self.cond = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for text in self.proc.stdout:
            text = text.rstrip("\n")
            print(text, flush=True)
            with self.cond:
                self.lines.append((time.monotonic(), text))
                self.cond.notify_all()

    def events(self, worker=None, kind=None, after=0.0):
        out = []
        for t, text in list(self.lines):
            m = LINE.match(text)
            if not m or t < after:
                continue
            w, k, rest = int(m.group(1)), m.group(2), dict(kv.split("=") for kv in m.group(3).split())
            if (worker is None or w == worker) and (kind is None or k == kind):
                out.append((t, w, k, rest))
        return out

    def wait_for(self, predicate, timeout, what):
        end = time.monotonic() + timeout
        with self.cond:
            while True:
                found = predicate()
                if found:
                    return found
                left = end - time.monotonic()
                if left <= 0 or self.proc.poll() is not None and not found:
                    raise AssertionError("timed out (%.0f s) waiting for %s" % (timeout, what))
                self.cond.wait(min(left, 0.2))

    def finish(self, timeout):
        try:
            return self.proc.wait(timeout=timeout)
        finally:
            self.kill()

    def kill(self):
        """SIGKILLs chorusrun and every process of its session (the ranks lead process groups of
        their own inside it), each by its pid."""
        for pid in [self.proc.pid] + session_members(self.proc.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        self.proc.wait()


def session_members(sid):
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid:  # after the name: state ppid pgrp session
            pids.append(int(entry))
    return pids


def kill_mid_epoch(job, victim):
    """SIGKILLs `victim` between two commits inside epoch 1 (after its second commit there, half a
    commit interval later, so some uncommitted batches are lost). Returns the kill time."""
    start = job.wait_for(lambda: job.events(victim, "start"), 60, "worker %d to start" % victim)
    pid = int(start[0][3]["pid"])
    job.wait_for(lambda: len([e for e in job.events(victim, "commit") if e[3]["epoch"] == "1"]) >= 2, 60,
                 "worker %d to commit twice in epoch 1" % victim)
    time.sleep(0.08)
    os.kill(pid, signal.SIGKILL)
    killed = time.monotonic()
    print("test: SIGKILL worker %d (pid %d)" % (victim, pid), flush=True)
    return killed


def check_continue(job, victim=2):
    killed = kill_mid_epoch(job, victim)
    survivors = [w for w in (0, 1, 2) if w != victim]
    last_commit = {w: max([int(e[3]["step"]) for e in job.events(w, "commit") if e[0] <= killed] or [0])
                   for w in survivors}

    def restarted():
        found = {e[1]: e for e in job.events(None, "start", after=killed) if e[3]["size"] == "2"}
        return list(found.values()) if set(found) == set(survivors) else None

    restarts = job.wait_for(restarted, RECOVERY_BOUND_S, "both survivors to start again at size 2")
    recovery = max(e[0] for e in restarts) - killed
    resumed = {e[1]: int(e[3]["step"]) for e in restarts}
    print("test: survivors resumed at steps %s, %.2f s after the kill (last commits %s)"
          % (resumed, recovery, last_commit), flush=True)
    assert recovery <= RECOVERY_BOUND_S, recovery
    for w in survivors:
        assert resumed[w] >= last_commit[w], "worker %d rolled back past its last commit" % w
    assert len(set(resumed.values())) == 1, resumed
    rc = job.finish(DEADLINE_S)
    finals = {e[1]: e[3] for e in job.events(None, "final")}
    print("test: chorusrun exited %d; finals %s" % (rc, finals), flush=True)
    assert rc == 0, rc
    assert set(finals) == set(survivors), finals
    assert len({f["sha"] for f in finals.values()}) == 1, "parameters differ between ranks: %s" % finals
    assert len({f["step"] for f in finals.values()}) == 1, finals
    print("RECOVERY_SECONDS %.2f" % recovery, flush=True)


def ends_failed(job, since, what="the kill"):
    """Waits (bounded) for chorusrun to end, which must be with exit 1; returns the seconds from
    `since` and the job's whole output."""
    rc = job.finish(40)
    ended = time.monotonic() - since
    text = "\n".join(t for _, t in job.lines)
    print("test: chorusrun exited %d, %.2f s after %s" % (rc, ended, what), flush=True)
    assert rc == 1, rc
    return ended, text


def check_below_min(job):
    killed = kill_mid_epoch(job, 1)
    _, text = ends_failed(job, killed)
    assert "fewer than --min-np 2" in text, "no clear error in the output"
    assert "[0]" in text and re.search(r"^\[0\] .*fewer than --min-np", text, re.M), \
        "the survivor did not report the launcher's reason"
    assert not job.events(0, "final"), "the survivor went on training alone"


def check_blacklisted(job):
    killed = kill_mid_epoch(job, 2)
    ended, text = ends_failed(job, killed)
    assert re.search(r"^chorusrun: rank 2 was killed by signal 9 \(Killed\); host \S+ is blacklisted for the rest of the job"
                     r" \(no --blacklist-cooldown-range\); worker\(s\) 0, 1 there stop", text, re.M), \
        "chorusrun did not say that it blacklisted this host"
    for w in (0, 1):
        assert re.search(r"^\[%d\] .*is blacklisted" % w, text, re.M), "worker %d did not report the reason" % w
    assert not job.events(None, "final"), "a survivor went on training on a blacklisted host"
    assert not [e for e in job.events(None, "start") if e[1] >= 3], "a worker started on a blacklisted host"
    assert ended < RECOVERY_BOUND_S, ended


def check_reset_limit(job):
    first = kill_mid_epoch(job, 2)
    job.wait_for(lambda: said(job, "elastic round 1 goes on with 2 rank(s)"), RECOVERY_BOUND_S, "reset 1")

    # The second kill once both survivors train again at size 2 (restarted, then a commit): a
    # kill while worker 0 is still in its reset ends its init with the lost connection instead of
    # chorusrun's reason.
    def training_again():
        starts = {e[1]: e[0] for e in job.events(None, "start", after=first) if e[3]["size"] == "2"}
        return set(starts) >= {0, 1} and all(job.events(w, "commit", after=starts[w]) for w in (0, 1))

    job.wait_for(training_again, RECOVERY_BOUND_S, "workers 0 and 1 to train again at size 2")
    killed = kill_mid_epoch(job, 1)
    _, text = ends_failed(job, killed, "the second kill")
    assert "the job was already reset 1 time(s), all --reset-limit 1 allows: ending the job" in text, \
        "no message naming --reset-limit"
    assert re.search(r"^\[0\] .*--reset-limit 1", text, re.M), "worker 0 did not report the reason"
    assert not said(job, "elastic round 2"), "a second reset happened"
    assert not job.events(0, "final"), "worker 0 went on training"


def resize(job, slots_file, n, workers, what):
    """After worker 0's second commit in epoch 1, offers n slots and waits until exactly
    `workers` start at size n; returns their start events and when the slots were offered."""
    job.wait_for(lambda: len([e for e in job.events(0, "commit") if e[3]["epoch"] == "1"]) >= 2, 60,
                 "worker 0 to commit twice in epoch 1")
    offer_slots(slots_file, n)
    offered = time.monotonic()

    def resized():
        found = {e[1]: e for e in job.events(None, "start", after=offered) if e[3]["size"] == str(n)}
        return list(found.values()) if set(found) == set(workers) else None

    starts = job.wait_for(resized, RECOVERY_BOUND_S, what)
    steps = {e[1]: int(e[3]["step"]) for e in starts}
    print("test: size %d at steps %s, %.2f s after the slots changed" % (n, steps, max(e[0] for e in starts) - offered),
          flush=True)
    assert len(set(steps.values())) == 1, steps
    return starts, offered


def finish_identical(job, workers):
    """Waits for chorusrun; every worker in `workers` ends with the same parameters."""
    rc = job.finish(DEADLINE_S)
    finals = {e[1]: e[3] for e in job.events(None, "final")}
    print("test: chorusrun exited %d; finals %s" % (rc, finals), flush=True)
    assert rc == 0, rc
    assert set(finals) == set(workers), finals
    assert len({f["sha"] for f in finals.values()}) == 1, "parameters differ between ranks: %s" % finals


def check_added(job, slots_file):
    starts, offered = resize(job, slots_file, 3, {0, 1, 2}, "three workers to start at size 3")
    joined = max(e[0] for e in starts) - offered
    finish_identical(job, {0, 1, 2})
    print("JOIN_SECONDS %.2f" % joined, flush=True)


def offer_slots(slots_file, n):
    """What the discovery script prints next: localhost:n (replaced whole, never half written)."""
    with open(slots_file + ".new", "w") as f:
        f.write("%d\n" % n)
    os.replace(slots_file + ".new", slots_file)
    print("test: the discovery script offers %d slot(s)" % n, flush=True)


def said(job, text):
    return [t for _, t in list(job.lines) if text in t]


def check_removed(job, slots_file):
    starts, _ = resize(job, slots_file, 2, {0, 1}, "workers 0 and 1 to start again at size 2")
    last_commit = max(int(e[3]["step"]) for e in job.events(0, "commit") if e[0] <= min(s[0] for s in starts))
    restart = int(starts[0][3]["step"])
    assert restart >= last_commit, "worker 0 rolled back past its last commit %d" % last_commit
    finish_identical(job, {0, 1})
    assert said(job, "chorusrun: --host-discovery-script offers 2 slot(s) for 3 worker(s): worker(s) 2 leave"), \
        "chorusrun did not say which worker leaves"
    assert [t for t in said(job, "was removed from the job by chorusrun") if t.startswith("[2] chorus: ")], \
        "worker 2 did not end on the launcher's word"
    assert not said(job, "still runs; sending SIGTERM"), "the removed worker had to be signalled"
    assert not said(job, "Traceback"), "a worker ended with a traceback"


def wait_below_min(job, slots_file):
    """Offers 1 slot for the 2 workers (--min-np keeps both), then SIGKILLs worker 1; returns
    when chorusrun says it waits for slots."""
    job.wait_for(lambda: job.events(1, "start"), 60, "worker 1 to start")
    offer_slots(slots_file, 1)
    job.wait_for(lambda: said(job, "--min-np 2 keeps 1 more than that"), 30, "chorusrun to keep 2 workers")
    killed = kill_mid_epoch(job, 1)
    job.wait_for(lambda: said(job, "fewer than --min-np 2: waiting up to --elastic-timeout"), 20,
                 "chorusrun to wait for slots")
    return killed


def check_recovered(job, slots_file):
    killed = wait_below_min(job, slots_file)
    time.sleep(2)
    assert job.proc.poll() is None, "chorusrun ended while it should wait for slots"
    offer_slots(slots_file, 2)
    offered = time.monotonic()

    def recovered():
        found = {e[1]: e for e in job.events(None, "start", after=offered) if e[3]["size"] == "2"}
        return list(found.values()) if set(found) == {0, 2} else None

    starts = job.wait_for(recovered, RECOVERY_BOUND_S, "workers 0 and 2 to start at size 2")
    print("test: recovered at size 2, %.2f s after the slot came back (%.2f s after the kill)"
          % (max(e[0] for e in starts) - offered, max(e[0] for e in starts) - killed), flush=True)
    rc = job.finish(DEADLINE_S)
    finals = {e[1]: e[3] for e in job.events(None, "final")}
    print("test: chorusrun exited %d; finals %s" % (rc, finals), flush=True)
    assert rc == 0, rc
    assert set(finals) == {0, 2}, finals
    assert len({f["sha"] for f in finals.values()}) == 1, "parameters differ between ranks: %s" % finals


def check_timed_out(job, slots_file):
    killed = wait_below_min(job, slots_file)
    ended, text = ends_failed(job, killed)
    assert ended >= 3, "chorusrun did not wait its --elastic-timeout"
    assert "no slots for more within --elastic-timeout 3 s: ending the job" in text, "no message naming the timeout"
    assert re.search(r"^\[0\] .*--elastic-timeout 3 s", text, re.M), "the survivor did not report the reason"
    assert not job.events(0, "final"), "the survivor went on training alone"


def main():
    chorusrun, example, mode = sys.argv[1:4]
    tmp = tempfile.mkdtemp(prefix="chorus-elastic-")
    slots_file, script = os.path.join(tmp, "slots"), os.path.join(tmp, "discover.sh")
    with open(script, "w") as f:  # prints localhost:<the number in the slots file>
        f.write("echo localhost:$(cat %s)\n" % slots_file)
    discovery = ["--host-discovery-script", "sh " + script]
    if mode == "add":
        offer_slots(slots_file, 2)
        job = Job(chorusrun, example, 2, 2, 3, discovery)
    elif mode == "remove":
        offer_slots(slots_file, 3)
        job = Job(chorusrun, example, 3, 2, 3, discovery)
    elif mode in ("recover", "timeout"):
        offer_slots(slots_file, 2)  # both start (chorusrun waits for --min-np slots first)
        job = Job(chorusrun, example, 2, 2, 3,
                  discovery + ["--no-blacklist", "--elastic-timeout", "60" if mode == "recover" else "3"])
    elif mode == "blacklist":
        offer_slots(slots_file, 3)
        job = Job(chorusrun, example, 3, 2, 3, discovery)
    elif mode == "resetlimit":
        job = Job(chorusrun, example, 3, 1, 3, ["--no-blacklist", "--reset-limit", "1"])
    elif mode.startswith("continue"):
        job = Job(chorusrun, example, 3, 2, 3, ["--no-blacklist"])
    else:
        job = Job(chorusrun, example, 2, 2)
    try:
        if mode == "add":
            check_added(job, slots_file)
        elif mode == "remove":
            check_removed(job, slots_file)
        elif mode == "recover":
            check_recovered(job, slots_file)
        elif mode == "timeout":
            check_timed_out(job, slots_file)
        elif mode == "blacklist":
            check_blacklisted(job)
        elif mode == "resetlimit":
            check_reset_limit(job)
        elif mode == "continue0":
            check_continue(job, victim=0)  # rank 0 is not special: worker 1 becomes rank 0
        else:
            (check_continue if mode == "continue" else check_below_min)(job)
    finally:
        job.kill()
        shutil.rmtree(tmp, ignore_errors=True)
    print("PASS", flush=True)


if __name__ == "__main__":
    main()
