"""DistributedOptimizer's gradient buckets: cut in backward order at a cap, re-cut between
steps by set_bucket_bytes, rebuilt from rank 0's first backward order; a sparse gradient leaving
its bucket; groups and buckets only partly ready; gradients ready together submitted in one call.
Training still reaches the parameters one process reaches on the whole batch."""

import re

import pytest
import torch

import chorus.torch as hvd
from optimizer_helpers import (BATCH, STEPS, batches, bucket_layout, distributed_params, make_model, my_shard,
                               reference_params, sgd)


def bucketed(model):
    """A DistributedOptimizer over `model` (plain SGD), its parameters' names by parameter, and a
    function giving its current bucket layout."""
    opt = hvd.DistributedOptimizer(sgd(model.parameters(), 1.0), named_parameters=model.named_parameters())
    return opt, {p: n for n, p in model.named_parameters()}, lambda: bucket_layout(opt, model)


def test_buckets_follow_backward_order_and_close_at_the_cap(monkeypatch):
    # Parameters in reverse registration order, a bucket closed once it holds 300 bytes or
    # more, parameters of 300 bytes or more and buckets of one left alone. make_model's
    # gradients: 4.bias 16 B, 4.weight 256, 2.bias 64 | 2.weight 1024 | 0.bias 64 | 0.weight 640.
    monkeypatch.setenv("CHORUS_BUCKET_BYTES", "300")
    model = make_model()
    opt = hvd.DistributedOptimizer(sgd(model.parameters(), 1.0), named_parameters=model.named_parameters())
    assert bucket_layout(opt, model) == \
        [("bucket0.4.bias", ["4.bias", "4.weight", "2.bias"])]
    monkeypatch.setenv("CHORUS_BUCKET_BYTES", "lots")
    with pytest.raises(ValueError, match="CHORUS_BUCKET_BYTES"):
        hvd.DistributedOptimizer(sgd(model.parameters(), 1.0), named_parameters=model.named_parameters())


def test_set_bucket_bytes_cuts_again_between_steps_with_the_lowest_ranks_size(monkeypatch):
    # make_model's gradients in backward order: 4.bias 16 B, 4.weight 256, 2.bias 64, 2.weight
    # 1024, 0.bias 64, 0.weight 640. Each rank asks for another size; rank 0's is used.
    monkeypatch.setenv("CHORUS_BUCKET_BYTES", "300")
    model = make_model()
    opt, names, layout = bucketed(model)

    data = batches()
    sizes = {1: 2000 + 7 * hvd.rank(), 3: 0, 4: 700}  # before step k
    cuts = []
    for k, (x, y) in enumerate(data):
        if k in sizes:
            assert opt.set_bucket_bytes(sizes[k]) == sizes[k] - 7 * hvd.rank() * (k == 1)
            cuts.append(layout())
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(my_shard(x)), my_shard(y)).backward()
        opt.step()
    seen = hvd.allgather_object(cuts)
    assert all(s == seen[0] for s in seen), seen
    # 2000 B: all six in one bucket (2064 B, closed by the last); 0: none; 700: the five under
    # 700 B in one (1040 B, closed by 0.weight), 2.weight (1024 B) alone. Backward produced
    # bias and weight of a layer in either order, so compare the members as sets.
    assert [len(c) for c in seen[0]] == [1, 0, 1]
    assert sorted(seen[0][0][0][1]) == sorted(names.values())
    assert sorted(seen[0][2][0][1]) == sorted(n for n in names.values() if n != "2.weight")
    # Training across the cuts is training on one process with the whole batch.
    for a, b in zip(model.parameters(), reference_params(sgd)):
        assert torch.allclose(a, b, atol=1e-5), (a - b).abs().max()
    # Not during a step, not a size, not where there are no buckets.
    torch.nn.functional.cross_entropy(model(my_shard(data[0][0])), my_shard(data[0][1])).backward()
    with pytest.raises(AssertionError, match="between steps"):
        opt.set_bucket_bytes(4096)
    opt.step()
    for bad in (-1, 1.5, "1M", True, (1 << 34) + 1):
        with pytest.raises(ValueError, match="whole number of bytes"):
            opt.set_bucket_bytes(bad)
    # A bad value on one rank raises on every rank (none waits for the others), naming it.
    before = layout()
    with pytest.raises(ValueError, match=r"rank\(s\) 1 passed something else"):
        opt.set_bucket_bytes("lots" if hvd.rank() == 1 else 4096)
    assert layout() == before
    params = list(model.parameters())
    grouped = hvd.DistributedOptimizer(sgd(params, 1.0), named_parameters=model.named_parameters(),
                                       groups=[params[:2]])
    with pytest.raises(ValueError, match="no gradient buckets"):
        grouped.set_bucket_bytes(4096)


