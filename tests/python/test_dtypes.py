"""Horovod's narrower types: int8, int16 and bool on every collective (bool reduces as logic:
Sum and Max are "or", Min and Product "and"; Average is refused)."""

import pytest
import torch

import chorus.torch as hvd

NARROW = [torch.int8, torch.int16]


@pytest.mark.parametrize("dtype", NARROW)
def test_narrow_integers_allreduce_every_op(dtype):
    n, r = hvd.size(), hvd.rank()
    t = (torch.arange(10) % 5 - 2 + r).to(dtype)  # small: no wrap-around
    ranks = [(torch.arange(10) % 5 - 2 + q) for q in range(n)]
    assert torch.equal(hvd.allreduce(t, op=hvd.Sum, name="nw.sum.%s" % dtype), sum(ranks).to(dtype))
    assert torch.equal(hvd.allreduce(t, op=hvd.Min, name="nw.min.%s" % dtype), torch.stack(ranks).min(0)[0].to(dtype))
    assert torch.equal(hvd.allreduce(t, op=hvd.Max, name="nw.max.%s" % dtype), torch.stack(ranks).max(0)[0].to(dtype))
    avg = hvd.allreduce(t, op=hvd.Average, name="nw.avg.%s" % dtype)
    assert torch.equal(avg, torch.div(sum(ranks), n, rounding_mode="trunc").to(dtype))


@pytest.mark.parametrize("dtype", NARROW + [torch.bool])
def test_narrow_types_broadcast_allgather_alltoall_reducescatter(dtype):
    n, r = hvd.size(), hvd.rank()
    t = (torch.arange(2 * n).view(2 * n, 1) + r).remainder(2 if dtype == torch.bool else 100).to(dtype)
    assert torch.equal(hvd.broadcast(t, root_rank=0, name="nt.b.%s" % dtype),
                       (torch.arange(2 * n).view(2 * n, 1)).remainder(2 if dtype == torch.bool else 100).to(dtype))
    g = hvd.allgather(t, name="nt.g.%s" % dtype)
    assert g.dtype == dtype and g.shape == (2 * n * n, 1)
    rows = hvd.alltoall(t, name="nt.a.%s" % dtype)
    assert rows.dtype == dtype and rows.shape == (2 * n, 1)
    if dtype != torch.bool:
        part = hvd.reducescatter(t, op=hvd.Sum, name="nt.rs.%s" % dtype)
        full = sum((torch.arange(2 * n).view(2 * n, 1) + q).remainder(100) for q in range(n)).to(dtype)
        assert torch.equal(part, full[2 * r:2 * r + 2])


def test_bool_allreduce_is_logic():
    n, r = hvd.size(), hvd.rank()
    t = torch.tensor([False, r == 0, True, r == n - 1])
    assert hvd.allreduce(t, op=hvd.Sum, name="b.or").tolist() == [False, True, True, True]
    assert hvd.allreduce(t, op=hvd.Max, name="b.max").tolist() == [False, True, True, True]
    want_and = [False, n == 1, True, n == 1]
    assert hvd.allreduce(t, op=hvd.Min, name="b.and").tolist() == want_and
    assert hvd.allreduce(t, op=hvd.Product, name="b.prod").tolist() == want_and


def test_bool_average_is_refused_naming_the_tensor():
    with pytest.raises(ValueError) as e:
        hvd.allreduce(torch.tensor([True]), op=hvd.Average, name="b.avg")
    assert "b.avg" in str(e.value) and "bool" in str(e.value)
