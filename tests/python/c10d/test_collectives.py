"""Every collective of torch.distributed 1.13 on the "chorus" backend, every dtype and reduce op
it takes, against results computed locally from every rank's inputs."""

import pytest
import torch
import torch.distributed as dist

from c10d_values import ALL_DTYPES, COMPLEX_DTYPES, rank, reduced, same, size, value

OPS = [dist.ReduceOp.SUM, dist.ReduceOp.AVG, dist.ReduceOp.PRODUCT, dist.ReduceOp.MIN, dist.ReduceOp.MAX,
       dist.ReduceOp.BAND, dist.ReduceOp.BOR, dist.ReduceOp.BXOR]
BITWISE = (dist.ReduceOp.BAND, dist.ReduceOp.BOR, dist.ReduceOp.BXOR)


def allowed(op, dtype):
    """What the backend takes (the rest is refused with a RuntimeError: test_errors.py)."""
    if op in BITWISE:
        return dtype == torch.bool or not (dtype.is_floating_point or dtype.is_complex)
    if op == dist.ReduceOp.AVG:
        return dtype != torch.bool
    if dtype.is_complex:
        return op == dist.ReduceOp.SUM
    return True


CASES = [(op, dt) for op in OPS for dt in ALL_DTYPES + COMPLEX_DTYPES if allowed(op, dt)]


@pytest.mark.parametrize("op,dtype", CASES, ids=[f"{op}-{dt}".replace("torch.", "") for op, dt in CASES])
def test_all_reduce_every_op_and_dtype(op, dtype):
    for shape, seed in (((5, 3), 1), ((70_000,), 2), ((), 3)):  # several chunks, a scalar
        t = value(rank(), shape, dtype, seed)
        dist.all_reduce(t, op=op)
        want = reduced(op, [value(r, shape, dtype, seed) for r in range(size())])
        assert same(t, want), (shape, t.flatten()[:8], want.flatten()[:8])


@pytest.mark.parametrize("n", [0, 1, 16_384, 300_000, 3_000_001])
def test_all_reduce_sizes_from_empty_to_several_chunks(n):
    t = value(rank(), (n,), torch.float32, n)
    dist.all_reduce(t)
    assert same(t, reduced(dist.ReduceOp.SUM, [value(r, (n,), torch.float32, n) for r in range(size())]))


def test_all_reduce_of_a_non_contiguous_tensor_writes_through_its_view():
    base = value(rank(), (6, 8), torch.float64, 4)
    view = base.t()[::2]  # strided
    assert not view.is_contiguous()
    want_view = reduced(dist.ReduceOp.SUM, [value(r, (6, 8), torch.float64, 4).t()[::2] for r in range(size())])
    untouched = base.t()[1::2].clone()
    dist.all_reduce(view)
    assert same(base.t()[::2], want_view)
    assert torch.equal(base.t()[1::2], untouched)


def test_async_work_wait_future_and_state():
    t = value(rank(), (1 << 20,), torch.float32, 5)
    work = dist.all_reduce(t, async_op=True)
    fut = work.get_future()
    assert work.wait(timeout=__import__("datetime").timedelta(seconds=30))
    # (work.exception() cannot be called from Python in torch 1.13, for any backend: its binding
    # has no converter for std::exception_ptr; wait() raises a failed work's error instead.)
    assert work.is_completed() and work.is_success()
    want = reduced(dist.ReduceOp.SUM, [value(r, (1 << 20,), torch.float32, 5) for r in range(size())])
    assert same(t, want)
    assert same(fut.wait()[0], want)
    chained = dist.all_reduce(value(rank(), (3,), torch.int64, 6), async_op=True).get_future().then(
        lambda f: f.value()[0] * 2)
    assert torch.equal(chained.wait(), 2 * reduced(dist.ReduceOp.SUM, [value(r, (3,), torch.int64, 6) for r in range(size())]))


def test_many_async_calls_in_flight_end_in_any_order_with_their_results():
    ts = [value(rank(), (1000 * (i + 1),), torch.float32, 10 + i) for i in range(12)]
    works = [dist.all_reduce(t, async_op=True) for t in ts]
    for i, w in reversed(list(enumerate(works))):
        w.wait()
        want = reduced(dist.ReduceOp.SUM, [value(r, (1000 * (i + 1),), torch.float32, 10 + i) for r in range(size())])
        assert same(ts[i], want), i


def test_all_reduce_coalesced_keeps_each_tensors_shape():
    shapes = [(3,), (2, 5), (), (7, 1, 2)]
    ts = [value(rank(), s, torch.float32, 20 + i) for i, s in enumerate(shapes)]
    dist.all_reduce_coalesced(ts, op=dist.ReduceOp.MAX)
    for i, s in enumerate(shapes):
        assert same(ts[i], reduced(dist.ReduceOp.MAX, [value(r, s, torch.float32, 20 + i) for r in range(size())]))


