"""One rank of bench/gpu/torch_gpu_bench.py: times an in-place allreduce (sum) of a CUDA float32
tensor through chorus.torch or torch.distributed (nccl or gloo) and prints
`RESULT <kind> <ranks> <bytes> <seconds_median> <algbw_GBps> <busbw_GBps>` on rank 0.
Usage: _torch_worker.py chorus|torch-nccl|torch-gloo BYTES ITERS (rank/size from chorusrun)."""

import os
import statistics
import sys
import time

import torch


def main():
    kind, nbytes, iters = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    rank = int(os.environ.get("HOROVOD_RANK", "0"))
    size = int(os.environ.get("HOROVOD_SIZE", "1"))
    local = int(os.environ.get("HOROVOD_LOCAL_RANK", "0"))
    torch.cuda.set_device(local % torch.cuda.device_count())
    t = torch.ones(nbytes // 4, dtype=torch.float32, device="cuda")
    if kind == "chorus":
        import chorus.torch as hvd
        hvd.init()

        def once():
            hvd.allreduce_(t, op=hvd.Sum, name="bench")
    else:
        import torch.distributed as dist
        backend = kind.split("-")[1]
        dist.init_process_group(backend, init_method="tcp://127.0.0.1:%s" % os.environ["BENCH_TORCH_PORT"],
                                rank=rank, world_size=size)

        def once():
            dist.all_reduce(t)
    times = []
    for i in range(3 + iters):
        t.fill_(1.0)
        torch.cuda.synchronize()
        start = time.perf_counter()
        once()
        torch.cuda.synchronize()
        if i >= 3:
            times.append(time.perf_counter() - start)
    expected = float(size)
    if not torch.all(t == expected):
        print("WRONG %s rank %d: %s" % (kind, rank, t[:4].tolist()), flush=True)
        sys.exit(1)
    med = statistics.median(times)
    alg = nbytes / med / 1e9
    bus = alg * (2 * (size - 1) / size if size > 1 else 1.0)
    if rank == 0:
        print("RESULT %s %d %d %.6f %.3f %.3f" % (kind, size, nbytes, med, alg, bus), flush=True)
    if kind == "chorus":
        hvd.shutdown()
    else:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
