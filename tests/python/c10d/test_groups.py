"""Process groups on the "chorus" backend: any subset of ranks, several at once (each ordered in
itself), single-member groups, new_subgroups, and a gloo group beside them in the same job."""

import torch
import torch.distributed as dist

from c10d_values import rank, reduced, size, value


def members_sum(ranks, shape, seed):
    return reduced(dist.ReduceOp.SUM, [value(r, shape, torch.float64, seed) for r in ranks])


def test_every_pair_of_ranks_as_a_group():
    for a in range(size()):
        for b in range(a + 1, size()):
            g = dist.new_group([b, a], backend="chorus")  # order does not matter
            if rank() in (a, b):
                t = value(rank(), (6,), torch.float64, 10 * a + b)
                dist.all_reduce(t, group=g)
                assert torch.equal(t, members_sum((a, b), (6,), 10 * a + b))
                x = value(rank(), (2,), torch.int32, 1)
                dist.broadcast(x, src=b, group=g)  # src is a global rank
                assert torch.equal(x, value(b, (2,), torch.int32, 1))
                out = [torch.zeros(2, dtype=torch.int32) for _ in range(2)]
                dist.all_gather(out, value(rank(), (2,), torch.int32, 2), group=g)
                assert torch.equal(out[0], value(a, (2,), torch.int32, 2))
                assert torch.equal(out[1], value(b, (2,), torch.int32, 2))
            dist.destroy_process_group(g)


def test_two_groups_interleaved_each_in_its_order():
    g_all = dist.new_group(list(range(size())), backend="chorus")
    g_rev = dist.new_group(list(reversed(range(size()))), backend="chorus")
    works, tensors = [], []
    for i in range(6):
        t = value(rank(), (5000 + i,), torch.float64, 200 + i)
        tensors.append(t)
        works.append(dist.all_reduce(t, group=g_all if i % 2 == 0 else g_rev, async_op=True))
    for w in works:
        w.wait()
    for i, t in enumerate(tensors):
        assert torch.equal(t, members_sum(range(size()), (5000 + i,), 200 + i))


def test_a_group_of_one():
    g = dist.new_group([size() - 1], backend="chorus")
    if rank() == size() - 1:
        t = torch.arange(4.)
        dist.all_reduce(t, group=g)
        assert torch.equal(t, torch.arange(4.))
        out = [torch.zeros(4)]
        dist.all_gather(out, torch.ones(4), group=g)
        assert torch.equal(out[0], torch.ones(4))


def test_new_subgroups_and_by_enumeration(monkeypatch):
    # torch 1.13 refuses both without CUDA, for any backend, before it looks at the backend; with
    # their sizes given they need nothing else of CUDA.
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    per = 1 if size() % 2 else 2
    mine, all_groups = dist.new_subgroups(group_size=per, backend="chorus")
    first = (rank() // per) * per
    t = value(rank(), (3,), torch.float64, 300)
    dist.all_reduce(t, group=mine)
    assert torch.equal(t, members_sum(range(first, first + per), (3,), 300))
    evens, odds = list(range(0, size(), 2)), list(range(1, size(), 2))
    mine2, groups2 = dist.new_subgroups_by_enumeration([evens, odds], backend="chorus")
    members = evens if rank() % 2 == 0 else odds
    t = value(rank(), (3,), torch.float64, 301)
    dist.all_reduce(t, group=mine2)
    assert torch.equal(t, members_sum(members, (3,), 301))
    for g in all_groups + groups2:
        dist.destroy_process_group(g)


def test_chorus_and_gloo_groups_side_by_side():
    gloo = dist.new_group(backend="gloo")
    a = value(rank(), (1000,), torch.float32, 400)
    b = a.clone()
    wa = dist.all_reduce(a, async_op=True)
    wb = dist.all_reduce(b, group=gloo, async_op=True)
    wa.wait()
    wb.wait()
    assert torch.equal(a, b)
    dist.destroy_process_group(gloo)
