"""Horovod's elastic state machine, framework-free (horovod.common.elastic): State, ObjectState
and run_fn, the retry loop behind hvd.elastic.run. The framework module supplies how to
broadcast an object, the rank, the reset (shutdown + init into the next round) and how to ask
the launcher whether a newer round exists."""

import functools

from chorus.common.exceptions import HorovodInternalError, HostsUpdatedInterrupt


class Keeper(object):
    """What can be kept across resets: a whole State, or one object inside a TorchState."""

    def save(self):
        """Saves the state to host memory."""
        raise NotImplementedError()

    def restore(self):
        """Restores the last saved state, undoing any later modifications."""
        raise NotImplementedError()

    def sync(self):
        """Synchronizes the state across workers (rank 0's wins)."""
        raise NotImplementedError()


class State(Keeper):
    """What a worker keeps in memory across resets.

    commit() = save() + check_host_updates(); restore() goes back to the last save(); sync()
    makes every rank hold rank 0's state. `bcast_object(obj)` returns rank 0's obj on every
    rank; `get_rank()` is this worker's rank; `latest_round()` returns the newest round the
    launcher formed (None outside an elastic job) and `agree_max(n)` the maximum of n over the
    ranks of the current round."""

    def __init__(self, bcast_object, get_rank, latest_round=None, current_round=None, agree_max=None):
        self._bcast_object = bcast_object
        self._rank = get_rank
        self._latest_round = latest_round or (lambda: None)
        self._current_round = current_round or (lambda: None)
        self._agree_max = agree_max
        self._reset_callbacks = []

    def register_reset_callbacks(self, callbacks):
        """Functions to call after every reset (a worker was added or removed), e.g. to scale
        the learning rate with the new size()."""
        self._reset_callbacks.extend(callbacks)

    def on_reset(self):
        self.reset()
        for callback in self._reset_callbacks:
            callback()

    def commit(self):
        """Saves the state in host memory, then checks for host updates (may raise
        HostsUpdatedInterrupt). Commit less often than every batch when saving is costly: a
        failure loses the batches since the last commit."""
        self.save()
        self.check_host_updates()

    def check_host_updates(self):
        """Raises HostsUpdatedInterrupt on every rank at once when the launcher has formed a
        round newer than the one this job runs in (a worker was added, or one left). Every rank
        takes the maximum of what the ranks saw, so all of them raise or none does."""
        current = self._current_round()
        if current is None:
            return  # not an elastic job: there are no host updates
        latest = self._latest_round()
        seen = max(current, latest if latest is not None else current)
        if self._agree_max is not None:
            seen = self._agree_max(seen)
        if seen > current:
            raise HostsUpdatedInterrupt(False)

    def reset(self):
        """Called after every reset, before the reset callbacks: objects that depend on the
        number of workers adjust here. Nothing by default."""


class ObjectState(State):
    """State made of plain Python objects, given as keyword arguments and exposed as attributes.
    save() remembers the attributes' current values, restore() puts the remembered ones back,
    sync() broadcasts rank 0's remembered values."""

    def __init__(self, bcast_object, get_rank, **kwargs):
        # chorus.torch passes its round queries under names no user attribute takes.
        hooks = {k[1:]: kwargs.pop(k) for k in ("_latest_round", "_current_round", "_agree_max") if k in kwargs}
        self._saved_state = kwargs
        self._set_attrs()
        super(ObjectState, self).__init__(bcast_object=bcast_object, get_rank=get_rank, **hooks)

    def save(self):
        self._saved_state = {attr: getattr(self, attr) for attr in self._saved_state}

    def restore(self):
        self._set_attrs()

    def sync(self):
        if self._saved_state:
            self._saved_state = self._bcast_object(self._saved_state)
            self._set_attrs()

    def _set_attrs(self):
        for attr, value in self._saved_state.items():
            setattr(self, attr, value)


def run_fn(func, reset):
    """Wraps `func(state, ...)` in Horovod's elastic loop:
      1. state.sync() (skipped after a HostsUpdatedInterrupt that asks so), then func.
      2. HorovodInternalError (a peer died, the job broke): state.restore() to the last commit.
         HostsUpdatedInterrupt: nothing to undo (it is raised right after a commit).
      3. reset(): shutdown() and init() into the launcher's next round; state.on_reset();
         back to 1. An error from reset() itself (the job ended: fewer workers than --min-np)
         leaves the loop."""

    @functools.wraps(func)
    def wrapper(state, *args, **kwargs):
        skip_sync = False
        while True:
            try:
                if not skip_sync:
                    state.sync()
                return func(state, *args, **kwargs)
            except HorovodInternalError:
                state.restore()
                skip_sync = False
            except HostsUpdatedInterrupt as e:
                skip_sync = e.skip_sync
            reset()
            state.on_reset()

    return wrapper
