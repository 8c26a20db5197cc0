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
(bytes through shared memory and to each peer) and what failed; the test judges those files.

--kill-rank R: rank R SIGKILLs itself after the first allreduce; every other rank's next
collective must raise, and the worker reports the message and exits 1.
--loop: after the checks, allreduce until killed (scancel), having written its report (with
"looping": true) first."""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import traceback
import urllib.request

import torch

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


class Ops:
    """The collectives through one API, each returning a new tensor."""

    def __init__(self, api):
        self.api = api
        if api == "hvd":
            import chorus.torch as hvd
            hvd.init()
            self.hvd = hvd
            self.rank, self.size = hvd.rank(), hvd.size()
            self.local_rank, self.local_size = hvd.local_rank(), hvd.local_size()
            return
        import torch.distributed as dist
        import chorus.torch.distributed  # noqa: F401  (registers the backend)
        if "MASTER_ADDR" in os.environ:  # chorusrun (or torchrun) set the env:// variables
            dist.init_process_group("chorus")
            self.local_rank, self.local_size = int(os.environ["LOCAL_RANK"]), int(os.environ["LOCAL_WORLD_SIZE"])
        else:  # srun alone
            os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = slurm_master()
            dist.init_process_group("chorus", rank=int(os.environ["SLURM_PROCID"]),
                                    world_size=int(os.environ["SLURM_NTASKS"]))
            self.local_rank = int(os.environ["SLURM_LOCALID"])
            self.local_size = int(os.environ["SLURM_NTASKS_PER_NODE"])
        self.dist = dist
        self.rank, self.size = dist.get_rank(), dist.get_world_size()

    def allreduce(self, t, name, average=False):
        if self.api == "hvd":
            return self.hvd.allreduce(t, op=self.hvd.Average if average else self.hvd.Sum, name=name)
        out = t.clone()
        self.dist.all_reduce(out)
        return out / self.size if average else out

    def allgather(self, t, name):
        if self.api == "hvd":
            return self.hvd.allgather(t, name=name)
        # torch.distributed's all_gather takes equal shapes: gather the row counts first.
        rows = torch.tensor([t.shape[0]])
        counts = [torch.zeros_like(rows) for _ in range(self.size)]
        self.dist.all_gather(counts, rows)
        padded = torch.zeros((max(int(c) for c in counts),) + tuple(t.shape[1:]), dtype=t.dtype)
        padded[:t.shape[0]] = t
        parts = [torch.zeros_like(padded) for _ in range(self.size)]
        self.dist.all_gather(parts, padded)
        return torch.cat([p[:int(c)] for p, c in zip(parts, counts)])

    def broadcast(self, t, root, name):
        if self.api == "hvd":
            return self.hvd.broadcast(t, root_rank=root, name=name)
        out = t.clone()
        self.dist.broadcast(out, src=root)
        return out

    def links(self):
        """Bytes through shared-memory rings and sent per peer (hvd: this rank's Prometheus
        counters; c10d: the group's link use)."""
        if self.api == "c10d":
            from chorus import _chorus_torch as lib
            return dict(lib._c10d_link_use(self.dist.distributed_c10d._get_default_group()))
        port = int(os.environ["CHORUS_METRICS_PORT"]) + self.local_rank
        text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10).read().decode()
        shm = sum(float(v) for v in re.findall(r"^chorus_stream_shm_sent_bytes_total\{[^}]*\} (\S+)$", text, re.M))
        peers = {}
        for labels, v in re.findall(r"^chorus_stream_peer_sent_bytes_total\{([^}]*)\} (\S+)$", text, re.M):
            peer = int(re.search(r'peer="(\d+)"', labels).group(1))
            peers[peer] = peers.get(peer, 0.0) + float(v)
        return {"shm_sent_bytes": shm, "peer_sent_bytes": peers}

    def finish(self):
        if self.api == "hvd":
            self.hvd.shutdown()
        else:
            self.dist.barrier()
            self.dist.destroy_process_group()


