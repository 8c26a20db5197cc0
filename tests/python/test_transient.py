"""Unnamed operations, as a training loop issues them: hvd.allreduce(loss) without a name gets a
fresh name per call ("allreduce.noname.<handle>"), which chorus.torch marks transient, so Chorus
frees the name's negotiated id once the operation is agreed instead of keeping one id per call
in every negotiation message forever. The results must stay right over many calls, named and
unnamed ops mixed, and the flag must really travel: a rank that names its op
"noname.<handle>" by hand (not transient) while the others leave it unnamed meets them as a
mismatch on every rank, naming the field."""

import time

import pytest
import torch

import chorus.torch as hvd
from chorus.common.exceptions import ChorusArgumentError
from chorus.torch import mpi_ops

QUICK_S = 10.0


def test_300_unnamed_allreduces_are_right():
    n, r = hvd.size(), hvd.rank()
    for step in range(300):
        loss = torch.tensor([float(r + step)])
        out = hvd.allreduce(loss, op=hvd.Sum)
        assert out.item() == n * step + n * (n - 1) / 2, step
        if step % 10 == 0:  # a named op beside them, as a gradient would be
            g = hvd.allreduce(torch.full((4,), float(r)), op=hvd.Average, name="grad")
            assert torch.allclose(g, torch.full((4,), (n - 1) / 2.0))


def test_unnamed_async_grouped_broadcast_and_allgather_are_right():
    n, r = hvd.size(), hvd.rank()
    for step in range(30):
        handles = [hvd.allreduce_async(torch.full((3,), float(r + k)), op=hvd.Sum) for k in range(3)]
        for k, h in enumerate(handles):
            assert torch.all(hvd.synchronize(h) == n * k + n * (n - 1) / 2)
        outs = hvd.grouped_allreduce([torch.ones(2), torch.full((5,), float(r))], op=hvd.Sum)
        assert torch.all(outs[0] == n) and torch.all(outs[1] == n * (n - 1) / 2)
        root = step % n
        assert torch.all(hvd.broadcast(torch.full((2,), float(r)), root_rank=root) == root)
        g = hvd.allgather(torch.full((r + 1, 2), float(r)))
        assert g.shape == (n * (n + 1) // 2, 2)


def test_a_transient_disagreement_raises_on_every_rank():
    # Handles count alike on every rank; rank 0 names its op exactly as the unnamed op of the
    # others is named, but by hand, so not transient: the ranks' specs differ in that flag.
    handle = mpi_ops._next_handle
    name = "noname.%d" % handle if hvd.rank() == 0 else None
    start = time.monotonic()
    with pytest.raises(ChorusArgumentError, match=r"allreduce\.noname\.%d" % handle) as info:
        hvd.allreduce(torch.ones(3), name=name)
    assert time.monotonic() - start < QUICK_S
    assert "transient" in str(info.value), str(info.value)
    # Afterwards unnamed ops work as before.
    assert torch.all(hvd.allreduce(torch.ones(3), op=hvd.Sum) == hvd.size())