class _RegisteredOutOfOrder(torch.nn.Module):
    """Layers registered last, middle, first: the order backward produces their gradients
    (last layer first) is not the reverse of the registration order."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(5)
        self.last = torch.nn.Linear(8, 4)    # weight 128 B, bias 16 B
        self.first = torch.nn.Linear(6, 8)   # weight 192 B, bias 32 B
        self.middle = torch.nn.Linear(8, 8)  # weight 256 B, bias 32 B

    def forward(self, x):
        return self.last(torch.tanh(self.middle(torch.tanh(self.first(x)))))


def test_buckets_are_rebuilt_from_the_first_steps_backward_order_of_rank_0(monkeypatch):
    monkeypatch.setenv("CHORUS_BUCKET_BYTES", "300")
    model = _RegisteredOutOfOrder()
    opt, names, layout = bucketed(model)

    # Reverse registration order: middle.bias, middle.weight | first.bias, first.weight | ...
    assert layout() == [("bucket0.middle.bias", ["middle.bias", "middle.weight", "first.bias"]),
                        ("bucket1.first.weight", ["first.weight", "last.bias", "last.weight"])]
    g = torch.Generator().manual_seed(2)
    x, y = torch.randn(BATCH, 6, generator=g), torch.randint(0, 4, (BATCH,), generator=g)
    torch.nn.functional.cross_entropy(model(x), y).backward()
    if hvd.rank() != 0:
        opt._first_step.reverse()  # another order here: rank 0's must win
    opt.step()
    # Backward produced last, middle, first (bias before weight within a layer, as autograd
    # ran them here); every rank now has the buckets of rank 0's order.
    seen = hvd.allgather_object(layout())
    assert all(s == seen[0] for s in seen), seen
    assert [n for _, members in seen[0] for n in members][:2] in (["last.bias", "last.weight"],
                                                                   ["last.weight", "last.bias"])
    assert sorted(n for _, members in seen[0] for n in members) == sorted(names.values())
    # Training goes on with them, and the buckets stay as they are.
    for _ in range(2):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    assert layout() == seen[0]


def test_set_bucket_bytes_from_none_cuts_in_the_agreed_backward_order(monkeypatch):
    # No buckets at first; 200 B buckets leave middle.weight (256 B) alone, yet the first step
    # after them agrees the backward order of every gradient, middle.weight's included: a later
    # size that takes it puts it where backward produces it (last, middle, first).
    monkeypatch.setenv("CHORUS_BUCKET_BYTES", "0")
    model = _RegisteredOutOfOrder()
    opt, names, _ = bucketed(model)
    assert opt._buckets == []
    g = torch.Generator().manual_seed(2)
    x, y = torch.randn(BATCH, 6, generator=g), torch.randint(0, 4, (BATCH,), generator=g)
    layers = []
    for cap in (200, 1000, 1000):
        assert opt.set_bucket_bytes(cap) == cap
        layers.append([[names[p].split(".")[0] for p in b.params] for b in opt._buckets])
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    # Before any step with buckets: reverse registration order, middle.weight alone.
    assert layers[0] == [["middle", "first", "first"], ["last", "last"]]
    # After it: one bucket of all six, in backward's order, and it stays so.
    assert layers[1] == layers[2] == [["last", "last", "middle", "middle", "first", "first"]]
    assert hvd.allgather_object(layers) == [layers] * hvd.size()


class _SparseNet(torch.nn.Module):
    """An embedding with sparse gradients beside a dense layer: both small enough to share a
    bucket, until the embedding's gradient turns out sparse."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(7)
        self.emb = torch.nn.Embedding(20, 4, sparse=True)
        self.out = torch.nn.Linear(4, 4)

    def forward(self, idx):
        return self.out(self.emb(idx).sum(1))


