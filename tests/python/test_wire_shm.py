"""Compression.fp16 among ranks that all share one host's memory, with CHORUS_COMPRESSION_SHM at
its default (auto): the runtime runs the operation uncompressed, so the result is the exact
float32 sum (two ranks: the order of the additions does not matter), not an fp16 value. Its
own job (python_wire_shm_np2): the suites' job forces compression on."""

import torch

import chorus.torch as hvd


def test_fp16_on_shared_memory_is_the_exact_sum():
    assert hvd.size() == 2
    g = torch.Generator().manual_seed(7 + hvd.rank())
    t = (torch.rand(3001, generator=g) - 0.5) * 600
    out = hvd.allreduce(t, op=hvd.Sum, compression=hvd.Compression.fp16, name="wire.shm.py")
    rows = hvd.allgather(t.reshape(1, -1))
    assert torch.equal(out, rows[0] + rows[1]), "fp16 ran on shared memory"
    assert not torch.equal(out.half().float(), out), "inputs fp16 keeps exactly prove nothing"
