"""DistributedOptimizer's gradient buckets (optimizer.py; a Bucket itself: buckets.py): cutting
them from the backward order, agreeing that order across ranks, set_bucket_bytes(), and what an
elastic reset or a sparse gradient changes."""

import operator
import weakref

import torch

from chorus.torch import basics as _basics
from chorus.torch.buckets import MAX_BUCKET_BYTES, Bucket, _nbytes, make_buckets
from chorus.torch.mpi_ops import allgather, broadcast_, size


class _GradientBuckets:
    """The bucket methods of _DistributedOptimizer (optimizer.py), which holds their state."""

    def _cut_buckets(self, cap):
        """Buckets of about `cap` bytes from _bucket_order. Until a step's backward order was
        agreed, the next synchronize() agrees it and cuts them again."""
        self._bucket_cap = cap
        # Priorities follow this order (optimizer.py): produced last in backward, sent first.
        self._priority = {p: i + 1 for i, p in enumerate(self._bucket_order)}
        self._set_buckets(make_buckets(self._bucket_order, self._parameter_names, self._bucket_prefix, cap))
        self._rebuild_pending = bool(self._buckets) and not self._order_agreed
        self._first_step = []

    def _recut_after_reinit(self, params):
        """Every init() after the first (an elastic reset, or shutdown() and init()) starts the
        buckets over from CHORUS_BUCKET_BYTES and the registration order, as a worker that joins
        an elastic job cuts them; the next step agrees on their order again on every rank of the
        new job. A size set by set_bucket_bytes() must be set again after a reset."""
        me = weakref.ref(self)

        def again():
            opt = me()
            if opt is not None:
                opt._handles = {}  # operations of the old job: all ended when it shut down
                if opt._overlap:
                    opt._pending.clear()
                    opt._pending_key.clear()
                opt._bucket_order = list(params)
                opt._order_agreed = False
                opt._cut_buckets(opt._env_bucket_cap)

        _basics._reset_hooks.append(again)

    def set_bucket_bytes(self, cap):
        """Cuts the gradient buckets again at about `cap` bytes (0: no buckets, every gradient
        is its own operation), from the next backward pass on: for instance to follow the
        autotuner's fusion threshold, ``opt.set_bucket_bytes(settings()["fusion_threshold"] // 4)``
        every few hundred steps (buckets as large as the threshold overlap less with backward;
        docs/autotune.md). Returns the size in force.

        Collective over the optimizer's process set: every member calls it at the same step,
        after step() (or synchronize()) and before the next backward. The set's lowest rank's
        `cap` is used on every rank (one small allgather), so ranks that read different values
        still cut the same buckets; a value that is not a size raises ValueError on every rank.
        An optimizer with explicit `groups`, or with a compression that does not work element by
        element, has no buckets to cut: ValueError. An elastic reset (or shutdown() and init())
        starts again from CHORUS_BUCKET_BYTES."""
        try:
            value = -1 if isinstance(cap, bool) else operator.index(cap)
        except TypeError:
            value = -1
        valid = 0 <= value <= MAX_BUCKET_BYTES
        expected = "set_bucket_bytes: expected a whole number of bytes in [0, %d]" % MAX_BUCKET_BYTES
        if not self._can_bucket:
            raise ValueError("set_bucket_bytes: this optimizer has no gradient buckets (it was built with "
                             "explicit groups, or with a compression that does not work element by element)")
        if self._handles or self._held or self._end_queued or any(b.ready for b in self._buckets):
            raise AssertionError("set_bucket_bytes() was called after loss.backward() but before "
                                 "optimizer.step() or optimizer.synchronize(): call it between steps.")
        if self._bucket_order is None:  # one process, or outside the set: nothing is reduced here
            if not valid:
                raise ValueError("%s, got %r" % (expected, cap))
            return value
        # Every rank learns every rank's value, so that a bad one raises on all of them alike.
        values = allgather(torch.tensor([value if valid else -1], dtype=torch.int64),
                           name=self._bucket_prefix + "bucket_bytes", process_set=self._process_set).tolist()
        members = range(size()) if self._ps == 0 else sorted(self._process_set.ranks)
        bad = [str(r) for r, v in zip(members, values) if v < 0]
        if bad:
            raise ValueError("%s on every rank; rank(s) %s passed something else%s"
                             % (expected, ",".join(bad), "" if valid else " (here %r)" % (cap,)))
        if values[0] != self._bucket_cap:
            self._cut_buckets(values[0])
        return values[0]

    def _flatten_small_groups(self, prefix, cap):
        """Explicit groups whose members share a dtype and are each under `cap` bytes become
        flat buckets: one operation per group instead of one per member, the same result. A
        group with a large member stays a grouped operation (packing it would copy the large
        gradient twice a step); the user's groups are kept as they are, never re-cut."""
        if cap <= 0:
            return
        flat = [g for g in self._group_counts
                if len(g) > 1 and len({p.dtype for p in g}) == 1 and all(_nbytes(p) < cap for p in g)]
        for g in flat:
            del self._group_counts[g]
            for p in g:
                del self._p_to_group[p]
        self._set_buckets([Bucket("%sgroup%d.%s" % (prefix, k, self._parameter_names[g[0]][len(prefix):]), g)
                           for k, g in enumerate(flat)])

    def _set_buckets(self, buckets):
        self._buckets = buckets
        self._bucket_of = {p: b for b in buckets for p in b.params}

    def _rebuild_buckets(self):
        """After the first step with buckets: the buckets again, from the order that step's
        backward produced the gradients in. The order of the set's lowest rank is broadcast (one
        small operation, once), so every rank cuts the same buckets; gradients the step did not
        produce keep their place after the others."""
        known, seen = set(self._bucket_order), set()
        order = [p for p in self._first_step if p in known and not (p in seen or seen.add(p))]
        order += [p for p in self._bucket_order if p not in seen]
        agreed = torch.tensor([self._param_index[p] for p in order], dtype=torch.int64)
        # Among the optimizer's set only (its other ranks never get here), from its lowest rank.
        root = 0 if self._ps == 0 else min(self._process_set.ranks)
        broadcast_(agreed, root_rank=root, name=self._bucket_prefix + "bucket_order", process_set=self._process_set)
        by_index = {i: p for p, i in self._param_index.items()}
        self._bucket_order = [by_index[i] for i in agreed.tolist()]
        self._order_agreed = True
        self._cut_buckets(self._bucket_cap)

    def _unbucket(self, p):
        """p's gradient is sparse: p leaves its bucket for good, to be reduced alone (sparse-ness
        belongs to the module, so every rank does the same). A bucket left with one member is
        dissolved. What p's leaving completes (the rest of the bucket, or its last member) is
        held, to go with p."""
        bucket = self._bucket_of.pop(p)
        bucket.remove(p)
        if self._bucket_order is not None:  # never in a bucket again
            self._bucket_order = [q for q in self._bucket_order if q is not p]
        if len(bucket.params) == 1:
            self._buckets = [b for b in self._buckets if b is not bucket]
            del self._bucket_of[bucket.params[0]]
            if bucket.ready:
                self._held.append(bucket.params[0])
        elif bucket.ready == len(bucket.params):
            self._held.append(bucket)
