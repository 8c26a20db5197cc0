"""A worker of elastic_restart_test.py under torchrun --max_restarts 1: ten steps of allreduce; in
the first attempt the last rank kills itself (SIGKILL) at step 3, every other rank must raise
naming it, and the restarted attempt runs all ten steps."""

import os
import signal
import sys

import torch
import torch.distributed as dist

import chorus.torch.distributed  # noqa: F401

attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
dist.init_process_group("chorus")
rank, size = dist.get_rank(), dist.get_world_size()
total = torch.zeros(100)
for step in range(10):
    if attempt == 0 and step == 3 and rank == size - 1:
        os.kill(os.getpid(), signal.SIGKILL)
    grad = torch.full((100,), float(rank + 1))
    try:
        dist.all_reduce(grad)
    except RuntimeError as e:
        print(f"attempt {attempt} rank {rank} raised: {e}", flush=True)
        sys.exit(1)
    total += grad
print(f"attempt {attempt} rank {rank} finished: {total[0].item():.0f}", flush=True)
dist.destroy_process_group()
