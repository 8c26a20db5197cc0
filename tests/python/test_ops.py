"""Every collective of chorus.torch on every dtype: sum and average (and min, max, product),
in place and out of place, sync and async (poll/synchronize), grouped, autograd."""

import time

import pytest
import torch

import chorus.torch as hvd
from conftest import DTYPES, FLOAT_DTYPES, close


def rank_tensor(r, dtype, shape=(3, 4)):
    """Small non-negative values (exact in every dtype, and their sums fit in uint8)."""
    base = torch.arange(int(torch.tensor(shape).prod())).reshape(shape) % 5
    return (base + r).to(dtype)


def expected_sum(dtype, shape=(3, 4)):
    return sum(rank_tensor(r, torch.float64, shape) for r in range(hvd.size()))


def expected(op, dtype, shape=(3, 4)):
    n = hvd.size()
    if op == hvd.Sum:
        return expected_sum(dtype, shape)
    if op == hvd.Average:
        s = expected_sum(dtype, shape)
        return torch.div(s, n, rounding_mode="trunc") if not dtype.is_floating_point else s / n
    stack = torch.stack([rank_tensor(r, torch.float64, shape) for r in range(n)])
    if op == hvd.Min:
        return stack.min(0).values
    if op == hvd.Max:
        return stack.max(0).values
    return stack.prod(0)


def test_queries():
    assert hvd.is_initialized()
    assert 0 <= hvd.rank() < hvd.size()
    assert 0 <= hvd.local_rank() < hvd.local_size()
    assert hvd.local_size() == hvd.size()  # chorusrun starts every rank on this host
    assert hvd.cross_size() == 1 and hvd.cross_rank() == 0 and hvd.is_homogeneous()
    for query in (hvd.mpi_built, hvd.mpi_enabled, hvd.gloo_built, hvd.gloo_enabled, hvd.nccl_built,
                  hvd.ccl_built, hvd.cuda_built, hvd.rocm_built):
        assert query() is False
    assert hvd.global_process_set.size() == hvd.size()
    assert hvd.global_process_set.rank() == hvd.rank()
    assert hvd.global_process_set.included()


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_allreduce_every_dtype_sum_and_average(dtype):
    r = hvd.rank()
    for op in (hvd.Sum, hvd.Average):
        want = expected(op, dtype)
        t = rank_tensor(r, dtype)
        before = t.clone()
        out = hvd.allreduce(t, op=op, name="out.%s.%s" % (op, dtype))
        assert out.dtype == dtype and out.shape == t.shape
        assert close(out, want, dtype), (op, out, want)
        assert torch.equal(t, before), "allreduce must not modify its input"

        t = rank_tensor(r, dtype)
        ptr = t.data_ptr()
        res = hvd.allreduce_(t, op=op, name="inplace.%s.%s" % (op, dtype))
        assert res is t and t.data_ptr() == ptr
        assert close(t, want, dtype)

        h = hvd.allreduce_async(rank_tensor(r, dtype), op=op, name="async.%s.%s" % (op, dtype))
        assert close(hvd.synchronize(h), want, dtype)

        t = rank_tensor(r, dtype)
        h = hvd.allreduce_async_(t, op=op, name="async_.%s.%s" % (op, dtype))
        deadline = time.monotonic() + 30
        while not hvd.poll(h):
            assert time.monotonic() < deadline, "allreduce never completed"
            time.sleep(0.001)
        assert hvd.synchronize(h) is t
        assert close(t, want, dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.float16], ids=str)
def test_allreduce_min_max_product(dtype):
    for op in (hvd.Min, hvd.Max, hvd.Product):
        out = hvd.allreduce(rank_tensor(hvd.rank(), dtype), op=op)
        assert close(out, expected(op, dtype), dtype), (op, out)


def test_allreduce_average_is_the_default_and_average_flag():
    t = rank_tensor(hvd.rank(), torch.float32)
    assert close(hvd.allreduce(t), expected(hvd.Average, torch.float32), torch.float32)
    with pytest.warns(DeprecationWarning):
        assert close(hvd.allreduce(t, average=False), expected_sum(torch.float32), torch.float32)
    with pytest.raises(ValueError):
        hvd.allreduce(t, average=True, op=hvd.Sum)


