"""hvd.elastic for chorus.torch (horovod.torch.elastic's names): run, TorchState, ObjectState,
ElasticSampler (also as Sampler), HostsUpdatedInterrupt and HorovodInternalError.

Under `chorusrun --min-np N --max-np M` a rank that dies does not end the job: the survivors'
next operation raises HorovodInternalError, `run` restores the last commit, shuts down and
init()s into the launcher's next round (new size, new ranks, new mesh) and carries on; the dead
rank's host is blacklisted, as horovodrun does (its other ranks stop; one host: --no-blacklist).
Outside such a job, a reset is shutdown() and init() of the same job."""

import sys

from chorus.common.elastic import State, run_fn
from chorus.common.elastic import ObjectState as _ObjectState
from chorus.common.exceptions import HorovodInternalError, HostsUpdatedInterrupt, WorkerRemovedError
from chorus.torch.basics import init, rank, shutdown
from chorus.torch.elastic.sampler import ElasticSampler
from chorus.torch.elastic.state import TorchState, _agree_max, _current_round, _latest_round
from chorus.torch.functions import broadcast_object

Sampler = ElasticSampler


class ObjectState(_ObjectState):
    """Plain Python objects as elastic state, kept with chorus.torch's broadcast_object."""

    def __init__(self, bcast_object=None, get_rank=None, **kwargs):
        super().__init__(bcast_object or broadcast_object, get_rank or rank, _latest_round=_latest_round,
                         _current_round=_current_round, _agree_max=_agree_max, **kwargs)


def run(func):
    """Decorator for the elastic training function `func(state, ...)`: runs it, and when a worker
    is lost (HorovodInternalError) or the launcher formed a new round (HostsUpdatedInterrupt at a
    commit) resets the job and runs it again from the state's last commit, synced from rank 0.
    Do not run collectives in the decorated call's arguments: they would meet the state sync of
    workers that just joined."""
    return run_fn(func, _reset)


def _reset():
    """shutdown() and init() into the launcher's next round. A worker that chorusrun removed (its
    discovery script offers fewer slots than workers run) has no place there: it ends here, with
    exit status 0 (SystemExit, so `finally` blocks run), as Horovod's removed workers end."""
    shutdown()
    try:
        init()
    except WorkerRemovedError as e:
        sys.stderr.write("chorus: %s; this worker ends here\n" % e)
        sys.stderr.flush()
        raise SystemExit(0)


def check_host_updates(state):
    """state.check_host_updates(): raises HostsUpdatedInterrupt on every rank when a newer round
    exists."""
    state.check_host_updates()


__all__ = ["ElasticSampler", "HorovodInternalError", "HostsUpdatedInterrupt", "ObjectState", "Sampler", "State",
           "TorchState", "WorkerRemovedError", "check_host_updates", "run"]
