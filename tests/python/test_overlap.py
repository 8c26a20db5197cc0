"""DistributedOptimizer(overlap=True): step() returns before every gradient is reduced, each
bucket's parameters are updated when the next forward pass needs them, and the parameters are
those of the synchronous step bit for bit (SGD with momentum and weight decay, Adam, AdamW; with
buckets and without; an LR scheduler between steps; tied and unused parameters). What needs
every gradient at once is refused with a clear error."""

import pytest
import torch

import chorus.torch as hvd

STEPS = 4


class _Net(torch.nn.Module):
    """Tied weights (embedding and output share one Parameter) and a layer forward never uses."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(7)
        self.embed = torch.nn.Embedding(20, 8)
        self.hidden = torch.nn.Linear(8, 8)
        self.unused = torch.nn.Linear(8, 8)
        self.out = torch.nn.Linear(8, 20, bias=False)
        self.out.weight = self.embed.weight

    def forward(self, x):
        return self.out(torch.tanh(self.hidden(self.embed(x).mean(dim=1))))


def _data(step):
    g = torch.Generator().manual_seed(100 * step + hvd.rank())  # each rank its own shard
    return torch.randint(0, 20, (6, 5), generator=g), torch.randint(0, 20, (6,), generator=g)


def _train(make_opt, overlap, buckets, tag):
    model = _Net()
    opt = hvd.DistributedOptimizer(make_opt(model.parameters()), overlap=overlap,
                                   named_parameters=[("%s.%s" % (tag, n), p) for n, p in model.named_parameters()])
    if not buckets:
        opt.set_bucket_bytes(0)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    for step in range(STEPS):
        x, y = _data(step)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        sched.step()  # changes the LR before overlapped updates are applied: they keep this step's
    return {k: v.clone() for k, v in model.state_dict().items()}  # finishes what is pending


OPTIMIZERS = {
    "sgd": lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=1e-3),
    "adam": lambda ps: torch.optim.Adam(ps, lr=0.01, weight_decay=1e-3),
    "adamw": lambda ps: torch.optim.AdamW(ps, lr=0.01, weight_decay=1e-2),
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
@pytest.mark.parametrize("buckets", [True, False])
def test_overlapped_steps_give_the_synchronous_parameters_bit_for_bit(name, buckets):
    tag = "ov.%s.%d" % (name, buckets)
    synchronous = _train(OPTIMIZERS[name], False, buckets, tag + ".sync")
    overlapped = _train(OPTIMIZERS[name], True, buckets, tag + ".over")
    assert synchronous.keys() == overlapped.keys()
    for k in synchronous:
        assert torch.equal(synchronous[k], overlapped[k]), (k, (synchronous[k] - overlapped[k]).abs().max())
    start = _Net().state_dict()
    assert not torch.equal(start["hidden.weight"], overlapped["hidden.weight"])  # it did train


def test_step_returns_with_updates_pending_and_the_next_forward_applies_them():
    model = _Net()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), overlap=True,
                                   named_parameters=[("ov.pending." + n, p) for n, p in model.named_parameters()])
    for step in range(3):
        x, y = _data(step)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    assert opt._pending, "step() waited for every update"
    before = model.hidden.weight.detach().clone()
    model.hidden(torch.zeros(1, 8))  # the module's forward applies its own parameters' update
    assert not torch.equal(before, model.hidden.weight.detach())
    assert model.hidden.weight not in opt._pending_key
    opt.state_dict()  # the optimizer's state: every update applied first
    assert not opt._pending


def test_a_failed_update_raises_in_forward_and_drops_the_other_pending_ones():
    """One pending operation fails (here: its wait raises after the real one ended): the forward
    that needs it raises that error, every other pending operation is waited for and dropped
    without its update, and training goes on from the next backward."""
    model = _Net()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), overlap=True,
                                   named_parameters=[("ov.fail." + n, p) for n, p in model.named_parameters()])
    opt.set_bucket_bytes(0)  # one pending operation per parameter
    for step in range(3):  # the first steps learn the backward order and synchronise
        x, y = _data(step)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    assert len(opt._pending) >= 2, "the test needs two pending updates"
    failing = opt._pending_key[model.hidden.weight]
    handle, ctx = opt._pending[failing]

    def broken():
        (handle if callable(handle) else (lambda: hvd.synchronize(handle)))()
        raise RuntimeError("ov.fail: the peer went away")
    opt._pending[failing] = (broken, ctx)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    with pytest.raises(RuntimeError, match="the peer went away"):
        model.hidden(torch.zeros(1, 8))
    assert not opt._pending and not opt._pending_key
    for n, p in model.named_parameters():
        assert torch.equal(before[n], p.detach()), n + " was updated after the failure"
    for step in range(3, 5):  # the next steps run as usual
        x, y = _data(step)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    opt.synchronize()
    assert not torch.equal(before["hidden.weight"], model.hidden.weight.detach())


def test_what_needs_every_gradient_at_once_is_refused():
    model = _Net()
    with pytest.raises(ValueError, match="per-parameter optimizers"):
        hvd.DistributedOptimizer(torch.optim.LBFGS(model.parameters()), overlap=True)
    with pytest.raises(ValueError, match="groups"):
        hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), overlap=True, num_groups=2)
    with pytest.raises(ValueError, match="backward_passes_per_step"):
        hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), overlap=True,
                                 backward_passes_per_step=2)
    with pytest.raises(ValueError, match="nan_check"):
        hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), overlap=True, nan_check="skip")
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), overlap=True,
                                   named_parameters=[("ov.closure." + n, p) for n, p in model.named_parameters()])
    x, y = _data(0)
    torch.nn.functional.cross_entropy(model(x), y).backward()
    with pytest.raises(ValueError, match="closure"):
        opt.step(lambda: 0.0)
    opt.synchronize()  # what backward submitted ends before the next test


def test_synchronize_keeps_its_meaning_with_overlap():
    """synchronize(), then step() in skip_synchronize(): the update is applied at once (Horovod's
    recipe for clipping the averaged gradients)."""
    model = _Net()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), overlap=True,
                                   named_parameters=[("ov.sync." + n, p) for n, p in model.named_parameters()])
    x, y = _data(0)
    torch.nn.functional.cross_entropy(model(x), y).backward()
    opt.synchronize()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
    before = model.hidden.weight.detach().clone()
    with opt.skip_synchronize():
        opt.step()
    assert not opt._pending
    assert not torch.equal(before, model.hidden.weight.detach())
