"""Priority in chorus.torch: DistributedOptimizer sends every gradient with a priority that puts
the first layers first (registration order until a step's backward order is agreed, then that
order), the same on every rank, and the training result is that of one process."""

import torch

import chorus.torch as hvd
import chorus.torch.optimizer as optimizer_module


class _Recording:
    """The extension module, recording the priority each allreduce is submitted with."""

    def __init__(self, lib):
        self._lib = lib
        self.seen = {}     # operation name -> priorities, in submission order
        self.in_order = []  # (operation name, priority), in submission order

    def _note(self, name, priority):
        self.seen.setdefault(name, []).append(priority)
        self.in_order.append((name, priority))

    def allreduce_async(self, tensor, name, op, **kw):
        self._note(name, kw.get("priority", 0))
        return self._lib.allreduce_async(tensor, name, op, **kw)

    def allreduce_async_all(self, tensors, names, op, **kw):
        for name, p in zip(names, kw.get("priorities") or [0] * len(names)):
            self._note(name, p)
        return self._lib.allreduce_async_all(tensors, names, op, **kw)

    def __getattr__(self, attr):
        return getattr(self._lib, attr)


def _model():
    torch.manual_seed(5)
    return torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 8), torch.nn.Tanh(),
                               torch.nn.Linear(8, 3))


def _train(model, opt, steps):
    g = torch.Generator().manual_seed(9)
    for _ in range(steps):
        x, y = torch.randn(6, 6, generator=g), torch.randint(0, 3, (6,), generator=g)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()


def test_first_layers_go_first_alike_on_every_rank_and_the_result_is_exact(monkeypatch):
    recording = _Recording(optimizer_module._lib)
    monkeypatch.setattr(optimizer_module, "_lib", recording)
    model = _model()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9),
                                   named_parameters=[("prio." + n, p) for n, p in model.named_parameters()])
    assert opt.set_bucket_bytes(0) == 0  # every gradient alone: one priority each
    _train(model, opt, 3)
    last = {name: ps[-1] for name, ps in recording.seen.items()}
    names = ["allreduce." + opt._parameter_names[p] for p in model.parameters()]
    assert set(names) <= set(last), sorted(last)
    order = [last[n] for n in names]
    # Registration order is forward order here: the first layer's gradients have the largest.
    assert order == sorted(order, reverse=True) and len(set(order)) == len(order), order
    # Every rank submitted the same priorities (a difference would be a mismatch error).
    mine = torch.tensor(order, dtype=torch.int64)
    everyone = hvd.allgather(mine.unsqueeze(0), name="prio.check")
    assert all(torch.equal(row, mine) for row in everyone), everyone
    # All ranks trained on the same data: the result equals one process' training.
    ref = _model()
    _train(ref, torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9), 3)
    for p, q in zip(model.parameters(), ref.parameters()):
        assert torch.allclose(p, q, atol=1e-6), (p, q)


def test_a_bucket_takes_its_largest_members_priority(monkeypatch):
    recording = _Recording(optimizer_module._lib)
    monkeypatch.setattr(optimizer_module, "_lib", recording)
    model = _model()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=[("bprio." + n, p) for n, p in model.named_parameters()])
    _train(model, opt, 3)  # the default bucket size holds every gradient of this model: one bucket a step
    buckets = [(n, p) for n, p in recording.in_order if ".bucket" in n]
    assert len(buckets) == 3, recording.in_order
    count = len(list(model.parameters()))
    # Before and after the backward order is agreed, the largest member priority is the count.
    assert [p for _, p in buckets] == [count] * 3, buckets
