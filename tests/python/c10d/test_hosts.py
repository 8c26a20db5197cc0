"""Run across emulated hosts only (hosts_test.py): a group's ranks reach the ranks of their own host
through shared memory and every other rank through TCP."""

import torch
import torch.distributed as dist

from chorus import _chorus_torch as lib


def test_shared_memory_inside_a_host_and_tcp_across():
    t = torch.ones(1 << 20)
    dist.broadcast(t, src=0)  # frames on every stream's path
    use = lib._c10d_link_use(dist.distributed_c10d._get_default_group())
    assert use["hosts"] == 2, use
    # Two ranks per host: the S streams to the one local peer have rings, none to the others.
    assert use["shm_streams"] == use["streams"], use
    assert use["shm_frames"] > 0, use
