"""chorus.torch on CUDA tensors (label `gpu`): every op on the device, the ready event, the
CPU/CUDA mismatch, and a DistributedOptimizer run on CUDA parameters that matches one process
on the whole batch. Run under chorusrun with 1 rank (NCCL) and 2 ranks sharing the GPU (host
staging); every test skips where torch sees no CUDA device."""

import os

import pytest
import torch

import chorus.torch as hvd
from conftest import FLOAT_DTYPES, close

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device visible to torch")

DEV = "cuda"


def rank_values(n, dtype, r):
    """Small integers, exact in every dtype: rank r's tensor."""
    return (torch.arange(n, dtype=torch.float64) % 7 + r + 1).to(dtype)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES + [torch.int32, torch.int64, torch.uint8])
@pytest.mark.parametrize("n", [1, 1000, (4 << 20) + 3])
def test_allreduce_sum_on_device(dtype, n):
    t = rank_values(n, dtype, hvd.rank()).to(DEV)
    out = hvd.allreduce(t, op=hvd.Sum, name="cuda.sum.%s.%d" % (dtype, n))
    expected = sum(rank_values(n, torch.float64, r) for r in range(hvd.size()))
    assert out.is_cuda and out.dtype == dtype
    assert close(out.cpu(), expected, dtype)


def test_allreduce_average_in_place():
    t = rank_values(12345, torch.float32, hvd.rank()).to(DEV)
    hvd.allreduce_(t, op=hvd.Average, name="cuda.avg")
    expected = sum(rank_values(12345, torch.float64, r) for r in range(hvd.size())) / hvd.size()
    assert close(t.cpu(), expected, torch.float32)


def test_allreduce_non_contiguous():
    base = rank_values(64 * 32, torch.float32, hvd.rank()).view(64, 32).to(DEV)
    t = base.t()  # a transposed view
    out = hvd.allreduce(t, op=hvd.Sum, name="cuda.noncontig")
    expected = sum(rank_values(64 * 32, torch.float64, r) for r in range(hvd.size())).view(64, 32).t()
    assert close(out.cpu(), expected, torch.float32)


def test_waits_for_the_work_that_produces_the_tensor():
    """The tensor is written by a kernel queued behind a long sleep on a side stream: Chorus
    must read it only after that kernel ran (the ready event), not when it was submitted."""
    s = torch.cuda.Stream()
    t = torch.zeros(1 << 20, device=DEV)
    torch.cuda.synchronize()
    with torch.cuda.stream(s):
        torch.cuda._sleep(200_000_000)  # ~0.1 s of GPU cycles before the fill
        t.fill_(hvd.rank() + 1.0)
        out = hvd.allreduce(t, op=hvd.Sum, name="cuda.ready")
    expected = float(sum(r + 1 for r in range(hvd.size())))
    assert torch.all(out.cpu() == expected)


@pytest.mark.parametrize("root", [0, -1])
def test_broadcast_on_device(root):
    root = root % hvd.size()
    t = rank_values(1 << 16, torch.float32, hvd.rank()).to(DEV)
    out = hvd.broadcast(t, root_rank=root, name="cuda.bcast.%d" % root)
    assert out.is_cuda and torch.equal(out.cpu(), rank_values(1 << 16, torch.float32, root))


def test_allgather_staged_comes_back_on_device():
    rows = hvd.rank() + 1
    t = torch.full((rows, 3), float(hvd.rank()), device=DEV)
    out = hvd.allgather(t, name="cuda.gather")
    assert out.is_cuda
    expected = torch.cat([torch.full((r + 1, 3), float(r)) for r in range(hvd.size())])
    assert torch.equal(out.cpu(), expected)


def test_reducescatter_and_alltoall_staged():
    n = hvd.size()
    t = torch.arange(4 * n, dtype=torch.float32, device=DEV).view(4 * n, 1) + hvd.rank()
    part = hvd.reducescatter(t, op=hvd.Sum, name="cuda.rs")
    assert part.is_cuda
    full = sum(torch.arange(4 * n, dtype=torch.float32).view(4 * n, 1) + r for r in range(n))
    assert torch.equal(part.cpu(), full[4 * hvd.rank():4 * hvd.rank() + 4])
    rows, received = hvd.alltoall(torch.full((n, 2), float(hvd.rank()), device=DEV), splits=[1] * n,
                                  name="cuda.a2a")
    assert rows.is_cuda and received.tolist() == [1] * n
    assert torch.equal(rows.cpu(), torch.arange(n, dtype=torch.float32).repeat_interleave(2).view(n, 2))


@pytest.mark.skipif(int(os.environ.get("CHORUS_SIZE", os.environ.get("HOROVOD_SIZE", "1"))) < 2,
                    reason="a mismatch needs two ranks")
def test_cpu_on_one_rank_cuda_on_another_is_a_mismatch():
    t = torch.ones(8)
    if hvd.rank() == 0:
        t = t.to(DEV)
    with pytest.raises(ValueError) as e:
        hvd.allreduce(t, name="cuda.mixed")
    assert "device" in str(e.value) and "rank" in str(e.value)


BATCH, STEPS = 12, 5


def make_model():
    torch.manual_seed(3)
    return torch.nn.Sequential(torch.nn.Linear(10, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4)).to(DEV)


def batches():
    g = torch.Generator().manual_seed(11)
    return [(torch.randn(BATCH, 10, generator=g).to(DEV), torch.randint(0, 4, (BATCH,), generator=g).to(DEV))
            for _ in range(STEPS)]


def test_distributed_optimizer_on_cuda_matches_one_process():
    ref = make_model()
    opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    for x, y in batches():
        opt.zero_grad()
        torch.nn.functional.cross_entropy(ref(x), y).backward()
        opt.step()
    model = make_model()
    dopt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                    named_parameters=model.named_parameters())
    per = BATCH // hvd.size()
    for x, y in batches():
        dopt.zero_grad()
        xs, ys = x[hvd.rank() * per:(hvd.rank() + 1) * per], y[hvd.rank() * per:(hvd.rank() + 1) * per]
        torch.nn.functional.cross_entropy(model(xs), ys).backward()
        dopt.step()
    for a, b in zip(model.parameters(), ref.parameters()):
        assert a.is_cuda
        assert torch.allclose(a.detach().cpu(), b.detach().cpu(), rtol=1e-5, atol=1e-6)