def test_allreduce_prescale_postscale():
    t = rank_tensor(hvd.rank(), torch.float32)
    out = hvd.allreduce(t, op=hvd.Sum, prescale_factor=3.0, postscale_factor=0.5)
    assert close(out, expected_sum(torch.float32) * 1.5, torch.float32)
    out = hvd.allreduce(t, op=hvd.Average, prescale_factor=2.0)
    assert close(out, expected(hvd.Average, torch.float32) * 2, torch.float32)
    ti = rank_tensor(hvd.rank(), torch.int64)
    out = hvd.allreduce(ti, op=hvd.Sum, postscale_factor=2.0)
    assert torch.equal(out, (expected_sum(torch.int64) * 2).long())


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_prescale_of_half_types_is_float32_math(dtype):
    # Horovod scales float16 (and bfloat16) in float32: the factor rounded to float32, one
    # rounding to the tensor's type. Every rank holds the same values, so the sum is n times
    # the scaled tensor exactly (small integers times n stay exact in float16).
    factor = 0.1915194503788923
    g = torch.Generator().manual_seed(1234)
    t = torch.randint(-100, 100, (17, 17), generator=g).to(dtype)
    scaled = (t.float() * torch.tensor(factor, dtype=torch.float32)).to(dtype)
    out = hvd.allreduce(t, op=hvd.Sum, prescale_factor=factor, name="prescale.%s" % dtype)
    assert torch.equal(out, (scaled.float() * hvd.size()).to(dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bfloat16], ids=str)
def test_non_contiguous_tensors_staged(dtype):
    r = hvd.rank()
    t = rank_tensor(r, dtype, (4, 3)).t()  # a transposed view: not contiguous
    assert not t.is_contiguous()
    want = expected_sum(dtype, (4, 3)).t()
    assert close(hvd.allreduce(t, op=hvd.Sum), want, dtype)
    res = hvd.allreduce_(t, op=hvd.Sum)
    assert res is t and close(t, want, dtype)
    b = rank_tensor(r, dtype, (4, 3)).t()
    hvd.broadcast_(b, root_rank=0)
    assert close(b, rank_tensor(0, dtype, (4, 3)).t(), dtype)
    g = hvd.allgather(rank_tensor(r, dtype, (3, 4)).t())
    assert close(g, torch.cat([rank_tensor(i, dtype, (3, 4)).t() for i in range(hvd.size())]), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_allgather_every_dtype(dtype):
    n, r = hvd.size(), hvd.rank()
    mine = torch.full((r + 1, 2, 3), r, dtype=torch.float64).to(dtype)  # rows differ per rank
    want = torch.cat([torch.full((i + 1, 2, 3), i, dtype=torch.float64) for i in range(n)])
    out = hvd.allgather(mine)
    assert out.dtype == dtype and out.shape == want.shape
    assert close(out, want, dtype)
    out = hvd.synchronize(hvd.allgather_async(mine, name="ag.async.%s" % dtype))
    assert close(out, want, dtype)
    outs = hvd.grouped_allgather([mine, mine[:, 0]], name="ag.group.%s" % dtype)
    assert close(outs[0], want, dtype) and close(outs[1], want[:, 0], dtype)
    outs = hvd.synchronize(hvd.grouped_allgather_async([mine]))
    assert close(outs[0], want, dtype)


def test_allgather_gradients_are_this_ranks_rows_of_the_averaged_gradient():
    # As Horovod: allgather's gradient, and that of each tensor of grouped_allgather, is this
    # rank's rows of the upstream gradient averaged over the ranks (rows differ per rank).
    n, r = hvd.size(), hvd.rank()
    xs = [torch.full((r + 1, 3), float(r), dtype=torch.float64, requires_grad=True) for _ in range(4)]

    def upstream(k):  # rank-dependent, so that the average shows
        return torch.cat([torch.full((q + 1, 3), 100.0 * q + k + 10 * r, dtype=torch.float64) for q in range(n)])

    def want(k):
        return torch.full((r + 1, 3), 100.0 * r + k + 10 * sum(range(n)) / n, dtype=torch.float64)

    hvd.allgather(xs[0], name="ag.grad.one").backward(upstream(0))
    outs = hvd.grouped_allgather(xs[1:3], name="ag.grad.group")
    assert [o.shape[0] for o in outs] == [n * (n + 1) // 2] * 2
    torch.autograd.backward(outs, [upstream(1), upstream(2)])
    outs = hvd.grouped_allgather([xs[3]])  # unnamed
    outs[0].backward(upstream(3))
    for k, x in enumerate(xs):
        assert torch.allclose(x.grad, want(k)), (k, x.grad, want(k))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_broadcast_every_dtype_every_root(dtype):
    r = hvd.rank()
    for root in range(hvd.size()):
        want = rank_tensor(root, dtype)
        t = rank_tensor(r, dtype)
        before = t.clone()
        out = hvd.broadcast(t, root_rank=root, name="b.%d.%s" % (root, dtype))
        assert torch.equal(out, want) and torch.equal(t, before)
        t = rank_tensor(r, dtype)
        assert hvd.broadcast_(t, root) is t and torch.equal(t, want)
        assert torch.equal(hvd.synchronize(hvd.broadcast_async(rank_tensor(r, dtype), root)), want)
        t = rank_tensor(r, dtype)
        hvd.synchronize(hvd.broadcast_async_(t, root, name="b_.%d.%s" % (root, dtype)))
        assert torch.equal(t, want)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int32], ids=str)
