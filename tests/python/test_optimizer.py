"""DistributedOptimizer: N ranks on shards of a batch reach the parameters one process
reaches on the whole batch."""

import re

import pytest
import torch

import chorus.torch as hvd
from chorus.torch.buckets import Bucket

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


@pytest.mark.parametrize("bucket_bytes", ["", "0", "300"], ids=["buckets", "unbucketed", "small_buckets"])
@pytest.mark.parametrize("kwargs", [{}, {"num_groups": 2}, {"gradient_predivide_factor": 2.0},
                                    {"op": hvd.Average, "compression": hvd.Compression.none}],
                         ids=["default", "num_groups", "predivide", "explicit"])
def test_matches_one_process_on_the_full_batch(kwargs, bucket_bytes, monkeypatch):
    # CHORUS_BUCKET_BYTES: "" the default (this model's gradients all go in one bucket), 0 no
    # buckets, 300 one bucket of three gradients, the others alone.
    monkeypatch.setenv("CHORUS_BUCKET_BYTES", bucket_bytes)
    if hvd.size() == 3 and BATCH % 3:
        pytest.skip("batch not divisible")
    for make_opt in (sgd, adam):
        got = distributed_params(make_opt, **kwargs)
        want = reference_params(make_opt)
        for a, b in zip(got, want):
            assert torch.allclose(a, b, atol=1e-5), (kwargs, (a - b).abs().max())


def test_explicit_groups_and_fp16_compression():
    model = make_model()
    params = list(model.parameters())
    opt = hvd.DistributedOptimizer(sgd(params, 1.0), named_parameters=model.named_parameters(),
                                   groups=[params[:2], params[2:4]], compression=hvd.Compression.fp16)
    for x, y in batches():
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(my_shard(x)), my_shard(y)).backward()
        opt.step()
    for a, b in zip(model.parameters(), reference_params(sgd)):
        assert torch.allclose(a, b, atol=5e-3), (a - b).abs().max()


def test_groups_of_small_gradients_become_flat_buckets_and_others_stay_grouped(monkeypatch):
    # 0.weight 640 B + 0.bias 64: each under 700, one flat bucket; 2.weight is 1024 B: its
    # group stays a grouped operation. Results as on one process either way.
    monkeypatch.setenv("CHORUS_BUCKET_BYTES", "700")
    model = make_model()
    params = list(model.parameters())
    opt = hvd.DistributedOptimizer(sgd(params, 1.0), named_parameters=model.named_parameters(),
                                   groups=[params[:2], params[2:4]])
    assert bucket_layout(opt, model) == \
        [("group0.0.weight", ["0.weight", "0.bias"])]
    assert list(opt._group_counts) == [tuple(params[2:4])]
    for x, y in batches():
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(my_shard(x)), my_shard(y)).backward()
        opt.step()
    assert [b.name for b in opt._buckets] == [b.name for b in opt._buckets[:1]]  # never re-cut
    for a, b in zip(model.parameters(), reference_params(sgd)):
        assert torch.allclose(a, b, atol=1e-5), (a - b).abs().max()


@pytest.mark.parametrize("bucket_bytes", ["", "0"], ids=["buckets", "unbucketed"])
def test_backward_passes_per_step_accumulates_locally(bucket_bytes, monkeypatch):
    # Two micro-batches of half size, summed: twice the mean gradient of the shard.
    monkeypatch.setenv("CHORUS_BUCKET_BYTES", bucket_bytes)
    got = distributed_params(sgd, passes=2)
    want = reference_params(sgd, lr_scale=2.0)
    for a, b in zip(got, want):
        assert torch.allclose(a, b, atol=1e-5), (a - b).abs().max()


def test_a_bucket_is_reduced_once_after_several_backward_passes(monkeypatch):
    # Passes before the last leave placeholders for their parameters; the bucket replaces
    # them, so that synchronize() does not reduce its members a second time, one by one.
    monkeypatch.setenv("CHORUS_BUCKET_BYTES", "")
    model = make_model()
    opt = hvd.DistributedOptimizer(sgd(model.parameters(), 1.0), named_parameters=model.named_parameters(),
                                   backward_passes_per_step=2)
    x, y = batches()[0]
    for _ in range(2):
        torch.nn.functional.cross_entropy(model(my_shard(x)), my_shard(y)).backward()
    assert list(opt._handles) == opt._buckets and len(opt._buckets) == 1
    opt.step()
    assert not opt._handles


