"""Dynamic process sets (HOROVOD_DYNAMIC_PROCESS_SETS=1), ported in behaviour from Horovod's
dynamic process-set tests: sets added after init (collectively, every rank alike), used,
removed (their objects invalidated, their ids handed out again), duplicates refused. Run under
chorusrun with 2 and 3 ranks (tests/python/CMakeLists.txt)."""

import pytest
import torch

import chorus.torch as hvd


def test_add_use_remove():
    n, r = hvd.size(), hvd.rank()
    even = hvd.add_process_set([k for k in range(0, n, 2)])
    odd = hvd.add_process_set(hvd.ProcessSet([k for k in range(1, n, 2)]))
    assert (even.process_set_id, odd.process_set_id) == (1, 2)
    mine = even if r % 2 == 0 else odd
    out = hvd.allreduce(torch.full((4,), float(r)), op=hvd.Sum, name="dyn.x", process_set=mine)
    assert out.tolist() == [float(sum(mine.ranks))] * 4
    with pytest.raises(ValueError, match="Attempted to add a duplicate process set"):
        hvd.add_process_set(list(range(0, n, 2)))
    assert hvd.remove_process_set(even) is True
    assert even.process_set_id is None
    assert hvd.remove_process_set(even) is False  # already removed
    with pytest.raises(ValueError, match="not registered"):
        hvd.allreduce(torch.ones(1), process_set=even)
    again = hvd.add_process_set([0])
    assert again.process_set_id == 1  # the freed id, on every rank alike
    if r == 0:
        assert hvd.allreduce(torch.ones(2), op=hvd.Sum, name="dyn.y", process_set=again).tolist() == [1.0, 1.0]
    for ps in (odd, again):
        assert hvd.remove_process_set(ps) is True
    assert hvd.allreduce(torch.ones(1), op=hvd.Sum, name="dyn.after").item() == n


def test_sets_added_in_a_loop():
    # Sets come and go while the job runs; ops on the global set in between stay exact.
    n, r = hvd.size(), hvd.rank()
    ranks = [0, n - 1] if n > 2 else [1]  # at N = 2, [0, 1] is the global set (a duplicate)
    for k in range(3):
        ps = hvd.add_process_set(ranks)
        if ps.included():
            out = hvd.allreduce(torch.tensor([float(r + k)]), op=hvd.Sum, name="dyn.loop", process_set=ps)
            assert out.item() == float(sum(ranks) + k * len(ranks))
        assert hvd.allreduce(torch.ones(1), op=hvd.Sum, name="dyn.loop.global").item() == n
        assert hvd.remove_process_set(ps)


def test_every_collective_in_even_and_odd_sets_then_removed():
    # Horovod's pattern: each test adds its even/odd sets, runs, and removes them.
    n, r = hvd.size(), hvd.rank()
    even = hvd.add_process_set(list(range(0, n, 2)))
    odd = hvd.add_process_set(list(range(1, n, 2)))
    ps = even if r % 2 == 0 else odd
    root = ps.ranks[0]
    got = hvd.broadcast(torch.full((2, 2), float(r)), root_rank=root, name="dyn.bcast", process_set=ps)
    assert torch.equal(got, torch.full((2, 2), float(root)))
    gathered = hvd.allgather(torch.full((ps.rank() + 1, 1), float(r)), name="dyn.gather", process_set=ps)
    assert gathered.flatten().tolist() == [float(q) for k, q in enumerate(ps.ranks) for _ in range(k + 1)]
    avg = hvd.allreduce(torch.tensor([float(r)]), op=hvd.Average, name="dyn.avg", process_set=ps)
    assert avg.item() == sum(ps.ranks) / len(ps.ranks)
    hvd.barrier(process_set=ps)
    assert hvd.remove_process_set(odd) and hvd.remove_process_set(even)


def test_allgather_gradient_in_a_set_then_removed():
    # The gradient of an allgather (and of a grouped allgather) in a set: this rank's rows by its place in the set (not its
    # global rank); every member then reaches remove_process_set alike.
    n, r = hvd.size(), hvd.rank()
    even = hvd.add_process_set(list(range(0, n, 2)))
    odd = hvd.add_process_set(list(range(1, n, 2)))
    ps = even if r % 2 == 0 else odd
    x = torch.ones(r + 1, 2, requires_grad=True)
    out = hvd.allgather(x, name="dyn.ag.grad", process_set=ps)
    out.backward(torch.cat([torch.full((q + 1, 2), float(q)) for q in ps.ranks]))
    assert torch.equal(x.grad, torch.full((r + 1, 2), float(r)))
    ys = [torch.ones(r + 1, 2, requires_grad=True) for _ in range(2)]
    outs = hvd.grouped_allgather(ys, name="dyn.gag.grad", process_set=ps)
    torch.autograd.backward(outs, [torch.cat([torch.full((q + 1, 2), float(q + k)) for q in ps.ranks])
                                   for k in range(2)])
    assert all(torch.equal(y.grad, torch.full((r + 1, 2), float(r + k))) for k, y in enumerate(ys))
    assert hvd.remove_process_set(odd) and hvd.remove_process_set(even)


def test_optimizer_in_a_set_steps_on_every_rank():
    # DistributedOptimizer(process_set=even) built on every rank: members average among
    # themselves (their first step agrees on buckets within the set), others step alone.
    n, r = hvd.size(), hvd.rank()
    even = hvd.add_process_set(list(range(0, n, 2)))
    odd = hvd.add_process_set(list(range(1, n, 2)))
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 2))
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters(), process_set=even)
    for step in range(2):
        opt.zero_grad()
        model(torch.full((5, 4), float(r + step))).sum().backward()
        opt.step()
    w = hvd.allgather(model[1].weight.detach().clone().unsqueeze(0), name="dyn.opt.w")
    members = [w[q] for q in even.ranks]
    assert all(torch.equal(members[0], m) for m in members)
    if n > 1:
        assert not torch.equal(w[0], w[1])  # rank 1 stepped on its own gradients
    assert hvd.remove_process_set(odd) and hvd.remove_process_set(even)