def test_grouped_allreduce(dtype):
    r = hvd.rank()
    shapes = [(3, 4), (5,), (2, 2, 2)]
    want_sum = [expected_sum(dtype, s) for s in shapes]
    ts = [rank_tensor(r, dtype, s) for s in shapes]
    outs = hvd.grouped_allreduce(ts, op=hvd.Sum, name="grp.%s" % dtype)
    assert all(close(o, w, dtype) for o, w in zip(outs, want_sum))
    outs = hvd.synchronize(hvd.grouped_allreduce_async(ts, op=hvd.Average))
    assert all(close(o, expected(hvd.Average, dtype, s), dtype) for o, s in zip(outs, shapes))
    ts = [rank_tensor(r, dtype, s) for s in shapes]
    res = hvd.grouped_allreduce_(ts, op=hvd.Sum)
    assert all(a is b for a, b in zip(res, ts)) and all(close(t, w, dtype) for t, w in zip(ts, want_sum))
    ts = [rank_tensor(r, dtype, s) for s in shapes]
    h = hvd.grouped_allreduce_async_(ts, op=hvd.Sum, name="grp_.%s" % dtype)
    hvd.synchronize(h)
    assert all(close(t, w, dtype) for t, w in zip(ts, want_sum))


def test_autograd_through_collectives():
    n, r = hvd.size(), hvd.rank()
    x = torch.ones(4, requires_grad=True)
    (hvd.allreduce(x, op=hvd.Sum) * 2).sum().backward()
    assert torch.allclose(x.grad, torch.full((4,), 2.0 * n))

    x = torch.ones(r + 1, 2, requires_grad=True)
    y = hvd.allgather(x)
    y.sum().backward()
    assert x.grad.shape == x.shape and torch.allclose(x.grad, torch.ones_like(x))

    x = torch.ones(3, requires_grad=True)
    hvd.broadcast(x, root_rank=0).sum().backward()
    assert torch.allclose(x.grad, torch.ones(3) if r == 0 else torch.zeros(3))

    xs = [torch.ones(2, requires_grad=True), torch.ones(3, requires_grad=True)]
    sum(o.sum() for o in hvd.grouped_allreduce(xs, op=hvd.Sum)).backward()
    assert all(torch.allclose(x.grad, torch.full_like(x, float(n))) for x in xs)


