"""A worker of torchrun_hosts_test.py, started by torchrun (one agent per emulated host):

    torchrun_hosts_worker.py hvd|c10d OUT_DIR [--kill-rank R]

Joins the job through `chorus.torch` (hvd: hvd.init(), Chorus's own store at MASTER_PORT+1) or
torch.distributed's "chorus" backend (c10d: init_process_group("chorus"), torch's store at
MASTER_PORT), checks rank and sizes against torchrun's variables, then runs allreduce (sum, float32
and int64, a small and a 4 MiB tensor), allgather (rows of different counts per rank) and broadcast
(from rank 0 and from the last rank), each compared exactly with what the known per-rank inputs
give. It writes OUT_DIR/<api>-rank<R>-pid<P>.json holding its attempt (TORCHELASTIC_RESTART_COUNT),
where it ran (host name, eth0's address, the network namespace's inode, /dev/shm's device,
MASTER_ADDR and MASTER_PORT, which torchrun picks anew for each rendezvous round), how its data
plane reached its peers and what failed; the test judges those files.

--kill-rank R: in attempt 0, rank R SIGKILLs itself after the first allreduce (once per job:
OUT_DIR/killed is created first, exclusively); every other rank's next collective must raise,
and the worker records the message and exits 1."""

import fcntl
import json
import os
import re
import signal
import socket
import struct
import sys
import time
import traceback
import urllib.request

import torch

torch.set_num_threads(1)
BIG = 1 << 20  # float32 elements: 4 MiB, several chunks on every stream


def eth0_address():
    """eth0's IPv4 address (SIOCGIFADDR): the emulated host's 10.77.0.x."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        raw = fcntl.ioctl(s.fileno(), 0x8915, struct.pack("256s", b"eth0"))
    return socket.inet_ntoa(raw[20:24])


def where():
    return {"hostname": socket.gethostname(), "fqdn": socket.getfqdn(socket.gethostname()),
            "resolves_to": socket.gethostbyname(socket.gethostname()), "eth0": eth0_address(),
            "netns": os.stat("/proc/self/ns/net").st_ino, "shm_dev": os.stat("/dev/shm").st_dev,
            "master_addr": os.environ["MASTER_ADDR"], "master_port": int(os.environ["MASTER_PORT"])}


class Ops:
    """The three collectives through one API, each returning a new tensor."""

    def __init__(self, api):
        self.api = api
        if api == "hvd":
            import chorus.torch as hvd
            hvd.init()
            self.hvd = hvd
            self.rank, self.size = hvd.rank(), hvd.size()
            self.local_rank, self.local_size = hvd.local_rank(), hvd.local_size()
        else:
            import torch.distributed as dist
            import chorus.torch.distributed  # noqa: F401  (registers the backend)
            dist.init_process_group("chorus")
            self.dist = dist
            self.rank, self.size = dist.get_rank(), dist.get_world_size()
            self.local_rank, self.local_size = int(os.environ["LOCAL_RANK"]), int(os.environ["LOCAL_WORLD_SIZE"])

    def allreduce(self, t, name):
        if self.api == "hvd":
            return self.hvd.allreduce(t, op=self.hvd.Sum, name=name)
        out = t.clone()
        self.dist.all_reduce(out)
        return out

    def allgather(self, t, name):
        if self.api == "hvd":
            return self.hvd.allgather(t, name=name)
        # torch.distributed's all_gather takes equal shapes: gather the row counts first.
        rows = torch.tensor([t.shape[0]])
        counts = [torch.zeros_like(rows) for _ in range(self.size)]
        self.dist.all_gather(counts, rows)
        most = max(int(c) for c in counts)
        padded = torch.zeros((most,) + tuple(t.shape[1:]), dtype=t.dtype)
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
        Prometheus counters (hvd): bytes through shared-memory rings, and bytes per peer on TCP."""
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


def collectives(ops, failures, kill_rank, attempt, out_dir):
    r, n = ops.rank, ops.size
    ramp = torch.arange(BIG, dtype=torch.float32) % 1000
    # 1. allreduce: rank r gives ramp + 1000 (r + 1); the sum is n ramp + 500 n (n + 1), exact in float32.
    got = ops.allreduce(ramp + 1000.0 * (r + 1), "th.sum.big")
    expect_equal(failures, "allreduce sum float32 x%d" % BIG, got, n * ramp + 500.0 * n * (n + 1))
    if kill_rank is not None and attempt == 0 and r == kill_rank:
        os.close(os.open(os.path.join(out_dir, "killed"), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        print("torchrun-hosts-worker: rank %d SIGKILLs itself (pid %d)" % (r, os.getpid()), flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    small = torch.tensor([r + 1, -(r + 1), 1 << 40], dtype=torch.int64)
    expect_equal(failures, "allreduce sum int64", ops.allreduce(small, "th.sum.int"),
                 torch.tensor([n * (n + 1) // 2, -n * (n + 1) // 2, n << 40], dtype=torch.int64))
    # 2. allgather: rank r gives r + 1 rows of 3, all equal to 10 r + column.
    mine = torch.arange(3, dtype=torch.float32).repeat(r + 1, 1) + 10.0 * r
    want = torch.cat([torch.arange(3, dtype=torch.float32).repeat(k + 1, 1) + 10.0 * k for k in range(n)])
    expect_equal(failures, "allgather", ops.allgather(mine, "th.gather"), want)
    # 3. broadcast from rank 0 (host 0) and from the last rank (the last host).
    for root in (0, n - 1):
        t = ramp * (r + 1) if r == root else torch.full((BIG,), -1.0)
        expect_equal(failures, "broadcast from rank %d" % root, ops.broadcast(t, root, "th.bcast.%d" % root),
                     ramp * (root + 1))


def main():
    api, out_dir = sys.argv[1], sys.argv[2]
    kill_rank = int(sys.argv[4]) if len(sys.argv) > 4 and sys.argv[3] == "--kill-rank" else None
    attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
    report = {"api": api, "attempt": attempt, "rank": int(os.environ["RANK"]), "pid": os.getpid(),
              "started": time.time(), "where": where(), "failures": [], "raised": None}
    path = os.path.join(out_dir, "%s-rank%d-pid%d.json" % (api, report["rank"], os.getpid()))
    code = 0
    try:
        ops = Ops(api)
        seen = (ops.rank, ops.size, ops.local_rank, ops.local_size)
        told = tuple(int(os.environ[k]) for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"))
        if seen != told:
            report["failures"].append("rank, size, local rank, local size %s but torchrun says %s" % (seen, told))
        collectives(ops, report["failures"], kill_rank, attempt, out_dir)
        report["links"] = ops.links()
        ops.finish()
    except Exception as e:  # noqa: BLE001  (the test judges it: expected after a kill, a failure otherwise)
        report["raised"] = "%s: %s" % (type(e).__name__, e)
        report["traceback"] = traceback.format_exc()
        code = 1
    with open(path + ".new", "w") as f:
        json.dump(report, f)
    os.replace(path + ".new", path)
    print("torchrun-hosts-worker: %s attempt %d rank %d on %s: %s" % (
        api, attempt, report["rank"], report["where"]["hostname"],
        "raised " + report["raised"] if report["raised"] else "failures %s" % report["failures"]), flush=True)
    sys.exit(code if code else (1 if report["failures"] else 0))


if __name__ == "__main__":
    main()
