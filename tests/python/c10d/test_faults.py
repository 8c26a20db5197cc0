"""A member that dies or freezes (SIGSTOP: no heartbeats, no acknowledgements) ends every pending
Work of its group with an error naming it, within init_process_group's timeout, and every later
call raises. CHORUS_C10D_FAULT picks "dead" or "frozen"; run as a job of its own with
CHORUS_TEST_NO_INIT=1 (its group is broken afterwards). The victim ends with status 0, so that the
launcher lets the others finish; a frozen one is resumed by rank 0 at the end."""

import datetime
import os
import signal
import time

import pytest
import torch
import torch.distributed as dist

TIMEOUT_S = 6


def test_a_lost_member_ends_pending_work_naming_it():
    mode = os.environ["CHORUS_C10D_FAULT"]
    dist.init_process_group("chorus", timeout=datetime.timedelta(seconds=TIMEOUT_S))
    rank, size = dist.get_rank(), dist.get_world_size()
    pids = [None] * size
    dist.all_gather_object(pids, os.getpid())
    dist.all_reduce(torch.ones(1 << 16))  # everyone is up
    victim = size - 1
    if rank == victim:
        if mode == "frozen":
            os.kill(os.getpid(), signal.SIGSTOP)
        os._exit(0)
    start = time.monotonic()
    pending = [dist.all_reduce(torch.ones(1 << 16), async_op=True),
               dist.broadcast(torch.ones(10), src=victim, async_op=True)]
    for work in pending:
        with pytest.raises(RuntimeError) as info:
            work.wait()
        text = str(info.value)
        assert f"rank {victim}" in text and "c10d." in text, text
    elapsed = time.monotonic() - start
    print(f"rank {rank}: {mode} member named after {elapsed:.2f} s: {text}", flush=True)
    assert elapsed < TIMEOUT_S + 4
    with pytest.raises(RuntimeError, match="c10d.all_reduce"):
        dist.all_reduce(torch.ones(4))
    if rank == 0 and mode == "frozen":
        os.kill(pids[victim], signal.SIGCONT)
    dist.destroy_process_group()