@pytest.mark.parametrize("compression", [hvd.Compression.none, hvd.Compression.fp16, hvd.Compression.bf16])
def test_allreduce_compression(compression):
    t = rank_tensor(hvd.rank(), torch.float32)
    out = hvd.allreduce(t, op=hvd.Sum, compression=compression)
    assert out.dtype == torch.float32
    assert close(out, expected_sum(torch.float32), torch.float16)
    c, ctx = compression.compress(t)
    assert compression.decompress(c, ctx).dtype == torch.float32


def test_sparse_allreduce_async():
    n, r = hvd.size(), hvd.rank()
    dense = torch.zeros(n, 3)
    dense[r] = r + 1
    out = hvd.synchronize(hvd.sparse_allreduce_async(dense.to_sparse(), name="sp", op=hvd.Sum))
    want = torch.stack([torch.full((3,), float(i + 1)) for i in range(n)])
    assert torch.allclose(out.to_dense(), want)
    out = hvd.sparse_allreduce_async(dense.to_sparse(), name="sp", op=hvd.Average)()
    assert torch.allclose(out.to_dense(), want / n)


def test_handles_poll_synchronize_and_names():
    # Unknown handles: poll raises, synchronize returns None (as Horovod).
    with pytest.raises(ValueError):
        hvd.poll(10 ** 9)
    assert hvd.synchronize(10 ** 9) is None
    # Unnamed operations get deterministic names; names are reusable once an op ended.
    for _ in range(3):
        hvd.allreduce(torch.ones(2))
        hvd.allreduce(torch.ones(2), name="reused")
    # Many in flight at once, completing in any order.
    hs = [hvd.allreduce_async(torch.full((100,), float(i)), op=hvd.Sum, name="many.%d" % i) for i in range(50)]
    for i, h in reversed(list(enumerate(hs))):
        assert torch.allclose(hvd.synchronize(h), torch.full((100,), float(i * hvd.size())))


def test_large_tensor_zero_copy_in_place():
    t = torch.full((1 << 20,), float(hvd.rank() + 1))  # 4 MiB
    ptr = t.data_ptr()
    hvd.allreduce_(t, op=hvd.Sum, name="large")
    assert t.data_ptr() == ptr
    assert torch.all(t == sum(range(1, hvd.size() + 1)))


def test_barrier():
    for _ in range(3):
        hvd.barrier()
    hvd.barrier(process_set=hvd.global_process_set)


def test_not_yet_supported_raise_clearly():
    t = torch.ones(hvd.size() * 2)
    with pytest.raises(NotImplementedError, match="Adasum"):
        hvd.allreduce(t, op=hvd.Adasum)
    # Process sets (tests/python/test_process_sets*.py): without HOROVOD_DYNAMIC_PROCESS_SETS=1
    # none can be added; an unregistered one is refused; the global one is never removed.
    with pytest.raises(ValueError, match="HOROVOD_DYNAMIC_PROCESS_SETS"):
        hvd.add_process_set(hvd.ProcessSet([0]))
    with pytest.raises(ValueError, match="not registered"):
        hvd.allreduce(t, process_set=hvd.ProcessSet([0]))
    assert hvd.remove_process_set(hvd.global_process_set) is False
    # The job is unharmed: a collective still works.
    assert torch.equal(hvd.allreduce(t, op=hvd.Sum), t * hvd.size())


def test_allreduces_submitted_together():
    # The extension's batch form (DistributedOptimizer's path for gradients ready together):
    # each tensor is its own operation, reduced in place, whatever its dtype.
    from chorus import _chorus_torch as lib
    ts = [torch.full((3,), float(hvd.rank() + 1)), torch.full((2, 2), hvd.rank() + 1, dtype=torch.float64),
          torch.full((5,), hvd.rank() + 1, dtype=torch.int32)]
    ops = lib.allreduce_async_all(ts, ["together.a", "together.b", "together.c"], 0)  # 0: sum
    for op in ops:
        op.wait()
        op.result()
    total = sum(range(1, hvd.size() + 1))
    for t in ts:
        assert torch.equal(t, torch.full_like(t, total)), t
    with pytest.raises(ValueError, match="2 names for 1 tensors"):
        lib.allreduce_async_all([torch.ones(1)], ["together.x", "together.y"], 0)
