"""A name used again with another spec, as Horovod allows: once the previous operation of that
name has ended, the next one may have any dtype, shape, op or root; ranks that disagree about
the same round raise ChorusArgumentError on every rank, within seconds (never a stall); a name
still pending on this rank raises at once."""

import time

import pytest
import torch

import chorus.torch as hvd
from chorus.common.exceptions import ChorusArgumentError

# Far below the stall inspector's 60 s: a disagreement must not wait for it.
QUICK_S = 10.0


def still_works():
    assert torch.equal(hvd.allreduce(torch.ones(3), op=hvd.Sum, name="rename.still_works"),
                       torch.full((3,), float(hvd.size())))


def test_name_reused_with_new_shapes_dtypes_and_ops():
    n, r = hvd.size(), hvd.rank()
    for shape in [(3,), (4,), (2, 2), (3,), (5, 1), (4,)]:
        t = torch.full(shape, float(r + 1))
        out = hvd.allreduce(t, op=hvd.Sum, name="loss")
        assert out.shape == t.shape
        assert torch.all(out == n * (n + 1) / 2)
    for dtype in [torch.float32, torch.float64, torch.int32, torch.float32]:
        out = hvd.allreduce(torch.full((3,), r + 1, dtype=dtype), op=hvd.Sum, name="loss")
        assert out.dtype == dtype and torch.all(out == n * (n + 1) // 2)
    assert torch.all(hvd.allreduce(torch.full((3,), float(r)), op=hvd.Max, name="loss") == n - 1)
    assert torch.all(hvd.allreduce(torch.full((3,), float(r)), op=hvd.Min, name="loss") == 0)


def test_shape_changes_every_step():
    n, r = hvd.size(), hvd.rank()
    for step in range(1, 21):
        t = torch.arange(step, dtype=torch.float32) + r
        out = hvd.allreduce(t, op=hvd.Sum, name="varlen")
        assert torch.equal(out, torch.arange(step, dtype=torch.float32) * n + n * (n - 1) / 2)
        # The same name through other collectives, with the root moving too.
        root = step % n
        b = hvd.broadcast(torch.full((step % 3 + 1,), float(r)), root_rank=root, name="varlen.b")
        assert torch.all(b == root)
        g = hvd.allgather(torch.full((r + 1, step % 2 + 1), float(r)), name="varlen.g")
        assert g.shape == (n * (n + 1) // 2, step % 2 + 1)
    still_works()


def test_async_reuse_once_ended():
    h = hvd.allreduce_async(torch.ones(2), op=hvd.Sum, name="again")
    assert torch.all(hvd.synchronize(h) == hvd.size())
    h = hvd.allreduce_async(torch.ones(5, dtype=torch.float64), op=hvd.Sum, name="again")
    assert torch.all(hvd.synchronize(h) == hvd.size())


def test_new_spec_while_the_name_is_pending_here_raises_at_once():
    # Rank k submits "pend.k" only after the barrier, so on every other rank the first op is
    # certainly still pending when they submit the name again with another shape.
    for k in range(hvd.size()):
        if hvd.rank() != k:
            h = hvd.allreduce_async(torch.ones(3), op=hvd.Sum, name="pend.%d" % k)
            with pytest.raises(ValueError, match="pend.%d.*still pending" % k):
                hvd.allreduce_async(torch.ones(4), name="pend.%d" % k)
            hvd.barrier()
        else:
            hvd.barrier()
            h = hvd.allreduce_async(torch.ones(3), op=hvd.Sum, name="pend.%d" % k)
        assert torch.all(hvd.synchronize(h) == hvd.size())
    still_works()


def test_old_spec_against_new_spec_raises_on_every_rank():
    # Both ranks register "x" with [3]; then rank 0 moves on to [4] while the others use [3]
    # again (their op travels by id). With versioned names this stalled; now it is the
    # mismatch on every rank, naming the tensor and the ranks with each shape.
    hvd.allreduce(torch.ones(3), name="x")
    start = time.monotonic()
    t = torch.ones(4 if hvd.rank() == 0 else 3)
    with pytest.raises(ChorusArgumentError, match=r"allreduce\.x") as info:
        hvd.allreduce(t, name="x")
    assert time.monotonic() - start < QUICK_S
    text = str(info.value)
    assert "shape" in text and "[4] on rank 0" in text and "[3] on rank" in text, text
    others = "rank 1" if hvd.size() == 2 else "ranks 1-%d" % (hvd.size() - 1)
    assert others in text, text
    # Afterwards the name works with either shape.
    assert torch.all(hvd.allreduce(torch.ones(4), op=hvd.Sum, name="x") == hvd.size())
    assert torch.all(hvd.allreduce(torch.ones(3), op=hvd.Sum, name="x") == hvd.size())
    still_works()


def test_divergent_histories_raise_then_meet_again():
    # Rank 0 uses "y" with [3] then [4]; every other rank uses "y" only with [4]. The first
    # round disagrees (an error on every rank, quickly); the second agrees. With versioned
    # names the second round stalled ("y#1" on rank 0, "y" elsewhere).
    start = time.monotonic()
    first = torch.ones(3 if hvd.rank() == 0 else 4)
    with pytest.raises(ChorusArgumentError, match=r"allreduce\.y.*shape"):
        hvd.allreduce(first, name="y")
    assert time.monotonic() - start < QUICK_S
    start = time.monotonic()
    assert torch.all(hvd.allreduce(torch.ones(4), op=hvd.Sum, name="y") == hvd.size())
    assert time.monotonic() - start < QUICK_S
    still_works()
