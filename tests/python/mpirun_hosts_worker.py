"""A worker of mpirun_hosts_test.py, one rank started by Open MPI's mpirun:

    mpirun_hosts_worker.py OUT_DIR [--kill-rank R]

Joins the job through `chorus.torch` (hvd.init(): rank and sizes from OMPI_COMM_WORLD_*, the
rendezvous from CHORUS_RENDEZVOUS, both passed with mpirun -x), then runs allreduce (sum of
float32 and int64, average), allgather (rows of different counts per rank) and broadcast (from
rank 0 and from the last rank), each compared exactly with what the known per-rank inputs give.
It writes OUT_DIR/report-pid<P>.json (a directory every host sees): Chorus's rank, size, local
rank and size, Open MPI's OMPI_COMM_WORLD_* and the job's session dir, the host name, /dev/shm's
device, pid, how the data plane reached its peers (bytes through shared memory and to each peer,
from this rank's metrics) and what failed; the test judges those files. The collectives, the exact
checks and the report's writing are hosts_worker_checks.py's, shared with the other launchers' workers.

--kill-rank R: rank R SIGKILLs itself after the first allreduce; every other rank's next
collective must raise, and the worker reports the message and exits 1. mpirun ends the other
ranks of a job one of whose ranks died by a signal (SIGTERM, then SIGKILL after
odls_base_sigkill_timeout): in this mode the worker notes a SIGTERM in its report and goes on, so
that its own report does not race mpirun's kill."""

import os
import signal
import socket
import sys

import torch

from hosts_worker_checks import (Ops, check_allgather, check_average, check_broadcasts, check_sum, expect_equal,
                                 kill_self, new_report, outcome, pid_report_path, ramp, run_checks, say, write_report)

torch.set_num_threads(1)
BIG = 1 << 18  # float32 elements: 1 MiB
OMPI_VARS = ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
             "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_MCA_orte_jobfam_session_dir", "OMPI_MCA_orte_hnp_uri",
             "OMPI_MCA_orte_local_daemon_uri")


def collectives(ops, failures, kill_rank):
    r, n = ops.rank, ops.size
    base = ramp(BIG)
    check_sum(ops, failures, "allreduce sum float32", base, "mp.sum")
    if r == kill_rank:
        kill_self("mpirun-worker", r)
    # int64 beyond float32's exact range: (2^40 + r) summed is n 2^40 + n (n - 1) / 2.
    wide = torch.full((4096,), (1 << 40) + r, dtype=torch.int64)
    expect_equal(failures, "allreduce sum int64", ops.allreduce(wide, "mp.sum64"),
                 torch.full((4096,), n * (1 << 40) + n * (n - 1) // 2, dtype=torch.int64))
    check_average(ops, failures, "mp.avg")
    check_allgather(ops, failures, "mp.gather")
    check_broadcasts(ops, failures, base, "mp.bcast")


def main():
    out_dir = sys.argv[1]
    kill_rank = int(sys.argv[sys.argv.index("--kill-rank") + 1]) if "--kill-rank" in sys.argv else None
    report = new_report(pid=os.getpid(), hostname=socket.gethostname(), shm_dev=os.stat("/dev/shm").st_dev,
                        ompi={k: os.environ.get(k) for k in OMPI_VARS})
    if kill_rank is not None:
        signal.signal(signal.SIGTERM, lambda *_: report.__setitem__("sigterm", True))

    def body():
        ops = Ops("hvd")
        report.update(rank=ops.rank, size=ops.size, local_rank=ops.local_rank, local_size=ops.local_size)
        collectives(ops, report["failures"], kill_rank)
        report["links"] = ops.links()
        ops.finish()

    code = run_checks(report, body)
    write_report(pid_report_path(out_dir), report)
    say("mpirun-worker: rank %s of %s on %s, local rank %s of %s, %s bytes through shared memory: %s" % (
        report.get("rank"), report.get("size"), report["hostname"], report.get("local_rank"),
        report.get("local_size"), (report.get("links") or {}).get("shm_sent_bytes"), outcome(report)))
    sys.exit(code)


if __name__ == "__main__":
    main()
