"""DistributedOptimizer: N ranks on shards of a batch reach the parameters one process
reaches on the whole batch (options, groups, compression, accumulation, synchronize, bad
arguments, the hooks that enqueue gradients during backward). The gradient buckets' layout and
re-cuts, sparse gradients, partly ready groups and buckets are in test_optimizer_buckets.py."""

import re

import pytest
import torch

import chorus.torch as hvd
from chorus.torch.buckets import Bucket
from optimizer_helpers import (BATCH, adam, batches, bucket_layout, distributed_params, make_model, my_shard,
                               reference_params, sgd)


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
