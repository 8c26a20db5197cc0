"""shutdown() then init() in one process, several times (Horovod's lifecycle): each job has
its own rendezvous and mesh, names may be reused, and ops after shutdown() fail clearly.
Run with CHORUS_TEST_NO_INIT=1 (the session fixture then leaves init to the test)."""

import pytest
import torch

import chorus.torch as hvd
from chorus.common.exceptions import HorovodInternalError


def test_init_shutdown_init_three_times():
    for round_ in range(3):
        hvd.init()
        assert hvd.is_initialized() and hvd.size() >= 1
        out = hvd.allreduce(torch.full((4,), float(hvd.rank() + round_)), op=hvd.Sum, name="reinit.same_name")
        assert out.tolist() == [float(sum(r + round_ for r in range(hvd.size())))] * 4
        hvd.barrier()
        hvd.shutdown()
        assert not hvd.is_initialized()
        with pytest.raises((ValueError, HorovodInternalError, RuntimeError)):
            hvd.allreduce(torch.ones(2), name="after.shutdown")
