"""The handles DistributedOptimizer (optimizer.py) keeps for synchronize(): a gradient's or a
bucket's pending operation, scaled and unpacked once it ended, or the refusal of one the runtime
did not take."""

from chorus.torch.mpi_ops import _scale_


class _Refused:
    """An operation the runtime refused when it was submitted (inside backward, e.g. a name a
    peer announced with another shape): waiting for it raises the refusal, so that the error
    comes out of synchronize() like any other, not out of the middle of backward."""

    def __init__(self, error):
        self.error = error

    def wait(self):
        raise self.error

    result = wait


def _waiter(sub, post, sink=None):
    """A handle for synchronize(): waits for `sub` and returns its output, scaled by `post`.
    `sink(name, ranks)` hears of ranks whose input held NaN/Inf (the NaN check in skip mode)."""
    def wait():
        sub.wait()
        out = sub.result()
        ranks = sub.nonfinite_ranks() if sink is not None else None
        if ranks:
            sink(sub.name, ranks)
        _scale_(out, post)
        return out
    return wait


def _bucket_waiter(sub, post, bucket, ctx, compression, names, sink=None):
    """A handle for synchronize(): waits for a bucket's operation and unpacks it into the
    members' gradients. An error names the members and their shapes on this rank."""
    def wait():
        try:
            out = _waiter(sub, post, sink)()
        except Exception as e:  # noqa: BLE001 - re-raised, with the members named
            try:
                named = type(e)("%s [gradient bucket %s: %s]" % (e, bucket.name, bucket.describe(names)))
            except Exception:  # noqa: BLE001 - an exception type that takes other arguments
                raise e
            raise named from e
        bucket.unpack(compression.decompress(out, ctx))
    return wait
