"""What the workers of the tests across emulated hosts share (torchrun_hosts_worker.py,
slurm_hosts_worker.py, mpirun_hosts_worker.py): the collectives through chorus.torch or
torch.distributed's "chorus" backend (Ops), the exact checks of allreduce, allgather and broadcast
on known per-rank values, how the data plane reached its peers, a rank's SIGKILL of itself, and
the report each worker writes for its test to judge. Imported from the worker's own directory
(sys.path[0] of `python3 .../<launcher>_hosts_worker.py`)."""

import json
import os
import re
import signal
import socket
import sys
import traceback
import urllib.request

import torch


def say(line):
    """One line in one write: the launchers forward the ranks' output as it comes, interleaved."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def env_c10d_init(dist):
    """init_process_group("chorus") from the env:// variables (torchrun, chorusrun); returns the
    local rank and size they give."""
    dist.init_process_group("chorus")
    return int(os.environ["LOCAL_RANK"]), int(os.environ["LOCAL_WORLD_SIZE"])


class Ops:
    """The collectives through one API (hvd: chorus.torch; c10d: torch.distributed's "chorus"
    backend, joined by c10d_init(dist), which returns the local rank and size), each returning a
    new tensor."""

    def __init__(self, api, c10d_init=env_c10d_init):
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
        self.local_rank, self.local_size = c10d_init(dist)
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
        """How the data plane reached its peers: the group's link use (c10d), or this rank's
        Prometheus counters (hvd, metrics_links)."""
        if self.api == "c10d":
            from chorus import _chorus_torch as lib
            return dict(lib._c10d_link_use(self.dist.distributed_c10d._get_default_group()))
        return metrics_links(self.local_rank)

    def finish(self):
        if self.api == "hvd":
            self.hvd.shutdown()
        else:
            self.dist.barrier()
            self.dist.destroy_process_group()


def metrics_links(local_rank):
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


def expect_equal(failures, what, got, want):
    """Appends to `failures` unless `got` is `want` exactly (dtype, shape and every element)."""
    if got.dtype != want.dtype or got.shape != want.shape or not torch.equal(got, want):
        bad = (got != want).nonzero()[:3].tolist() if got.shape == want.shape else "shape %s" % list(got.shape)
        failures.append("%s: not exact (dtype %s, first differences at %s)" % (what, got.dtype, bad))


def ramp(big):
    """0, 1, ..., 999, 0, ... in float32, `big` elements: the large tensors' per-rank base."""
    return torch.arange(big, dtype=torch.float32) % 1000


def check_sum(ops, failures, what, base, name):
    """allreduce sum: rank r gives base + 1000 (r + 1); the sum is n base + 500 n (n + 1), exact in float32."""
    r, n = ops.rank, ops.size
    expect_equal(failures, what, ops.allreduce(base + 1000.0 * (r + 1), name), n * base + 500.0 * n * (n + 1))


def check_average(ops, failures, name):
    """allreduce average: of 64 (r + 1) over n ranks, 32 (n + 1), exact."""
    r, n = ops.rank, ops.size
    expect_equal(failures, "allreduce average", ops.allreduce(torch.full((1024,), 64.0 * (r + 1)), name, True),
                 torch.full((1024,), 32.0 * (n + 1)))


def check_allgather(ops, failures, name):
    """allgather: rank r gives r + 1 rows of 3, all equal to 10 r + column."""
    r, n = ops.rank, ops.size
    mine = torch.arange(3, dtype=torch.float32).repeat(r + 1, 1) + 10.0 * r
    want = torch.cat([torch.arange(3, dtype=torch.float32).repeat(k + 1, 1) + 10.0 * k for k in range(n)])
    expect_equal(failures, "allgather", ops.allgather(mine, name), want)


def check_broadcasts(ops, failures, base, prefix):
    """broadcast from rank 0 (the first host) and from the last rank (the last host): the root gives
    base (root + 1), the others -1 everywhere."""
    r, n = ops.rank, ops.size
    for root in (0, n - 1):
        t = base * (root + 1) if r == root else torch.full((base.numel(),), -1.0)
        expect_equal(failures, "broadcast from rank %d" % root, ops.broadcast(t, root, "%s.%d" % (prefix, root)),
                     base * (root + 1))


def kill_self(tag, rank):
    """Says so (the tests look for "rank R SIGKILLs itself on HOST"), then SIGKILLs this process."""
    say("%s: rank %d SIGKILLs itself on %s (pid %d)" % (tag, rank, socket.gethostname(), os.getpid()))
    os.kill(os.getpid(), signal.SIGKILL)


def new_report(**fields):
    """A worker's report: `fields`, and no failures and nothing raised yet."""
    return dict(fields, failures=[], raised=None)


def run_checks(report, body):
    """Runs body(); an exception it raises goes into the report (raised, traceback): the test judges
    it, expected after a kill, a failure otherwise. Returns the worker's exit code: 1 when it
    raised or a check failed."""
    try:
        body()
    except Exception as e:  # noqa: BLE001
        report["raised"] = "%s: %s" % (type(e).__name__, e)
        report["traceback"] = traceback.format_exc()
    return 1 if report["raised"] or report["failures"] else 0


def write_report(path, report):
    """Writes the report whole (through a rename), so that the test never reads half of one."""
    with open(path + ".new", "w") as f:
        json.dump(report, f)
    os.replace(path + ".new", path)


def pid_report_path(out_dir):
    """OUT_DIR/report-pid<P>.json: one report per process."""
    return os.path.join(out_dir, "report-pid%d.json" % os.getpid())


def outcome(report):
    """What the worker's last line says of its checks."""
    return "raised " + report["raised"] if report["raised"] else "failures %s" % report["failures"]
