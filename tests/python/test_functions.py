"""broadcast_parameters, broadcast_optimizer_state, broadcast_object, allgather_object,
SyncBatchNorm."""

import torch

import chorus.torch as hvd


def make_model(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.BatchNorm1d(8), torch.nn.ReLU(),
                               torch.nn.Linear(8, 3))


def same_on_every_rank(tensors):
    """True when every rank holds the same values (compared through allgather_object)."""
    mine = [t.detach().clone() for t in tensors]
    return all(all(torch.equal(a, b) for a, b in zip(mine, theirs))
               for theirs in hvd.allgather_object(mine, name="same_check"))


def test_broadcast_parameters_state_dict_named_and_plain():
    model = make_model(seed=hvd.rank())
    reference = make_model(seed=0)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    for a, b in zip(model.state_dict().values(), reference.state_dict().values()):
        assert torch.equal(a, b)
    model = make_model(seed=hvd.rank() + 10)
    hvd.broadcast_parameters(list(model.named_parameters()), root_rank=hvd.size() - 1)
    assert same_on_every_rank(list(model.parameters()))
    model = make_model(seed=hvd.rank() + 20)
    hvd.broadcast_parameters(list(model.parameters()), root_rank=0)
    assert same_on_every_rank(list(model.parameters()))


def _train_one_step(model, optimizer, seed):
    torch.manual_seed(seed)
    loss = model(torch.randn(4, 6)).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()


def test_broadcast_optimizer_state_makes_optimizers_identical():
    for make_opt in (lambda p, r: torch.optim.SGD(p, lr=0.1 + r, momentum=0.9),
                     lambda p, r: torch.optim.Adam(p, lr=0.01 * (r + 1), betas=(0.9, 0.99 - 0.01 * r))):
        model = make_model(seed=0)
        opt = make_opt(model.parameters(), hvd.rank())
        _train_one_step(model, opt, seed=hvd.rank())  # state differs per rank
        hvd.broadcast_parameters(model.state_dict(), root_rank=0)
        hvd.broadcast_optimizer_state(opt, root_rank=0)
        groups = hvd.allgather_object([{k: v for k, v in g.items() if k != "params"} for g in opt.param_groups])
        assert all(g == groups[0] for g in groups)
        state = [t for s in opt.state_dict()["state"].values() for t in s.values() if torch.is_tensor(t)]
        assert state and same_on_every_rank(state)
        # Training on from there keeps the models identical.
        _train_one_step(model, opt, seed=123)
        assert same_on_every_rank(list(model.parameters()))


def test_broadcast_optimizer_state_fresh_optimizer_does_not_move_weights():
    model = make_model(seed=0)
    before = [p.detach().clone() for p in model.parameters()]
    opt = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9, weight_decay=0.1)
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))
    # As Horovod: the parameters that had no gradient keep the zeros the state was made with
    # (Horovod's test_broadcast_state_no_grad reads them).
    assert all(p.grad is not None and not p.grad.any() for p in model.parameters())


def test_broadcast_object_and_allgather_object():
    obj = {"rank": hvd.rank(), "payload": list(range(hvd.rank() * 100))}
    for root in range(hvd.size()):
        got = hvd.broadcast_object(obj, root_rank=root)
        assert got["rank"] == root and len(got["payload"]) == root * 100
    gathered = hvd.allgather_object(obj)
    assert [g["rank"] for g in gathered] == list(range(hvd.size()))
    assert [len(g["payload"]) for g in gathered] == [r * 100 for r in range(hvd.size())]
    assert hvd.broadcast_object(None, root_rank=0) is None
    for n in (1, 1000, 10, 0, 300):  # one name, objects of other sizes one after the other
        root = n % hvd.size()
        got = hvd.broadcast_object(list(range(n)) if hvd.rank() == root else "not me", root_rank=root,
                                   name="resized")
        assert got == list(range(n))


def test_sync_batch_norm_matches_batch_norm_on_the_full_batch():
    n, r = hvd.size(), hvd.rank()
    torch.manual_seed(7)
    full = torch.randn(4 * n, 5, 3) * 3 + 1
    weight, bias = torch.randn(5), torch.randn(5)
    mine = full[4 * r:4 * (r + 1)].clone().requires_grad_()

    ref = torch.nn.BatchNorm1d(5)
    sync = hvd.SyncBatchNorm(5)
    with torch.no_grad():
        for m in (ref, sync):
            m.weight.copy_(weight)
            m.bias.copy_(bias)
    full_in = full.clone().requires_grad_()
    ref_out = ref(full_in)
    out = sync(mine)
    assert torch.allclose(out, ref_out[4 * r:4 * (r + 1)], atol=1e-4)
    # Gradient of the job-wide loss sum(out * k) with respect to this rank's inputs.
    k = torch.arange(full.numel(), dtype=torch.float32).reshape(full.shape).sin()
    (ref_out * k).sum().backward()
    (out * k[4 * r:4 * (r + 1)]).sum().backward()
    assert torch.allclose(mine.grad, full_in.grad[4 * r:4 * (r + 1)], atol=1e-4)
    assert torch.allclose(sync.running_mean, ref.running_mean, atol=1e-5)
    assert torch.allclose(sync.running_var, ref.running_var, atol=1e-4)
    sync.eval()
    ref.eval()
    assert torch.allclose(sync(full), ref(full), atol=1e-4)