@pytest.mark.parametrize("dtype", ALL_DTYPES + COMPLEX_DTYPES, ids=str)
def test_broadcast_from_every_root(dtype):
    for root in range(size()):
        t = value(rank(), (4, 3), dtype, 30 + root)
        dist.broadcast(t, src=root)
        assert torch.equal(t, value(root, (4, 3), dtype, 30 + root))


def test_broadcast_of_non_contiguous_and_empty_tensors():
    base = value(rank(), (5, 6), torch.int32, 40)
    view = base[:, 1::2]
    dist.broadcast(view, src=size() - 1)
    assert torch.equal(base[:, 1::2], value(size() - 1, (5, 6), torch.int32, 40)[:, 1::2])
    assert torch.equal(base[:, ::2], value(rank(), (5, 6), torch.int32, 40)[:, ::2])
    empty = torch.empty(0, 3)
    dist.broadcast(empty, src=0)
    assert empty.shape == (0, 3)


@pytest.mark.parametrize("op", [dist.ReduceOp.SUM, dist.ReduceOp.MAX, dist.ReduceOp.PRODUCT], ids=str)
def test_reduce_to_every_root(op):
    for root in range(size()):
        t = value(rank(), (9,), torch.int64, 50 + root)
        dist.reduce(t, dst=root, op=op)
        if rank() == root:
            assert torch.equal(t, reduced(op, [value(r, (9,), torch.int64, 50 + root) for r in range(size())]))


@pytest.mark.parametrize("dtype", ALL_DTYPES + COMPLEX_DTYPES, ids=str)
def test_all_gather_and_all_gather_into_tensor(dtype):
    t = value(rank(), (2, 3), dtype, 60)
    out = [torch.zeros(2, 3, dtype=dtype) for _ in range(size())]
    dist.all_gather(out, t)
    for r in range(size()):
        assert torch.equal(out[r], value(r, (2, 3), dtype, 60))
    flat = torch.zeros(size() * 2, 3, dtype=dtype)
    dist.all_gather_into_tensor(flat, t)
    assert torch.equal(flat, torch.cat([value(r, (2, 3), dtype, 60) for r in range(size())]))


def test_all_gather_into_strided_outputs_and_coalesced():
    t = value(rank(), (4,), torch.float32, 61)
    big = torch.zeros(4, size() * 2)
    out = [big[:, 2 * r] for r in range(size())]  # strided views
    dist.all_gather(out, t)
    for r in range(size()):
        assert torch.equal(big[:, 2 * r], value(r, (4,), torch.float32, 61))
        assert torch.equal(big[:, 2 * r + 1], torch.zeros(4))
    shapes = [(3,), (2, 2), (5,), ()]  # one dtype per call (torch checks it)
    inputs = [value(rank(), s, torch.int16, 62 + j) for j, s in enumerate(shapes)]
    outputs = [[torch.zeros_like(x) for x in inputs] for _ in range(size())]
    dist.all_gather_coalesced(outputs, inputs)
    for r in range(size()):
        for j, s in enumerate(shapes):
            assert torch.equal(outputs[r][j], value(r, s, torch.int16, 62 + j))


def test_object_collectives():
    objs = [None] * size()
    dist.all_gather_object(objs, {"rank": rank(), "text": "x" * rank()})
    assert objs == [{"rank": r, "text": "x" * r} for r in range(size())]
    lst = [rank(), "from", rank()] if rank() == 0 else [None, None, None]
    dist.broadcast_object_list(lst, src=0)
    assert lst == [0, "from", 0]
    got = [None] * size() if rank() == 0 else None
    dist.gather_object(("g", rank()), got, dst=0)
    if rank() == 0:
        assert got == [("g", r) for r in range(size())]
    out = [None]
    dist.scatter_object_list(out, [("s", r) for r in range(size())] if rank() == size() - 1 else None,
                             src=size() - 1)
    assert out == [("s", rank())]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int8, torch.bool], ids=str)
def test_gather_and_scatter_at_every_root(dtype):
    for root in range(size()):
        t = value(rank(), (3, 2), dtype, 70 + root)
        out = [torch.zeros(3, 2, dtype=dtype) for _ in range(size())] if rank() == root else None
        dist.gather(t, out, dst=root)
        if rank() == root:
            for r in range(size()):
                assert torch.equal(out[r], value(r, (3, 2), dtype, 70 + root))
        y = torch.zeros(3, 2, dtype=dtype)
        pieces = [value(100 + r, (3, 2), dtype, 80 + root) for r in range(size())] if rank() == root else None
        dist.scatter(y, pieces, src=root)
        assert torch.equal(y, value(100 + rank(), (3, 2), dtype, 80 + root))


