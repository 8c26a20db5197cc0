"""DistributedDataParallel and ZeroRedundancyOptimizer over the "chorus" backend train to the same
parameters as over Gloo (a gloo group of the same job, same model, same data), with DDP's
options, no_sync, uneven inputs under join(), and its built-in comm hooks; the bf16 hook, which
Gloo refuses, against a local computation."""

import pytest
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP

from c10d_values import rank, size

torch.use_deterministic_algorithms(True)


@pytest.fixture(scope="module")
def gloo():
    g = dist.new_group(backend="gloo")
    yield g
    dist.destroy_process_group(g)


class Net(nn.Module):
    """Big enough for several buckets at a small bucket_cap_mb; `skip` leaves a layer unused."""

    def __init__(self, batch_norm=False):
        super().__init__()
        self.a = nn.Linear(32, 64)
        self.bn = nn.BatchNorm1d(64) if batch_norm else nn.Identity()
        self.b = nn.Linear(64, 64)
        self.unused = nn.Linear(64, 64)
        self.c = nn.Linear(64, 8)

    def forward(self, x, skip=False):
        h = torch.relu(self.bn(self.a(x)))
        h = torch.relu(self.b(h)) if skip else torch.relu(self.unused(torch.relu(self.b(h))))
        return self.c(h)


def batch(r, step, n=16):
    g = torch.Generator().manual_seed(1000 * step + r)
    return torch.randn(n, 32, generator=g), torch.randn(n, 8, generator=g)


def train(group, steps=4, hook=None, hook_state=None, batch_norm=False, accumulate=1, uneven=0, zero=False,
          optimizer=torch.optim.SGD, **ddp_options):
    torch.manual_seed(0)
    model = Net(batch_norm)
    if batch_norm:  # rank-dependent buffers: broadcast_buffers makes them rank 0's
        model.bn.running_mean.fill_(float(rank()))
    ddp = DDP(model, process_group=group, bucket_cap_mb=0.01, **ddp_options)
    if hook is not None:
        ddp.register_comm_hook(hook_state(group) if hook_state else group, hook)
    kwargs = {"lr": 0.05} if optimizer is torch.optim.SGD else {"lr": 1e-3}
    if zero:
        opt = ZeroRedundancyOptimizer(ddp.parameters(), optimizer_class=optimizer, process_group=group, **kwargs)
    else:
        opt = optimizer(ddp.parameters(), **kwargs)
    my_steps = steps + (rank() * uneven)
    with ddp.join() if uneven else _nothing():
        for step in range(my_steps):
            for micro in range(accumulate):
                x, y = batch(rank(), step * accumulate + micro)
                last = micro == accumulate - 1
                with ddp.no_sync() if not last else _nothing():
                    # Every parameter is used, except with find_unused_parameters every other step.
                    skip = ddp_options.get("find_unused_parameters", False) and step % 2 == 0
                    loss = ((ddp(x, skip=skip) - y) ** 2).mean()
                    loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=False)
    params = [p.detach().clone() for p in model.parameters()]
    buffers = [b.detach().clone() for b in model.buffers()]
    return params, buffers


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def assert_same(a, b, tol=1e-5):
    for x, y in zip(a[0] + a[1], b[0] + b[1]):
        assert torch.allclose(x.double(), y.double(), rtol=tol, atol=tol), (x.flatten()[:4], y.flatten()[:4])


CASES = {
    "plain": {},
    "find_unused_parameters": {"find_unused_parameters": True},
    "broadcast_buffers": {"batch_norm": True, "broadcast_buffers": True},
    "gradient_as_bucket_view": {"gradient_as_bucket_view": True},
    "static_graph": {"static_graph": True},
    "no_sync": {"accumulate": 2},
    "uneven_inputs_join": {"uneven": 2},
    "fp16_compress_hook": {"hook": default_hooks.fp16_compress_hook},
    "powerSGD_hook": {"hook": powerSGD_hook.powerSGD_hook,
                      "hook_state": lambda g: powerSGD_hook.PowerSGDState(process_group=g, matrix_approximation_rank=1,
                                                                         start_powerSGD_iter=2, random_seed=0)},
    "adam": {"optimizer": torch.optim.Adam},
}


@pytest.mark.parametrize("case", list(CASES))
def test_ddp_trains_as_over_gloo(case, gloo):
    options = CASES[case]
    over_chorus = train(None, **options)
    over_gloo = train(gloo, **options)
    assert_same(over_chorus, over_gloo)


@pytest.mark.parametrize("optimizer", [torch.optim.SGD, torch.optim.Adam], ids=["sgd", "adam"])
def test_zero_redundancy_optimizer_as_over_gloo(optimizer, gloo):
    assert_same(train(None, zero=True, optimizer=optimizer), train(gloo, zero=True, optimizer=optimizer))


def bf16_hook(state, bucket):
    """DDP's bf16_compress_hook under another name: torch 1.13's register_comm_hook refuses that
    name without CUDA 11 and NCCL, though the hook itself runs on any backend."""
    return default_hooks.bf16_compress_hook(state, bucket)


def test_bf16_compress_hook_against_a_local_computation():
    """One step with DDP's bf16 hook: every rank's gradient computed here, each cast to bf16 after
    the division by the world size, summed in bf16, as the hook asks the backend to."""
    params, _ = train(None, steps=1, hook=bf16_hook)
    torch.manual_seed(0)
    reference = Net()
    grads = []
    for r in range(size()):
        m = Net()
        m.load_state_dict(reference.state_dict())
        x, y = batch(r, 0)
        ((m(x, skip=False) - y) ** 2).mean().backward()
        grads.append([p.grad.clone() for p in m.parameters()])
    for i, p in enumerate(reference.parameters()):
        total = grads[0][i].to(torch.bfloat16) / size()
        for r in range(1, size()):
            total = total + grads[r][i].to(torch.bfloat16) / size()
        want = p.detach() - 0.05 * total.float()
        assert torch.allclose(params[i], want, rtol=1e-2, atol=1e-3), (params[i].flatten()[:4], want.flatten()[:4])
