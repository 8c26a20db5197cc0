"""Exceptions raised by chorus.torch, with the names Horovod users catch."""


class HorovodInternalError(RuntimeError):
    """The job failed: a peer died or its connection broke, Chorus shut down with the
    operation pending, or a frame failed validation. The message is Chorus' status."""


class HostsUpdatedInterrupt(RuntimeError):
    """Horovod's elastic-mode interrupt: raised by State.commit()/check_host_updates() on every
    rank at once when chorusrun (--min-np/--max-np) formed a newer round of the job. hvd.elastic.run
    catches it and resets without restoring (nothing after the commit to undo); `skip_sync`
    says whether the state broadcast after the reset may be skipped."""

    def __init__(self, skip_sync=False):
        super().__init__("hosts updated")
        self.skip_sync = skip_sync


class ChorusArgumentError(ValueError, RuntimeError):
    """A bad argument: rejected at the call (unsupported dtype, bad root rank, a name still
    pending) or found when the ranks compared their tensors (shape, dtype or op differ across
    ranks). Both a ValueError and a RuntimeError, so code written for either Horovod behaviour
    catches it."""


class WorkerRemovedError(RuntimeError):
    """Raised by init() in an elastic job when chorusrun removed this worker (its host
    discovery script offers fewer slots than workers run). hvd.elastic.run ends the process
    with exit status 0 on it; chorusrun does not count the worker's exit either way."""