@pytest.mark.parametrize("sparse_as_dense", [False, True])
def test_sparse_optimizer_gets_a_sparse_gradient(sparse_as_dense):
    # Horovod: with sparse_as_dense the gradient is reduced dense and made sparse again, so a
    # sparse-only optimizer (SparseAdam) still steps; the result is the same either way.
    torch.manual_seed(5)
    emb = torch.nn.Embedding(10, 3, sparse=True)
    hvd.broadcast_parameters(emb.state_dict(), root_rank=0)
    opt = hvd.DistributedOptimizer(torch.optim.SparseAdam(list(emb.parameters()), lr=0.1),
                                   named_parameters=[("emb.%s" % sparse_as_dense, emb.weight)],
                                   sparse_as_dense=sparse_as_dense)
    idx = torch.tensor([[1, 2, 4], [4, 3, 9]]) if hvd.rank() % 2 == 0 else torch.tensor([[1, 7], [5, 9]])
    opt.zero_grad()
    emb(idx).sum().backward()
    opt.step()
    assert emb.weight.grad.is_sparse
    rows = hvd.allgather(emb.weight.detach().clone(), name="sparse.dense.%s" % sparse_as_dense)
    assert all(torch.equal(rows[:10], rows[10 * q:10 * q + 10]) for q in range(hvd.size()))


def test_a_sparse_gradient_leaves_its_bucket():
    g = torch.Generator().manual_seed(13)
    data = [(torch.randint(0, 20, (BATCH, 3), generator=g), torch.randint(0, 4, (BATCH,), generator=g))
            for _ in range(STEPS)]

    def run(distributed):
        model = _SparseNet()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        if distributed:
            opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters())
            assert [len(b.params) for b in opt._buckets] == [3]
        for idx, y in data:
            opt.zero_grad()
            if distributed:
                idx, y = my_shard(idx), my_shard(y)
            torch.nn.functional.cross_entropy(model(idx), y).backward()
            opt.step()
        if distributed:
            assert [len(b.params) for b in opt._buckets] == [2]
            assert model.emb.weight.grad.is_sparse
            # It stays out when the buckets are cut again.
            assert opt.set_bucket_bytes((1 << 20) + 1) == (1 << 20) + 1
            assert [len(b.params) for b in opt._buckets] == [2]
            assert all(p is not model.emb.weight for b in opt._buckets for p in b.params)
        return [p.detach() for p in model.parameters()]

    if hvd.size() == 3 and BATCH % 3:
        pytest.skip("batch not divisible")
    for a, b in zip(run(True), run(False)):
        assert torch.allclose(a, b, atol=1e-5), (a - b).abs().max()


