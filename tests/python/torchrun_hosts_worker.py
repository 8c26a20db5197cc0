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
plane reached its peers and what failed; the test judges those files. The collectives, the exact
checks and the report's writing are hosts_worker_checks.py's, shared with the other launchers' workers.

--kill-rank R: in attempt 0, rank R SIGKILLs itself after the first allreduce (once per job:
OUT_DIR/killed is created first, exclusively); every other rank's next collective must raise,
and the worker records the message and exits 1."""

import fcntl
import os
import socket
import struct
import sys
import time

import torch

from hosts_worker_checks import (Ops, check_allgather, check_broadcasts, check_sum, expect_equal, kill_self,
                                 new_report, outcome, ramp, run_checks, say, write_report)

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


def collectives(ops, failures, kill_rank, attempt, out_dir):
    r, n = ops.rank, ops.size
    base = ramp(BIG)
    # 1. allreduce: sums of float32 (the big tensor) and int64 (beyond float32's exact range).
    check_sum(ops, failures, "allreduce sum float32 x%d" % BIG, base, "th.sum.big")
    if kill_rank is not None and attempt == 0 and r == kill_rank:
        os.close(os.open(os.path.join(out_dir, "killed"), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        kill_self("torchrun-hosts-worker", r)
    small = torch.tensor([r + 1, -(r + 1), 1 << 40], dtype=torch.int64)
    expect_equal(failures, "allreduce sum int64", ops.allreduce(small, "th.sum.int"),
                 torch.tensor([n * (n + 1) // 2, -n * (n + 1) // 2, n << 40], dtype=torch.int64))
    # 2. allgather (unequal row counts), 3. broadcast from rank 0 (host 0) and the last rank (the last host).
    check_allgather(ops, failures, "th.gather")
    check_broadcasts(ops, failures, base, "th.bcast")


def main():
    api, out_dir = sys.argv[1], sys.argv[2]
    kill_rank = int(sys.argv[4]) if len(sys.argv) > 4 and sys.argv[3] == "--kill-rank" else None
    attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
    report = new_report(api=api, attempt=attempt, rank=int(os.environ["RANK"]), pid=os.getpid(), started=time.time(),
                        where=where())

    def body():
        ops = Ops(api)
        seen = (ops.rank, ops.size, ops.local_rank, ops.local_size)
        told = tuple(int(os.environ[k]) for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"))
        if seen != told:
            report["failures"].append("rank, size, local rank, local size %s but torchrun says %s" % (seen, told))
        collectives(ops, report["failures"], kill_rank, attempt, out_dir)
        report["links"] = ops.links()
        ops.finish()

    code = run_checks(report, body)
    write_report(os.path.join(out_dir, "%s-rank%d-pid%d.json" % (api, report["rank"], os.getpid())), report)
    say("torchrun-hosts-worker: %s attempt %d rank %d on %s: %s" % (
        api, attempt, report["rank"], report["where"]["hostname"], outcome(report)))
    sys.exit(code)


if __name__ == "__main__":
    main()
