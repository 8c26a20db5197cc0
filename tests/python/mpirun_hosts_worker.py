"""A worker of mpirun_hosts_test.py, one rank started by Open MPI's mpirun:

    mpirun_hosts_worker.py OUT_DIR [--kill-rank R]

Joins the job through `chorus.torch` (hvd.init(): rank and sizes from OMPI_COMM_WORLD_*, the
rendezvous from CHORUS_RENDEZVOUS, both passed with mpirun -x), then runs allreduce (sum of
float32 and int64, average), allgather (rows of different counts per rank) and broadcast (from
rank 0 and from the last rank), each compared exactly with what the known per-rank inputs give.
It writes OUT_DIR/report-pid<P>.json (a directory every host sees): Chorus's rank, size, local
rank and size, Open MPI's OMPI_COMM_WORLD_* and the job's session dir, the host name, /dev/shm's
device, pid, how the data plane reached its peers (bytes through shared memory and to each peer,
from this rank's metrics) and what failed; the test judges those files.

--kill-rank R: rank R SIGKILLs itself after the first allreduce; every other rank's next
collective must raise, and the worker reports the message and exits 1. mpirun ends the other
ranks of a job one of whose ranks died by a signal (SIGTERM, then SIGKILL after
odls_base_sigkill_timeout): in this mode the worker notes a SIGTERM in its report and goes on, so
that its own report does not race mpirun's kill."""

import json
import os
import re
import signal
import socket
import sys
import traceback
import urllib.request

import torch

torch.set_num_threads(1)
BIG = 1 << 18  # float32 elements: 1 MiB
OMPI_VARS = ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
             "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_MCA_orte_jobfam_session_dir", "OMPI_MCA_orte_hnp_uri",
             "OMPI_MCA_orte_local_daemon_uri")


def say(line):
    """One line in one write: mpirun forwards the ranks' output as it comes, interleaved."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def expect_equal(failures, what, got, want):
    if got.dtype != want.dtype or got.shape != want.shape or not torch.equal(got, want):
        bad = (got != want).nonzero()[:3].tolist() if got.shape == want.shape else "shape %s" % list(got.shape)
        failures.append("%s: not exact (dtype %s, first differences at %s)" % (what, got.dtype, bad))


def collectives(hvd, failures, kill_rank):
    r, n = hvd.rank(), hvd.size()
    ramp = torch.arange(BIG, dtype=torch.float32) % 1000
    # rank r gives ramp + 1000 (r + 1): the sum is n ramp + 500 n (n + 1), exact in float32.
    expect_equal(failures, "allreduce sum float32", hvd.allreduce(ramp + 1000.0 * (r + 1), op=hvd.Sum, name="mp.sum"),
                 n * ramp + 500.0 * n * (n + 1))
    if r == kill_rank:
        say("mpirun-worker: rank %d SIGKILLs itself on %s (pid %d)" % (r, socket.gethostname(), os.getpid()))
        os.kill(os.getpid(), signal.SIGKILL)
    # int64 beyond float32's exact range: (2^40 + r) summed is n 2^40 + n (n - 1) / 2.
    expect_equal(failures, "allreduce sum int64",
                 hvd.allreduce(torch.full((4096,), (1 << 40) + r, dtype=torch.int64), op=hvd.Sum, name="mp.sum64"),
                 torch.full((4096,), n * (1 << 40) + n * (n - 1) // 2, dtype=torch.int64))
    # the average of 64 (r + 1) over n ranks: 32 (n + 1), exact.
    expect_equal(failures, "allreduce average",
                 hvd.allreduce(torch.full((1024,), 64.0 * (r + 1)), op=hvd.Average, name="mp.avg"),
                 torch.full((1024,), 32.0 * (n + 1)))
    # rank r gives r + 1 rows of 3, all 10 r + column.
    mine = torch.arange(3, dtype=torch.float32).repeat(r + 1, 1) + 10.0 * r
    want = torch.cat([torch.arange(3, dtype=torch.float32).repeat(k + 1, 1) + 10.0 * k for k in range(n)])
    expect_equal(failures, "allgather", hvd.allgather(mine, name="mp.gather"), want)
    for root in (0, n - 1):
        t = ramp * (root + 1) if r == root else torch.full((BIG,), -1.0)
        expect_equal(failures, "broadcast from rank %d" % root,
                     hvd.broadcast(t, root_rank=root, name="mp.bcast.%d" % root), ramp * (root + 1))


def links(local_rank):
    """Bytes through shared-memory rings and sent per peer: this rank's Prometheus counters
    (served on CHORUS_METRICS_PORT + local rank)."""
    port = int(os.environ["CHORUS_METRICS_PORT"]) + local_rank
    text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10).read().decode()
    shm = sum(float(v) for v in re.findall(r"^chorus_stream_shm_sent_bytes_total\{[^}]*\} (\S+)$", text, re.M))
    peers = {}
    for labels, v in re.findall(r"^chorus_stream_peer_sent_bytes_total\{([^}]*)\} (\S+)$", text, re.M):
        peer = int(re.search(r'peer="(\d+)"', labels).group(1))
        peers[peer] = peers.get(peer, 0.0) + float(v)
    return {"shm_sent_bytes": shm, "peer_sent_bytes": peers}


def write_report(out_dir, report):
    path = os.path.join(out_dir, "report-pid%d.json" % os.getpid())
    with open(path + ".new", "w") as f:
        json.dump(report, f)
    os.replace(path + ".new", path)


def main():
    out_dir = sys.argv[1]
    kill_rank = int(sys.argv[sys.argv.index("--kill-rank") + 1]) if "--kill-rank" in sys.argv else None
    report = {"pid": os.getpid(), "hostname": socket.gethostname(), "shm_dev": os.stat("/dev/shm").st_dev,
              "ompi": {k: os.environ.get(k) for k in OMPI_VARS}, "failures": [], "raised": None}
    if kill_rank is not None:
        signal.signal(signal.SIGTERM, lambda *_: report.__setitem__("sigterm", True))
    code = 0
    try:
        import chorus.torch as hvd
        hvd.init()
        report.update(rank=hvd.rank(), size=hvd.size(), local_rank=hvd.local_rank(), local_size=hvd.local_size())
        collectives(hvd, report["failures"], kill_rank)
        report["links"] = links(hvd.local_rank())
        hvd.shutdown()
    except Exception as e:  # noqa: BLE001  (the test judges it: expected after a kill, a failure otherwise)
        report["raised"] = "%s: %s" % (type(e).__name__, e)
        report["traceback"] = traceback.format_exc()
        code = 1
    write_report(out_dir, report)
    say("mpirun-worker: rank %s of %s on %s, local rank %s of %s, %s bytes through shared memory: %s" % (
        report.get("rank"), report.get("size"), report["hostname"], report.get("local_rank"),
        report.get("local_size"), (report.get("links") or {}).get("shm_sent_bytes"),
        "raised " + report["raised"] if report["raised"] else "failures %s" % report["failures"]))
    sys.exit(code if code else (1 if report["failures"] else 0))


if __name__ == "__main__":
    main()
