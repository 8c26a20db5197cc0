"""CHORUS_COMPRESSION and CHORUS_NAN_CHECK on the "chorus" backend, as in chorus.torch: float32
allreduces go over the wire in fp16 (sums in float32, every rank gets the same bits), and an input
holding NaN fails the call on every rank naming the rank. Run with CHORUS_COMPRESSION=fp16,
CHORUS_COMPRESSION_SHM=on (ranks on one host would otherwise skip the casts) and
CHORUS_NAN_CHECK=error."""

import pytest
import torch
import torch.distributed as dist


def test_float32_sums_travel_in_fp16_and_agree_bit_for_bit():
    rank, size = dist.get_rank(), dist.get_world_size()

    def data(r):
        return torch.rand(100_000, generator=torch.Generator().manual_seed(r)) + 0.1

    exact = sum(data(r).double() for r in range(size))  # computed here
    t = data(rank)
    dist.all_reduce(t)
    # fp16 keeps 11 bits: the sum is close, and not exact (the casts happened).
    assert torch.allclose(t.double(), exact, rtol=size * 2e-3)
    assert not torch.equal(t.double(), exact)
    everyone = [torch.zeros_like(t) for _ in range(size)]
    dist.all_gather(everyone, t)
    for other in everyone:
        assert torch.equal(other, t)  # the same bits on every rank
    ints = torch.full((10,), rank, dtype=torch.int64)  # not compressed: exact
    dist.all_reduce(ints)
    assert torch.equal(ints, torch.full((10,), size * (size - 1) // 2, dtype=torch.int64))


def test_a_nan_fails_the_allreduce_on_every_rank_naming_the_rank():
    g = dist.new_group(backend="chorus")  # the failure breaks the group: not the default one
    t = torch.ones(1000)
    if dist.get_rank() == dist.get_world_size() - 1:
        t[7] = float("nan")
    with pytest.raises(RuntimeError, match=r"c10d.all_reduce#1 .*NaN or Inf in the input on rank %d" %
                       (dist.get_world_size() - 1)):
        dist.all_reduce(t, group=g)
    dist.destroy_process_group(g)
