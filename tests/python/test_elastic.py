"""hvd.elastic's state and retry loop (Horovod 0.28's behaviour): ObjectState and TorchState
commit/restore/sync, the ElasticSampler's split of an epoch, run() restoring the last commit
after a HorovodInternalError and not after a HostsUpdatedInterrupt, reset callbacks. Run under
`chorusrun --min-np`: each reset is a new round the launcher forms on request."""

import pytest
import torch

import chorus.torch as hvd
from chorus import _chorus_torch as _lib


def test_object_state_commit_restore_sync():
    state = hvd.elastic.ObjectState(epoch=0, note="start")
    state.epoch = 5 + hvd.rank()
    state.commit()
    state.epoch = 99
    state.restore()
    assert state.epoch == 5 + hvd.rank()
    state.sync()  # rank 0's committed values win
    assert state.epoch == 5 and state.note == "start"


def test_torch_state_restores_model_and_optimizer():
    torch.manual_seed(hvd.rank())
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    state = hvd.elastic.TorchState(model=model, optimizer=opt, batch=0)
    state.sync()
    committed = [p.detach().clone() for p in model.parameters()]
    gathered = hvd.allgather(torch.cat([p.flatten() for p in committed]).unsqueeze(0))
    assert all(torch.equal(gathered[0], row) for row in gathered)  # synced from rank 0
    state.commit()
    saved = {k: {n: v.clone() for n, v in d.items()} for k, d in opt.state_dict()["state"].items()}
    model(torch.ones(3, 4)).sum().backward()
    opt.step()
    state.batch = 7
    assert not torch.equal(next(model.parameters()), committed[0])
    state.restore()
    assert all(torch.equal(p, c) for p, c in zip(model.parameters(), committed))
    assert state.batch == 0
    now = opt.state_dict()["state"]
    assert now.keys() == saved.keys()  # the momentum of the undone step is gone
    assert all(torch.equal(now[k][n], v) for k, d in saved.items() for n, v in d.items() if torch.is_tensor(v))


def test_elastic_sampler_splits_the_rest_of_an_epoch():
    data = list(range(50))
    sampler = hvd.elastic.ElasticSampler(data, shuffle=False)
    n = hvd.size()
    assert len(sampler) == -(-50 // n)
    assert list(sampler)[:2] == [hvd.rank(), hvd.rank() + n]
    sampler.record_batch(0, 5)
    sampler.reset()
    mine = list(sampler)
    assert mine[0] == 5 * n + hvd.rank()
    everyone = hvd.allgather_object(mine)
    assert set().union(*everyone) == set(range(5 * n, 50))  # nothing processed comes again
    sampler.set_epoch(1)
    assert sampler.processed_num == 0 and len(sampler) == -(-50 // n)
    assert hvd.elastic.Sampler is hvd.elastic.ElasticSampler


def test_run_restores_after_internal_error_and_resets():
    state = hvd.elastic.ObjectState(value=1)
    resets = []
    state.register_reset_callbacks([lambda: resets.append(hvd.size())])
    calls = []
    round_before = _lib.elastic_round()

    @hvd.elastic.run
    def train(state, fail_once):
        calls.append(state.value)
        state.value = 2
        state.commit()
        state.value = 3  # not committed: lost when the job fails
        if fail_once and len(calls) == 1:
            raise hvd.HorovodInternalError("simulated peer failure")
        return state.value

    assert train(state, True) == 3
    assert calls == [1, 2]  # the second try started from the commit, not from 3
    assert resets == [hvd.size()]
    assert hvd.is_initialized()
    if round_before >= 0:
        assert _lib.elastic_round() > round_before  # the launcher formed a new round
    assert hvd.allreduce(torch.ones(2), name="elastic.after_reset", op=hvd.Sum).tolist() == [hvd.size()] * 2


def test_run_does_not_restore_after_hosts_updated():
    state = hvd.elastic.ObjectState(value=1)
    calls = []

    @hvd.elastic.run
    def train(state):
        calls.append(state.value)
        if len(calls) == 1:
            state.value = 2  # kept: an interrupt comes right after a commit, nothing to undo
            raise hvd.HostsUpdatedInterrupt(True)  # skip_sync: the next try starts unsynced
        return state.value

    assert train(state) == 2
    assert calls == [1, 2]


def test_check_host_updates_agrees_on_every_rank():
    state = hvd.elastic.ObjectState(x=0)
    state.commit()  # no newer round: nothing raised
    hvd.elastic.check_host_updates(state)
    if _lib.elastic_round() < 0:
        pytest.skip("not an elastic job")
    assert _lib.elastic_latest_round() == _lib.elastic_round()
