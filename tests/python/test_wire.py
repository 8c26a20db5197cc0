"""Compression on the wire and the NaN/Inf check through chorus.torch: Compression.fp16/bf16
done by the runtime (results of the wire type, within the documented bound, the same on every
rank), and DistributedOptimizer(nan_check=...) skipping a step on every rank together or
raising on every rank."""

import pytest
import torch

import chorus.torch as hvd


def same_on_every_rank(t):
    rows = hvd.allgather(t.reshape(1, -1))
    return all(torch.equal(rows[0], rows[i]) for i in range(hvd.size()))


@pytest.mark.parametrize("compression,wire,u", [(hvd.Compression.fp16, torch.float16, 2.0 ** -11),
                                                (hvd.Compression.bf16, torch.bfloat16, 2.0 ** -8)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_allreduce_compressed_on_the_wire(compression, wire, u, dtype):
    g = torch.Generator().manual_seed(100 + hvd.rank())
    t = ((torch.rand(3001, generator=g) - 0.5) * 600).to(dtype)
    out = hvd.allreduce(t, op=hvd.Sum, compression=compression, name="wire.py.%s" % wire)
    assert out.dtype == dtype
    assert torch.equal(out.to(wire).to(dtype), out), "results are values of the wire type"
    everyone = hvd.allgather(t.reshape(1, -1)).double()
    n = hvd.size()
    bound = n * (u + 2.0 ** -23) * everyone.abs().sum(0) + n * 2.0 ** -24
    assert ((out.double() - everyone.sum(0)).abs() <= bound).all()
    assert same_on_every_rank(out)


def tiny_model():
    torch.manual_seed(5)
    return torch.nn.Sequential(torch.nn.Linear(8, 6), torch.nn.Tanh(), torch.nn.Linear(6, 3))


def loss_of(model, poison):
    x = torch.ones(4, 8)
    loss = model(x).sum()
    return loss * float("nan") if poison else loss


def test_optimizer_skips_the_step_on_every_rank_when_a_gradient_is_not_finite():
    model = tiny_model()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters(), nan_check="skip",
                                   compression=hvd.Compression.fp16)
    before = [p.detach().clone() for p in model.parameters()]
    loss_of(model, hvd.rank() == hvd.size() - 1).backward()
    opt.step()
    assert all(torch.equal(b, p.detach()) for b, p in zip(before, model.parameters())), "a rank stepped"
    assert opt.skipped_steps == 1
    assert int(hvd.allgather(torch.tensor([[opt.skipped_steps]])).sum()) == hvd.size()
    opt.zero_grad()
    loss_of(model, False).backward()
    opt.step()
    assert opt.skipped_steps == 1
    assert not torch.equal(before[0], model[0].weight.detach()), "a finite step goes through"
    assert same_on_every_rank(model[0].weight.detach())


def test_optimizer_nan_check_error_raises_on_every_rank_naming_the_rank():
    model = tiny_model()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters(), nan_check="error")
    loss_of(model, hvd.rank() == 0).backward()
    with pytest.raises(Exception, match=r"rank\(s\) 0 "):
        opt.step()
    opt.zero_grad()
    loss_of(model, False).backward()
    opt.step()  # the next step works


def test_bad_nan_check_is_refused():
    model = tiny_model()
    with pytest.raises(ValueError, match="nan_check"):
        hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), nan_check="warn")


def test_optimizer_groups_compress_in_the_runtime_and_skip_together(monkeypatch):
    # CHORUS_BUCKET_BYTES=16: every group has a member of 16 bytes or more, so each stays a
    # grouped operation (not a flat bucket); a cast in Python would call compress().
    monkeypatch.setenv("CHORUS_BUCKET_BYTES", "16")

    def no_python_cast(*args):
        raise AssertionError("Compression.fp16 cast in Python for a group")

    monkeypatch.setattr(hvd.Compression.fp16, "compress", staticmethod(no_python_cast))
    model = tiny_model()
    params = list(model.parameters())
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters(), compression=hvd.Compression.fp16,
                                   groups=[params[:2], params[2:]], nan_check="skip")
    loss_of(model, hvd.rank() == 0).backward()
    before = [p.detach().clone() for p in params]
    opt.step()
    assert opt.skipped_steps == 1, "a NaN in a group skips the step"
    assert all(torch.equal(b, p.detach()) for b, p in zip(before, params)), "a rank stepped"
    opt.zero_grad()
    loss_of(model, False).backward()
    opt.synchronize()
    for p in params:
        assert torch.equal(p.grad.to(torch.float16).float(), p.grad), "gradients are fp16 values (runtime cast)"
        assert same_on_every_rank(p.grad)
    with opt.skip_synchronize():
        opt.step()
    assert opt.skipped_steps == 1
