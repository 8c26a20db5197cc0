"""Shared helpers of the DistributedOptimizer tests (test_optimizer.py,
test_optimizer_buckets.py): a small model, its batches, the parameters one process reaches on
the whole batch and those N ranks reach on shards of it."""

import re

import torch

import chorus.torch as hvd

BATCH = 12  # divisible by 2 and 3
STEPS = 5


def make_model():
    torch.manual_seed(3)
    return torch.nn.Sequential(torch.nn.Linear(10, 16), torch.nn.Tanh(), torch.nn.Linear(16, 16),
                               torch.nn.Tanh(), torch.nn.Linear(16, 4))


def batches():
    g = torch.Generator().manual_seed(11)
    return [(torch.randn(BATCH, 10, generator=g), torch.randint(0, 4, (BATCH,), generator=g))
            for _ in range(STEPS)]


def reference_params(make_opt, lr_scale=1.0):
    model = make_model()
    opt = make_opt(model.parameters(), lr_scale)
    for x, y in batches():
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    return [p.detach() for p in model.parameters()]


def my_shard(t):
    per = BATCH // hvd.size()
    return t[hvd.rank() * per:(hvd.rank() + 1) * per]


def distributed_params(make_opt, passes=1, **kwargs):
    model = make_model()
    opt = hvd.DistributedOptimizer(make_opt(model.parameters(), 1.0), named_parameters=model.named_parameters(),
                                   backward_passes_per_step=passes, **kwargs)
    for x, y in batches():
        opt.zero_grad()
        xs, ys = my_shard(x), my_shard(y)
        for chunk in range(passes):  # micro-batches accumulated locally
            sl = slice(chunk * len(xs) // passes, (chunk + 1) * len(xs) // passes)
            torch.nn.functional.cross_entropy(model(xs[sl]), ys[sl]).backward()
        opt.step()
    return [p.detach() for p in model.parameters()]


def bucket_layout(opt, model):
    """The optimizer's buckets: (name without the optimizer's prefix, member names)."""
    names = {p: n for n, p in model.named_parameters()}
    return [(re.sub(r"^opt\d+\.", "", b.name), [names[p] for p in b.params]) for b in opt._buckets]


def sgd(params, scale):
    return torch.optim.SGD(params, lr=0.1 * scale, momentum=0.9)


def adam(params, scale):
    return torch.optim.Adam(params, lr=0.01 * scale)
