"""Exceptions raised by chorus.torch, with the names Horovod users catch."""


class HorovodInternalError(RuntimeError):
    """The job failed: a peer died or its connection broke, Chorus shut down with the
    operation pending, or a frame failed validation. The message is Chorus' status."""


class HostsUpdatedInterrupt(RuntimeError):
    """Horovod's elastic-mode interrupt; Chorus has no elastic mode and never raises it."""

    def __init__(self, skip_sync=False):
        super().__init__("hosts updated")
        self.skip_sync = skip_sync


class ChorusArgumentError(ValueError, RuntimeError):
    """A bad argument: rejected at the call (unsupported dtype, bad root rank, a name still
    pending) or found when the ranks compared their tensors (shape, dtype or op differ across
    ranks). Both a ValueError and a RuntimeError, so code written for either Horovod behaviour
    catches it."""