@pytest.mark.parametrize("op", [dist.ReduceOp.SUM, dist.ReduceOp.AVG, dist.ReduceOp.MIN, dist.ReduceOp.BXOR], ids=str)
def test_reduce_scatter_list_and_tensor(op):
    dtype = torch.int32
    inputs = [value(rank(), (4, 2), dtype, 90 + q) for q in range(size())]
    out = torch.zeros(4, 2, dtype=dtype)
    dist.reduce_scatter(out, inputs, op=op)
    assert torch.equal(out, reduced(op, [value(r, (4, 2), dtype, 90 + rank()) for r in range(size())]))
    flat_in = torch.cat([value(rank(), (5,), dtype, 95 + q) for q in range(size())])
    flat_out = torch.zeros(5, dtype=dtype)
    dist.reduce_scatter_tensor(flat_out, flat_in, op=op)
    assert torch.equal(flat_out, reduced(op, [value(r, (5,), dtype, 95 + rank()) for r in range(size())]))


def test_reduce_scatter_of_floats_averages():
    inputs = [value(rank(), (3,), torch.float32, 97 + q) for q in range(size())]
    out = torch.zeros(3)
    dist.reduce_scatter(out, inputs, op=dist.ReduceOp.AVG)
    assert same(out, reduced(dist.ReduceOp.AVG, [value(r, (3,), torch.float32, 97 + rank()) for r in range(size())]))


def test_all_to_all_single_equal_and_uneven_splits():
    n = size()
    t = torch.arange(n * 2 * 3, dtype=torch.float32).reshape(n * 2, 3) + 1000 * rank()
    out = torch.zeros_like(t)
    dist.all_to_all_single(out, t)
    want = torch.cat([(torch.arange(n * 2 * 3, dtype=torch.float32).reshape(n * 2, 3) + 1000 * r)[2 * rank():2 * rank() + 2]
                      for r in range(n)])
    assert torch.equal(out, want)
    # Rank r sends r + q + 1 rows to rank q.
    send = [rank() + q + 1 for q in range(n)]
    recv = [r + rank() + 1 for r in range(n)]
    src = torch.cat([torch.full((send[q], 2), float(100 * rank() + q)) for q in range(n)])
    dst = torch.zeros(sum(recv), 2)
    dist.all_to_all_single(dst, src, output_split_sizes=recv, input_split_sizes=send)
    assert torch.equal(dst, torch.cat([torch.full((recv[r], 2), float(100 * r + rank())) for r in range(n)]))


def test_all_to_all_lists_of_uneven_tensors():
    n = size()
    inputs = [torch.full((rank() + q + 1,), rank() * 10 + q, dtype=torch.int64) for q in range(n)]
    outputs = [torch.zeros(r + rank() + 1, dtype=torch.int64) for r in range(n)]
    dist.all_to_all(outputs, inputs)
    for r in range(n):
        assert torch.equal(outputs[r], torch.full((r + rank() + 1,), r * 10 + rank(), dtype=torch.int64))


def test_barrier_and_its_async_form():
    dist.barrier()
    w = dist.barrier(async_op=True)
    w.wait()
    assert w.is_completed()


def test_barrier_ends_after_every_earlier_call():
    t = value(rank(), (4 << 20,), torch.float32, 98)
    w = dist.all_reduce(t, async_op=True)
    b = dist.barrier(async_op=True)
    b.wait()
    assert w.is_completed()


def test_several_tensors_per_call_reduce_and_broadcast_as_gloo():
    """The multi-device forms (a list per call): allreduce reduces every tensor of every rank and
    gives each the result; broadcast copies the root's chosen tensor into every tensor."""
    pg = dist.distributed_c10d._get_default_group()
    ts = [value(rank(), (6,), torch.int64, 300 + k) for k in range(3)]
    pg.allreduce(ts).wait()
    want = reduced(dist.ReduceOp.SUM, [value(r, (6,), torch.int64, 300 + k) for r in range(size()) for k in range(3)])
    for t in ts:
        assert torch.equal(t, want)
    opts = dist.BroadcastOptions()
    opts.rootRank, opts.rootTensor = size() - 1, 1
    bs = [value(rank(), (4,), torch.float32, 310 + k) for k in range(2)]
    pg.broadcast(bs, opts).wait()
    for b in bs:
        assert torch.equal(b, value(size() - 1, (4,), torch.float32, 311))
