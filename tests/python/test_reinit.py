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


def test_a_reinit_cuts_the_buckets_again_from_chorus_bucket_bytes(monkeypatch):
    # A worker that joins an elastic job cuts its buckets from CHORUS_BUCKET_BYTES: so does
    # every rank after shutdown() and init(), whatever set_bucket_bytes() set before.
    monkeypatch.setenv("CHORUS_BUCKET_BYTES", "300")
    hvd.init()
    torch.manual_seed(3)
    model = torch.nn.Sequential(torch.nn.Linear(10, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters())

    def layout():
        return [(b.name, len(b.params)) for b in opt._buckets]

    def step():
        opt.zero_grad()
        model(torch.ones(2, 10)).sum().backward()
        opt.step()

    first = layout()
    step()
    assert opt.set_bucket_bytes(1 << 20) == 1 << 20
    step()
    assert layout() != first
    hvd.shutdown()
    hvd.init()
    assert layout() == first
    step()  # the buckets' order is agreed again in the new job
    assert hvd.allgather_object(layout()) == [layout()] * hvd.size()
    hvd.shutdown()
