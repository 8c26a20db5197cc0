"""One process, no launcher: the queries before init, a job of one rank, shutdown and init
again. Run without chorusrun (CHORUS_TEST_NO_INIT=1: the tests manage init themselves)."""

import pytest
import torch

import chorus.torch as hvd


def test_queries_before_init_raise_value_error():
    assert not hvd.is_initialized()
    for query in (hvd.size, hvd.rank, hvd.local_size, hvd.local_rank, hvd.cross_size, hvd.cross_rank,
                  hvd.is_homogeneous, hvd.settings):
        with pytest.raises(ValueError, match="init"):
            query()
    with pytest.raises(ValueError, match="not initialized"):
        hvd.allreduce(torch.ones(2))


def test_one_rank_job_and_restart():
    hvd.init()
    hvd.init()  # idempotent
    assert (hvd.size(), hvd.rank(), hvd.local_size(), hvd.local_rank()) == (1, 0, 1, 0)
    assert (hvd.cross_size(), hvd.cross_rank(), hvd.is_homogeneous()) == (1, 0, True)
    s = hvd.settings()  # the configured values (no autotuner here)
    assert s["fusion_threshold"] == 64 << 20 and s["chunk_bytes"] == 4 << 20 and s["cycle_time_ms"] == 1.0
    assert s["streams"] >= 1 and s["in_place_bytes"] == 1 << 20
    t = torch.arange(6.0)
    assert torch.equal(hvd.allreduce(t), t)
    assert torch.equal(hvd.allgather(t.view(2, 3)), t.view(2, 3))
    assert torch.equal(hvd.broadcast(t, 0), t)
    assert hvd.broadcast_object({"x": 1}) == {"x": 1}
    assert hvd.allgather_object(5) == [5]
    model = torch.nn.Linear(3, 2)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters())
    model(torch.ones(4, 3)).sum().backward()
    opt.step()
    hvd.barrier()
    hvd.shutdown()
    assert not hvd.is_initialized()
    with pytest.raises(hvd.HorovodInternalError, match="shut down"):
        hvd.allreduce(torch.ones(2))
    hvd.init()  # a new job after shutdown
    assert hvd.size() == 1
    assert torch.equal(hvd.allreduce(torch.ones(2), name="again"), torch.ones(2))
    hvd.shutdown()
