"""Gradient buckets for DistributedOptimizer: small gradients are reduced as one flat tensor
per bucket (as DDP does), not one Chorus operation each.

Each operation costs the runtime the same few actor messages and wake-ups whatever its size,
and on a host where the trainers use every core that CPU time is taken from training. A
bucket packs the gradients of several small parameters into one preallocated buffer, is
reduced as one operation and is unpacked into the gradients by synchronize().

Buckets are first built from the parameters in reverse registration order (the order
backward usually produces their gradients), by dtype, closing a bucket when it holds
CHORUS_BUCKET_BYTES (default 1 MiB) or more. A parameter that alone reaches that size is not
bucketed: the runtime reduces large tensors in place. Every rank builds the same buckets from
the same model, so a bucket's name and size agree everywhere. After the first step they are
built once more, from the order in which that step's backward pass actually produced the
gradients (rank 0's, broadcast, so that every rank builds the same ones), as DDP does: a model
that registers its layers in another order than it uses them would otherwise get buckets that
complete late. CHORUS_BUCKET_BYTES=0 turns buckets off: every gradient is its own operation,
as in Horovod. DistributedOptimizer.set_bucket_bytes cuts them again, between steps, at
another size."""


import torch

DEFAULT_BUCKET_BYTES = 1 << 20  # runtime/config/variables.cpp: CHORUS_BUCKET_BYTES
MAX_BUCKET_BYTES = 1 << 34


def bucket_bytes_from_env():
    """CHORUS_BUCKET_BYTES, or the default, as the runtime's reader reads it (runtime/config: its
    table, its checks; a bad value raises ChorusArgumentError, a ValueError, naming it)."""
    from chorus import _chorus_torch as _lib
    return _lib.read_variable("CHORUS_BUCKET_BYTES")


def _nbytes(p):
    return p.numel() * p.element_size()


class Bucket:
    """Parameters whose gradients are reduced together, as one flat tensor named `name`."""

    def __init__(self, name, params):
        self.name = name
        self.params = list(params)
        self.ready = 0  # members whose gradient is final for this step
        self._alloc()

    def _alloc(self):
        # Zero-filled now, so that its pages are touched before training, not mid-backward.
        self.flat = torch.zeros(sum(p.numel() for p in self.params), dtype=self.params[0].dtype,
                                device=self.params[0].device)

    def pack(self):
        """The members' gradients, copied into the flat buffer; returns it."""
        torch.cat([p.grad.reshape(-1) for p in self.params], out=self.flat)
        return self.flat

    def unpack(self, flat):
        """Copies the reduced flat tensor back into the members' gradients."""
        offset = 0
        for p in self.params:
            n = p.numel()
            p.grad.copy_(flat[offset:offset + n].view_as(p.grad))
            offset += n

    def remove(self, p):
        """Takes `p` out for good (its gradient turned out sparse)."""
        self.params = [q for q in self.params if q is not p]
        if self.params:
            self._alloc()

    def describe(self, names):
        """'a [2, 5], b [2]': the members and their shapes on this rank."""
        return ", ".join("%s %s" % (names.get(p, "?"), list(p.shape)) for p in self.params)


def make_buckets(params, names, prefix, cap):
    """Buckets of `params` (in the order backward is expected to produce their gradients;
    named by `names`, a dict), at most about `cap` bytes each; parameters left alone are not in
    any bucket. Names are "<prefix>bucket<k>.<first member>", with the member's name as given
    by the user."""
    if cap <= 0:
        return []
    groups, open_by_dtype = [], {}  # (dtype, device) -> [members, bytes so far]
    for p in params:
        size = _nbytes(p)
        if size >= cap:
            continue
        open_bucket = open_by_dtype.setdefault((p.dtype, p.device), [[], 0])
        open_bucket[0].append(p)
        open_bucket[1] += size
        if open_bucket[1] >= cap:
            groups.append(open_by_dtype.pop((p.dtype, p.device))[0])
    groups.extend(members for members, _ in open_by_dtype.values())
    groups = [g for g in groups if len(g) > 1]
    return [Bucket("%sbucket%d.%s" % (prefix, k, names[g[0]][len(prefix):]), g) for k, g in enumerate(groups)]