class _Branchy(torch.nn.Module):
    """A trunk used every step and a branch used only on even steps: on odd steps the branch's
    parameters produce no gradient."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(5)
        self.trunk = torch.nn.Linear(10, 4)
        self.branch = torch.nn.Linear(10, 4)

    def forward(self, x, step):
        out = self.trunk(x)
        return out + self.branch(x) if step % 2 == 0 else out


def _branchy_run(distributed, groups=True):
    model = _Branchy()
    opt = sgd(model.parameters(), 1.0)
    if distributed:
        group = [model.trunk.weight, model.branch.weight]
        opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters(),
                                       groups=[group] if groups else None)
    for step, (x, y) in enumerate(batches()):
        opt.zero_grad()
        if distributed:
            x, y = my_shard(x), my_shard(y)
        torch.nn.functional.cross_entropy(model(x, step), y).backward()
        if distributed and not groups:
            # The one bucket (all four gradients) goes during backward when the branch was
            # used; otherwise synchronize() sends it whole, with zeros for the branch.
            assert [len(b.params) for b in opt._buckets] == [4]
            assert (opt._buckets[0] in opt._handles) == (step % 2 == 0)
        elif distributed and opt._buckets:
            # The group, small, is a flat bucket of its two gradients: likewise.
            assert [len(b.params) for b in opt._buckets] == [2] and not opt._group_counts
            assert (opt._buckets[0] in opt._handles) == (step % 2 == 0)
        elif distributed and step % 2 == 0:
            # After a step where the group was only partly ready, backward enqueues it again
            # as one whole group, once both of its gradients exist.
            keys = set(opt._handles)
            assert (model.trunk.weight, model.branch.weight) in keys, keys
            assert model.trunk.weight not in keys and model.branch.weight not in keys
        opt.step()
    return [p.detach() for p in model.parameters()]


@pytest.mark.parametrize("bucket_bytes", ["0", ""], ids=["grouped_op", "flat_bucket"])
def test_a_group_only_partly_ready_is_reduced_whole_and_counted_afresh(bucket_bytes, monkeypatch):
    # CHORUS_BUCKET_BYTES=0 keeps the group a grouped operation; by default it is small enough
    # to be one flat bucket.
    monkeypatch.setenv("CHORUS_BUCKET_BYTES", bucket_bytes)
    if hvd.size() == 3 and BATCH % 3:
        pytest.skip("batch not divisible")
    for a, b in zip(_branchy_run(True), _branchy_run(False)):
        assert torch.allclose(a, b, atol=1e-5), (a - b).abs().max()


def test_a_bucket_only_partly_ready_is_reduced_whole():
    if hvd.size() == 3 and BATCH % 3:
        pytest.skip("batch not divisible")
    for a, b in zip(_branchy_run(True, groups=False), _branchy_run(False)):
        assert torch.allclose(a, b, atol=1e-5), (a - b).abs().max()


class _Recorder:
    """Stands in for the extension module inside chorus.torch.optimizer: records the names of
    every allreduce_async_all call and forwards everything to the real module."""

    def __init__(self, lib):
        self._lib, self.together = lib, []

    def __getattr__(self, name):
        return getattr(self._lib, name)

    def allreduce_async_all(self, tensors, names, op, stream=0, **wire):
        self.together.append(list(names))
        return self._lib.allreduce_async_all(tensors, names, op, stream=stream, **wire)


@pytest.mark.parametrize("together_s", [0.0, 60.0], ids=["never", "always"])
def test_gradients_ready_together_are_submitted_in_one_call(monkeypatch, together_s):
    # Whether two gradients count as "ready together" is learned from the hook times of the
    # last pass (_TOGETHER_S apart at most). At 0 nothing is ever held; at 60 s every hook of
    # this small model follows its predecessor "at once", so from the second step on all of
    # them go to Chorus in one call at the end of backward. Results are the same either way.
    from chorus.torch import optimizer as optimizer_module
    monkeypatch.setenv("CHORUS_BUCKET_BYTES", "0")  # every gradient its own operation
    recorder = _Recorder(optimizer_module._lib)
    monkeypatch.setattr(optimizer_module, "_lib", recorder)
    monkeypatch.setattr(optimizer_module, "_TOGETHER_S", together_s)
    if hvd.size() == 3 and BATCH % 3:
        pytest.skip("batch not divisible")
    got = distributed_params(sgd)
    for a, b in zip(got, reference_params(sgd)):
        assert torch.allclose(a, b, atol=1e-5), (a - b).abs().max()
    params = sorted(n for n, _ in make_model().named_parameters())
    if together_s == 0.0:
        assert recorder.together == []
    else:
        # Step 1 learns; steps 2..STEPS each submit everything at once. (Names are
        # "allreduce.[opt<k>.]<parameter>": optimizers after a process' first are prefixed.)
        assert len(recorder.together) == STEPS - 1, recorder.together
        for call in recorder.together:
            assert sorted(re.sub(r"^allreduce\.(opt\d+\.)?", "", n) for n in call) == params, call