def test_op_sum_and_unnamed_parameters():
    model = make_model()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1 / hvd.size()), op=hvd.Sum)
    for x, y in batches():
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(my_shard(x)), my_shard(y)).backward()
        opt.step()
    want = reference_params(lambda p, s: torch.optim.SGD(p, lr=0.1))
    for a, b in zip(model.parameters(), want):
        assert torch.allclose(a, b, atol=1e-5)


def test_synchronize_then_skip_synchronize_and_zero_grad_guard():
    model = make_model()
    opt = hvd.DistributedOptimizer(sgd(model.parameters(), 1.0), named_parameters=model.named_parameters())
    x, y = batches()[0]
    torch.nn.functional.cross_entropy(model(my_shard(x)), my_shard(y)).backward()
    with pytest.raises(AssertionError, match="zero_grad"):
        opt.zero_grad()
    opt.synchronize()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    with opt.skip_synchronize():
        opt.step()
    opt.zero_grad()
    assert all(torch.allclose(a, b) for a, b in zip(model.parameters(), model.parameters()))


def test_bad_arguments():
    model = make_model()
    with pytest.raises(NotImplementedError, match="Adasum"):
        hvd.DistributedOptimizer(sgd(model.parameters(), 1.0), op=hvd.Adasum)
    with pytest.raises(ValueError, match="predivide"):
        hvd.DistributedOptimizer(sgd(model.parameters(), 1.0), op=hvd.Sum, gradient_predivide_factor=2.0)
    with pytest.raises(ValueError, match="duplicates"):
        p = list(model.parameters())
        hvd.DistributedOptimizer(sgd(p, 1.0), named_parameters=[("a", p[0]), ("a", p[1])])
    with pytest.raises(ValueError, match="not named"):
        hvd.DistributedOptimizer(sgd(model.parameters(), 1.0), named_parameters=[("a", next(model.parameters()))])
    with pytest.raises(ValueError, match="not registered"):
        hvd.DistributedOptimizer(sgd(model.parameters(), 1.0), process_set=hvd.ProcessSet([0]))


@pytest.mark.parametrize("bucket_bytes", ["", "0", "300"], ids=["buckets", "unbucketed", "small_buckets"])
def test_hooks_enqueue_every_gradient_during_backward(bucket_bytes, monkeypatch):
    # Each gradient (or bucket of gradients, once all of them exist) is handed to Chorus by
    # its accumulator hook while backward runs, so after backward every parameter has an
    # allreduce in flight (or done) before step() is called.
    monkeypatch.setenv("CHORUS_BUCKET_BYTES", bucket_bytes)
    model = make_model()
    opt = hvd.DistributedOptimizer(sgd(model.parameters(), 1.0), named_parameters=model.named_parameters())
    x, y = batches()[0]
    torch.nn.functional.cross_entropy(model(my_shard(x)), my_shard(y)).backward()
    covered = [q for key in opt._handles for q in (key.params if isinstance(key, Bucket) else [key])]
    assert len(covered) == len(set(covered)) == len(list(model.parameters()))
    assert set(covered) == set(model.parameters())
    assert all(handle is not None for handle, _ in opt._handles.values())
    # (Names of an optimizer after a process' first start with "opt<k>.".)
    buckets = sorted(re.sub(r"^opt\d+\.", "", key.name) for key in opt._handles if isinstance(key, Bucket))
    assert buckets == {"": ["bucket0.4.bias"], "0": [], "300": ["bucket0.4.bias"]}[bucket_bytes], buckets
    opt.step()
    assert not opt._handles


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
    opt = hvd.DistributedOptimizer(sgd(model.parameters(), 1.0), named_parameters=model.named_parameters())
    names = {p: n for n, p in model.named_parameters()}

    def layout():
        return bucket_layout(opt, model)

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
    opt = hvd.DistributedOptimizer(sgd(model.parameters(), 1.0), named_parameters=model.named_parameters())
    names = {p: n for n, p in model.named_parameters()}

    def layout():
        return bucket_layout(opt, model)

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
    opt = hvd.DistributedOptimizer(sgd(model.parameters(), 1.0), named_parameters=model.named_parameters())
    names = {p: n for n, p in model.named_parameters()}
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
