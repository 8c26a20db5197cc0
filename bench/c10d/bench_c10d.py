"""torch.distributed's all_reduce on the "chorus" backend against the same call on Gloo, in one job,
and against Chorus's own data plane without torch in between (the group's allreduce called from
C++ in a loop: what torch's layer adds). Run it under a launcher, one process per rank:

    build/bindings/cli/chorusrun -np 2 -- /usr/bin/python3 bench/c10d/bench_c10d.py [--sizes 4K,64M]

(./chorus.sh bench-c10d does, and with --emulated-hosts H across emulated hosts.) Per size, the
implementations take turns in blocks of --iters calls (interleaved, --rounds rounds), after a
warm-up; a call's time is the slowest rank's (each rank's times are gathered after the block),
and each result is the median over every timed call:

    RESULT c10d_allreduce <impl> <N> <bytes> <median_us> <busbw_GBps>
    RESULT cpu_per_gb <impl> <user_s> <sys_s> <N> <bytes>

impl: chorus (dist.all_reduce, default group "chorus"), gloo (dist.all_reduce on a gloo group of
the same ranks), chorus_cpp (the same allreduce on the chorus group, from C++), and with
--impls ...,hvd chorus.torch's allreduce_ (the Horovod API: negotiated by gossip, then the
pipeline), which the backend's calls skip. busbw counts
2(N-1)/N of the buffer per call, as nccl-tests do. cpu_per_gb is the CPU time (user and
system, every thread of the process, the mean over ranks) per GB of buffer allreduced during
the timed blocks: what the library takes from training on the same cores. Then ratios: chorus/gloo of the busbw, and the
microseconds torch's layer adds (chorus - chorus_cpp)."""

import argparse
import os
import resource
import statistics
import sys
import time

import torch
import torch.distributed as dist

import chorus.torch.distributed  # noqa: F401
from chorus import _chorus_torch as lib


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="4K,64M")
    p.add_argument("--impls", default="chorus,gloo,chorus_cpp")
    p.add_argument("--iters", type=int, default=0, help="calls per block (default: by size)")
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("chorus")
    rank, n = dist.get_rank(), dist.get_world_size()
    gloo = dist.new_group(backend="gloo") if "gloo" in args.impls.split(",") else None
    hvd = None
    if "hvd" in args.impls.split(","):
        import chorus.torch as hvd
        hvd.init()
    world = dist.distributed_c10d._get_default_group()
    for size in [parse_size(s) for s in args.sizes.split(",")]:
        numel = max(1, size // 4)
        t = torch.ones(numel)
        iters = args.iters or max(3, min(2000, int(2e8 // max(size, 1 << 12))))
        times, cpu = {}, {}

        def block(impl, count):
            if impl == "chorus_cpp":
                return lib._c10d_allreduce_loop(world, t, count)
            if impl == "hvd":
                out = []
                for _ in range(count):
                    start = time.perf_counter()
                    hvd.allreduce_(t, name="bench", op=hvd.Sum)
                    out.append(time.perf_counter() - start)
                return out
            out = []
            group = gloo if impl == "gloo" else None
            for _ in range(count):
                start = time.perf_counter()
                dist.all_reduce(t, group=group)
                out.append(time.perf_counter() - start)
            return out

        impls = args.impls.split(",")
        for impl in impls:  # warm-up: connections, buffers, caches
            block(impl, max(2, iters // 10))
        for r in range(args.rounds):
            for impl in (impls if r % 2 == 0 else impls[::-1]):
                dist.barrier()
                before = resource.getrusage(resource.RUSAGE_SELF)  # every thread, microseconds
                mine = torch.tensor(block(impl, iters), dtype=torch.float64)
                after = resource.getrusage(resource.RUSAGE_SELF)
                used = torch.tensor([after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime],
                                    dtype=torch.float64)
                dist.all_reduce(used)
                acc = cpu.setdefault(impl, [0.0, 0.0, 0.0])
                acc[0] += used[0].item() / n
                acc[1] += used[1].item() / n
                acc[2] += numel * 4 * iters / 1e9
                slowest = mine.clone()
                dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
                times.setdefault(impl, []).extend(slowest.tolist())
        if rank == 0:
            med = {}
            for impl in impls:
                med[impl] = statistics.median(times[impl])
                busbw = 2 * (n - 1) / n * numel * 4 / med[impl] / 1e9
                print("RESULT c10d_allreduce %s %d %d %.2f %.3f" % (impl, n, numel * 4, med[impl] * 1e6, busbw),
                      flush=True)
                user, system, gb = cpu[impl]
                print("RESULT cpu_per_gb %s %.3f %.3f %d %d" % (impl, user / gb, system / gb, n, numel * 4), flush=True)
            if "gloo" in med:
                print("  %d bytes: chorus/gloo busbw %.2f" % (numel * 4, med["gloo"] / med["chorus"]), file=sys.stderr)
                mine, theirs = sum(cpu["chorus"][:2]), sum(cpu["gloo"][:2])
                if theirs > 0:
                    print("  %d bytes: chorus/gloo CPU per GB %.2f" % (numel * 4, mine / theirs), file=sys.stderr)
            if "chorus_cpp" in med:
                print("  %d bytes: torch's layer adds %.2f us" % (numel * 4, (med["chorus"] - med["chorus_cpp"]) * 1e6),
                      file=sys.stderr)
    dist.barrier()
    if hvd is not None:
        hvd.shutdown()
    if gloo is not None:
        # torch 1.13's teardown of a Gloo group can deadlock on the GIL (bench_train.py): leave.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
