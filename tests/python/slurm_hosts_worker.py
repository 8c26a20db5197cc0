"""A worker of slurm_hosts_test.py, started by srun (one task per rank) or by chorusrun:

    slurm_hosts_worker.py hvd|c10d OUT_DIR [--kill-rank R] [--loop]

Joins the job through `chorus.torch` (hvd.init(): under srun alone Chorus derives the rendezvous
from the SLURM_* variables) or torch.distributed's "chorus" backend (init_process_group: env://
under chorusrun, which sets RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT; under srun alone the
script sets MASTER_ADDR and MASTER_PORT from SLURM_* as slurm_master() shows), then runs allreduce (sum and
average), allgather (rows of different counts per rank) and broadcast (from rank 0 and from the
last rank), each compared exactly with what the known per-rank inputs give. It writes
OUT_DIR/report-pid<P>.json (a directory every host sees): rank, size, local rank and size, host
name, pid, what Slurm said (SLURM_PROCID, SLURM_JOB_ID), how the data plane reached its peers
(bytes through shared memory and to each peer) and what failed; the test judges those files. The
collectives, the exact checks and the report's writing are hosts_worker_checks.py's, shared with the
other launchers' workers.

--kill-rank R: rank R SIGKILLs itself after the first allreduce; every other rank's next
collective must raise, and the worker reports the message and exits 1.
--loop: after the checks, allreduce until killed (scancel), having written its report (with
"looping": true) first."""

import os
import socket
import subprocess
import sys

import torch

from hosts_worker_checks import (Ops, check_allgather, check_average, check_broadcasts, check_sum, kill_self,
                                 new_report, outcome, pid_report_path, ramp, run_checks, say, write_report)

torch.set_num_threads(1)
BIG = 1 << 18  # float32 elements: 1 MiB


def slurm_master():
    """MASTER_ADDR and MASTER_PORT under srun alone: rank 0 (SLURM_PROCID 0) runs on the step's
    first node; the port is the one Chorus derives for the step (40000 + (job id * 131 + step id)
    % 10000), so two steps of one allocation do not meet. Set as variables, not as a tcp:// init
    method: the "chorus" backend takes the address its ranks listen on from MASTER_ADDR's route."""
    first = subprocess.run(["scontrol", "show", "hostnames", os.environ["SLURM_STEP_NODELIST"]], check=True,
                           capture_output=True, text=True, timeout=30).stdout.split()[0]
    port = 40000 + (int(os.environ["SLURM_JOB_ID"]) * 131 + int(os.environ.get("SLURM_STEP_ID", "0"))) % 10000
    return first, str(port)


def srun_c10d_init(dist):
    """init_process_group("chorus") under srun alone: rank and size from SLURM_*, MASTER_* from
    slurm_master(); returns the local rank and size Slurm gives."""
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = slurm_master()
    dist.init_process_group("chorus", rank=int(os.environ["SLURM_PROCID"]), world_size=int(os.environ["SLURM_NTASKS"]))
    return int(os.environ["SLURM_LOCALID"]), int(os.environ["SLURM_NTASKS_PER_NODE"])


def collectives(ops, failures, kill_rank):
    base = ramp(BIG)
    check_sum(ops, failures, "allreduce sum", base, "sl.sum")
    if ops.rank == kill_rank:
        kill_self("slurm-worker", ops.rank)
    check_average(ops, failures, "sl.avg")
    check_allgather(ops, failures, "sl.gather")
    check_broadcasts(ops, failures, base, "sl.bcast")


def main():
    api, out_dir = sys.argv[1], sys.argv[2]
    kill_rank = int(sys.argv[sys.argv.index("--kill-rank") + 1]) if "--kill-rank" in sys.argv else None
    loop = "--loop" in sys.argv
    report = new_report(api=api, pid=os.getpid(), hostname=socket.gethostname(),
                        slurm_procid=os.environ.get("SLURM_PROCID"), slurm_job_id=os.environ.get("SLURM_JOB_ID"))

    def body():
        # chorusrun (or torchrun) set the env:// variables; srun alone does not.
        ops = Ops(api) if "MASTER_ADDR" in os.environ else Ops(api, srun_c10d_init)
        report.update(rank=ops.rank, size=ops.size, local_rank=ops.local_rank, local_size=ops.local_size)
        collectives(ops, report["failures"], kill_rank)
        report["links"] = ops.links()
        if loop:
            write_report(pid_report_path(out_dir), dict(report, looping=True))
            while True:
                ops.allreduce(torch.ones(BIG), "sl.loop")
        ops.finish()

    code = run_checks(report, body)
    write_report(pid_report_path(out_dir), report)
    links = report.get("links") or {}
    shm = links.get("shm_sent_bytes", links.get("shm_frames"))
    say("slurm-worker: %s rank %s of %s on %s, local rank %s of %s, %s through shared memory: %s" % (
        api, report.get("rank"), report.get("size"), report["hostname"], report.get("local_rank"),
        report.get("local_size"), "%s %s" % (shm, "bytes" if api == "hvd" else "frames"), outcome(report)))
    sys.exit(code)


if __name__ == "__main__":
    main()
