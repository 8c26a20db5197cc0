"""reducescatter, grouped_reducescatter and alltoall (skipped in builds whose runtime lacks
them): every dtype, sum and average, uneven splits, autograd, and an error case each."""

import pytest
import torch

import chorus.torch as hvd
from chorus.common.exceptions import ChorusArgumentError
from conftest import DTYPES, close

def rows_of(dim0, n, r):
    return dim0 // n + (1 if r < dim0 % n else 0)


def start_of(dim0, n, r):
    return sum(rows_of(dim0, n, q) for q in range(r))


def rank_tensor(r, dtype, shape):
    base = torch.arange(int(torch.tensor(shape).prod())).reshape(shape) % 5
    return (base + r).to(dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_reducescatter_every_dtype_sum_and_average(dtype):
    n, r = hvd.size(), hvd.rank()
    shape = (2 * n + 1, 3)  # uneven: the first rank gets one more row
    total = sum(rank_tensor(q, torch.float64, shape) for q in range(n))
    mine = slice(start_of(shape[0], n, r), start_of(shape[0], n, r) + rows_of(shape[0], n, r))
    t = rank_tensor(r, dtype, shape)
    before = t.clone()
    out = hvd.reducescatter(t, op=hvd.Sum, name="rs.sum.%s" % dtype)
    assert out.dtype == dtype and out.shape == (rows_of(shape[0], n, r), 3)
    assert close(out, total[mine], dtype) and torch.equal(t, before)
    want = total[mine] / n if dtype.is_floating_point else torch.div(total[mine], n, rounding_mode="trunc")
    assert close(hvd.reducescatter(t, name="rs.avg.%s" % dtype), want, dtype)  # op=Average by default
    out = hvd.synchronize(hvd.reducescatter_async(t, op=hvd.Sum, name="rs.async.%s" % dtype))
    assert close(out, total[mine], dtype)


def test_reducescatter_scale_factors_grouped_and_autograd():
    n, r = hvd.size(), hvd.rank()
    t = rank_tensor(r, torch.float32, (n, 4))
    total = sum(rank_tensor(q, torch.float32, (n, 4)) for q in range(n))
    out = hvd.reducescatter(t, op=hvd.Sum, prescale_factor=2.0, postscale_factor=0.25)
    assert torch.allclose(out, total[r:r + 1] * 0.5)
    outs = hvd.grouped_reducescatter([t, t * 2], op=hvd.Sum, name="rs.group")
    assert torch.allclose(outs[0], total[r:r + 1]) and torch.allclose(outs[1], 2 * total[r:r + 1])
    x = torch.ones(n, 2, requires_grad=True)
    hvd.reducescatter(x, op=hvd.Sum).sum().backward()
    assert torch.allclose(x.grad, torch.full((n, 2), float(n)))  # Horovod: summed over the ranks


@pytest.mark.parametrize("grouped", [False, True], ids=["single", "grouped"])
def test_reducescatter_gradient_is_horovods(grouped):
    # Horovod's convention (as allreduce's): the gathered gradient times the set's size for
    # Sum, as is for Average.
    n = hvd.size()
    for op, factor in ((hvd.Sum, n), (hvd.Average, 1)):
        xs = [torch.ones(2 * n, 3, requires_grad=True) for _ in range(2)]
        outs = hvd.grouped_reducescatter(xs, op=op) if grouped else [hvd.reducescatter(x, op=op) for x in xs]
        for o in outs:
            o.backward(torch.ones_like(o))
        for x in xs:
            assert torch.equal(x.grad, torch.full((2 * n, 3), float(factor))), (op, x.grad)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_alltoall_every_dtype_equal_and_uneven_splits(dtype):
    n, r = hvd.size(), hvd.rank()
    # Equal splits: rank r sends row block i (value 10*r + i) to rank i.
    t = torch.cat([torch.full((2, 3), 10 * r + i, dtype=torch.float64) for i in range(n)]).to(dtype)
    out = hvd.alltoall(t, name="a2a.eq.%s" % dtype)
    want = torch.cat([torch.full((2, 3), 10 * q + r, dtype=torch.float64) for q in range(n)])
    assert out.dtype == dtype and close(out, want, dtype)
    # Uneven splits: rank r sends i + 1 rows to rank i; rank r receives r + 1 rows from each.
    splits = [i + 1 for i in range(n)]
    t = torch.cat([torch.full((i + 1, 2), 10 * r + i, dtype=torch.float64) for i in range(n)]).to(dtype)
    out, received = hvd.alltoall(t, splits=torch.tensor(splits, dtype=torch.int32), name="a2a.uneven.%s" % dtype)
    assert received.tolist() == [r + 1] * n and received.dtype == torch.int32
    want = torch.cat([torch.full((r + 1, 2), 10 * q + r, dtype=torch.float64) for q in range(n)])
    assert close(out, want, dtype)
    out, received = hvd.synchronize(hvd.alltoall_async(t, splits=splits))
    assert close(out, want, dtype)


def test_alltoall_autograd():
    n = hvd.size()
    x = torch.ones(2 * n, 3, requires_grad=True)
    (hvd.alltoall(x) * 3).sum().backward()
    assert torch.allclose(x.grad, torch.full((2 * n, 3), 3.0))


def test_errors():
    n, r = hvd.size(), hvd.rank()
    with pytest.raises(ChorusArgumentError, match="rs_bad"):
        hvd.reducescatter(torch.ones(n, 2 + r), name="rs_bad")
    with pytest.raises(ValueError, match="divisible"):
        hvd.alltoall(torch.ones(n + 1, 2))
    with pytest.raises(ValueError):
        hvd.alltoall(torch.ones(n, 2), splits=[n + 5] * n)  # more rows than the tensor has
    with pytest.raises(ValueError, match="integer tensor"):  # Horovod's splits_type_error
        hvd.alltoall(torch.ones(n, 2), splits=torch.full((n,), 1e30))
    with pytest.raises(ValueError, match="integers"):
        hvd.alltoall(torch.ones(n, 2), splits=[1.5] * n)
    with pytest.raises(ValueError, match="not supported"):
        hvd.reducescatter(torch.ones(n, dtype=torch.complex64))
    assert torch.equal(hvd.allreduce(torch.ones(2), op=hvd.Sum, name="scatter_still_works"),
                       torch.full((2,), float(n)))


def test_join_with_uneven_batches():
    # Rank r has r + 1 batches; a joined rank adds zeros, so batch k sums the ranks with more
    # than k batches; the rank with the most batches joins last.
    n, r = hvd.size(), hvd.rank()
    for k in range(r + 1):
        out = hvd.allreduce(torch.ones(3), op=hvd.Sum, name="join.batch.%d" % k)
        assert torch.equal(out, torch.full((3,), float(n - k)))
    assert hvd.join() == n - 1  # the ranks issued different numbers of operations
    assert torch.equal(hvd.allreduce(torch.ones(2), op=hvd.Sum, name="after_join"), torch.full((2,), float(n)))
    # join lined the handle counters up again: unnamed operations still meet.
    assert torch.equal(hvd.allreduce(torch.ones(2), op=hvd.Sum), torch.full((2,), float(n)))


def test_join_refuses_what_a_joined_rank_cannot_take_part_in():
    # Rank 0 joins at once; the others find allgather, alltoall and broadcast (from any root)
    # refused with an error naming the tensor and rank 0, as Horovod does, while allreduce
    # works (rank 0 adds zeros to the sum).
    n, r = hvd.size(), hvd.rank()
    if r == 0:
        assert hvd.join() >= 0
        return
    with pytest.raises(ChorusArgumentError, match=r"allgather\('[a-z.]*join\.gather'\).*rank 0 has joined"):
        hvd.allgather(torch.ones(2, 3), name="join.gather")
    with pytest.raises(ChorusArgumentError, match=r"alltoall\('[a-z.]*join\.a2a'\).*rank 0 has joined"):
        hvd.alltoall(torch.ones(n, 2), name="join.a2a")
    with pytest.raises(ChorusArgumentError, match=r"broadcast\('[a-z.]*join\.bcast'\).*root rank 0 has joined"):
        hvd.broadcast(torch.ones(3), root_rank=0, name="join.bcast")
    assert torch.equal(hvd.allreduce(torch.ones(2), op=hvd.Sum, name="join.sum"), torch.full((2,), float(n - 1)))
    with pytest.raises(RuntimeError, match=r"broadcast\('[a-z.]*join\.bcast1'\).*rank 0 has joined"):
        hvd.broadcast(torch.full((3,), float(r)), root_rank=1, name="join.bcast1")
    hvd.join()