def expect_equal(failures, what, got, want):
    if got.dtype != want.dtype or got.shape != want.shape or not torch.equal(got, want):
        bad = (got != want).nonzero()[:3].tolist() if got.shape == want.shape else "shape %s" % list(got.shape)
        failures.append("%s: not exact (dtype %s, first differences at %s)" % (what, got.dtype, bad))


def collectives(ops, failures, kill_rank):
    r, n = ops.rank, ops.size
    ramp = torch.arange(BIG, dtype=torch.float32) % 1000
    # allreduce: rank r gives ramp + 1000 (r + 1); the sum is n ramp + 500 n (n + 1), exact in float32.
    expect_equal(failures, "allreduce sum", ops.allreduce(ramp + 1000.0 * (r + 1), "sl.sum"),
                 n * ramp + 500.0 * n * (n + 1))
    if r == kill_rank:
        print("slurm-worker: rank %d SIGKILLs itself on %s (pid %d)" % (r, socket.gethostname(), os.getpid()),
              flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    # average of 2^k (r + 1) over n = 4 ranks: 2^k * 10 / 4, exact.
    expect_equal(failures, "allreduce average", ops.allreduce(torch.full((1024,), 64.0 * (r + 1)), "sl.avg", True),
                 torch.full((1024,), 64.0 * n * (n + 1) / 2 / n))
    # allgather: rank r gives r + 1 rows of 3, all equal to 10 r + column.
    mine = torch.arange(3, dtype=torch.float32).repeat(r + 1, 1) + 10.0 * r
    want = torch.cat([torch.arange(3, dtype=torch.float32).repeat(k + 1, 1) + 10.0 * k for k in range(n)])
    expect_equal(failures, "allgather", ops.allgather(mine, "sl.gather"), want)
    for root in (0, n - 1):
        t = ramp * (root + 1) if r == root else torch.full((BIG,), -1.0)
        expect_equal(failures, "broadcast from rank %d" % root, ops.broadcast(t, root, "sl.bcast.%d" % root),
                     ramp * (root + 1))


def write_report(out_dir, report):
    path = os.path.join(out_dir, "report-pid%d.json" % os.getpid())
    with open(path + ".new", "w") as f:
        json.dump(report, f)
    os.replace(path + ".new", path)


def main():
    api, out_dir = sys.argv[1], sys.argv[2]
    kill_rank = int(sys.argv[sys.argv.index("--kill-rank") + 1]) if "--kill-rank" in sys.argv else None
    loop = "--loop" in sys.argv
    report = {"api": api, "pid": os.getpid(), "hostname": socket.gethostname(),
              "slurm_procid": os.environ.get("SLURM_PROCID"), "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
              "failures": [], "raised": None}
    code = 0
    try:
        ops = Ops(api)
        report.update(rank=ops.rank, size=ops.size, local_rank=ops.local_rank, local_size=ops.local_size)
        collectives(ops, report["failures"], kill_rank)
        report["links"] = ops.links()
        if loop:
            write_report(out_dir, dict(report, looping=True))
            while True:
                ops.allreduce(torch.ones(BIG), "sl.loop")
        ops.finish()
    except Exception as e:  # noqa: BLE001  (the test judges it: expected after a kill, a failure otherwise)
        report["raised"] = "%s: %s" % (type(e).__name__, e)
        report["traceback"] = traceback.format_exc()
        code = 1
    write_report(out_dir, report)
    links = report.get("links") or {}
    shm = links.get("shm_sent_bytes", links.get("shm_frames"))
    print("slurm-worker: %s rank %s of %s on %s, local rank %s of %s, %s through shared memory: %s" % (
        api, report.get("rank"), report.get("size"), report["hostname"], report.get("local_rank"),
        report.get("local_size"), "%s %s" % (shm, "bytes" if api == "hvd" else "frames"),
        "raised " + report["raised"] if report["raised"] else "failures %s" % report["failures"]), flush=True)
    sys.exit(code if code else (1 if report["failures"] else 0))


if __name__ == "__main__":
    main()
