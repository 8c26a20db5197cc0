"""DistributedOptimizer: wraps a torch optimizer so that every gradient is averaged over all
ranks before the step. A hook on each parameter's gradient accumulator hands the gradient to
Chorus the moment backward produced it (so communication overlaps the rest of backward), in one
call with those that come out together (a layer's weight and bias); small gradients go in
buckets, one operation per bucket once all of its gradients exist (chorus/torch/buckets.py);
step() waits only for what is still in flight."""

import operator
import time
import warnings
import weakref
from contextlib import contextmanager

import torch

from chorus.common.process_sets import _check as _check_process_set
from chorus.common.process_sets import global_process_set
from chorus.torch import basics as _basics
from chorus.torch.buckets import MAX_BUCKET_BYTES, Bucket, _nbytes, bucket_bytes_from_env, make_buckets
from chorus.torch.compression import Compression, runtime_code
from chorus.torch.mpi_ops import Adasum, Average
from chorus.torch.mpi_ops import _chorus_op, _lib, _op_name, _scale_, _stream_of
from chorus.torch.mpi_ops import _grouped_allreduce_async, allgather, broadcast_, sparse_allreduce_async
from chorus.torch.mpi_ops import rank, size, synchronize


def _split(items, n):
    """`items` cut into `n` contiguous groups of near-equal length."""
    q, r = divmod(len(items), n)
    out, start = [], 0
    for i in range(n):
        end = start + q + (1 if i < r else 0)
        if end > start:
            out.append(items[start:end])
        start = end
    return out


# DistributedOptimizers made in this process. Two optimizers (say two models with the same
# parameter names) can have their gradients' allreduces in flight at the same time, and a name
# still pending on a rank cannot be submitted again (that raises), so every optimizer after the
# first prefixes its names with "opt<k>.". Every rank builds its optimizers in the same order,
# so the names agree.
_instances = [0]

# Gradients that become ready together (a layer's weight and bias come from one autograd node,
# back to back) are handed to Chorus in one call, so they share a negotiation cycle and a fused
# buffer instead of waking the runtime once each. Which ones: a gradient is held when, in the
# last backward pass, the next hook started within _TOGETHER_S of the end of its own. A held
# gradient waits at most until the next hook, or the end of backward.
_TOGETHER_S = 0.001


class _Refused:
    """An operation the runtime refused when it was submitted (inside backward, e.g. a name a
    peer announced with another shape): waiting for it raises the refusal, so that the error
    comes out of synchronize() like any other, not out of the middle of backward."""

    def __init__(self, error):
        self.error = error

    def wait(self):
        raise self.error

    result = wait


_NAN_CHECK_CODES = {None: -1, "off": 0, "error": 1, "skip": 2}


def _submit(tensor, name, op, wire=-1, check=-1, ps=0):
    try:
        return _lib.allreduce_async(tensor, name, op, stream=_stream_of(tensor), compression=wire, nan_check=check,
                                    process_set=ps)
    except Exception as e:  # noqa: BLE001 - raised by synchronize()
        return _Refused(e)


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


class _DistributedOptimizer(torch.optim.Optimizer):
    _chorus_distributed = True

    def __init__(self, params, named_parameters, compression, backward_passes_per_step=1, op=Average,
                 gradient_predivide_factor=1.0, groups=None, sparse_as_dense=False, nan_check=None,
                 process_set=global_process_set):
        super(self.__class__, self).__init__(params)
        self._compression = compression
        # Gradients are averaged among the set's members only; a rank outside the set steps on
        # its own gradients (Horovod's DistributedOptimizer(process_set=...)).
        self._process_set = process_set
        self._ps = _check_process_set(process_set)
        self._included = self._ps == 0 or bool(process_set.included())
        if nan_check not in _NAN_CHECK_CODES:
            raise ValueError("nan_check should be None (CHORUS_NAN_CHECK), 'off', 'error' or 'skip', got %r"
                             % (nan_check,))
        self._nan_check = _NAN_CHECK_CODES[nan_check]
        self._nonfinite = {}        # this step: operation name -> ranks that held NaN/Inf (skip mode)
        self.skipped_steps = 0      # steps skipped on every rank because a gradient was not finite
        all_params = [p for g in self.param_groups for p in g["params"]]
        if named_parameters is not None:
            named_parameters = list(named_parameters)
        else:
            named_parameters = [("allreduce.noname.%s" % i, p) for i, p in enumerate(all_params)]
        if any(not isinstance(p, tuple) for p in named_parameters):
            raise ValueError("named_parameters should be a sequence of tuples (name, parameter), usually "
                             "produced by model.named_parameters().")
        names = [n for n, _ in named_parameters]
        dups = sorted({n for n in names if names.count(n) > 1})
        if dups:
            raise ValueError("Parameter names in named_parameters must be unique. Found duplicates: %s"
                             % ", ".join(dups))
        named_ids = {id(p) for _, p in named_parameters}
        unnamed = [id(p) for p in all_params if id(p) not in named_ids]
        if unnamed:
            raise ValueError("named_parameters was specified, but one or more model parameters were not "
                             "named. Python object ids: %s" % ", ".join(str(i) for i in unnamed))

        prefix = "opt%d." % _instances[0] if _instances[0] else ""
        _instances[0] += 1
        self._parameter_names = {p: prefix + n for n, p in sorted(named_parameters, key=lambda x: x[0])}
        self.backward_passes_per_step = backward_passes_per_step
        self._allreduce_delay = {p: backward_passes_per_step for p in all_params}
        self.op = op
        self.gradient_predivide_factor = gradient_predivide_factor
        self.sparse_as_dense = sparse_as_dense
        self._densified = []        # this step: sparse gradients reduced as dense (sparse_as_dense)
        self._handles = {}          # parameter or tuple of parameters -> (handle, ctx)
        self._grad_accs = []
        self._requires_update = set()
        self._synchronized = False
        self._should_synchronize = True
        self._p_to_group = {}
        self._group_counts = {}
        self._held = []             # gradients waiting for the one expected right after them
        self._held_since = 0.0
        self._pass_order = []       # (parameter, hook start, hook end) in this backward pass
        self._hold_for_next = {}    # parameter -> its next gradient came within _TOGETHER_S last pass
        self._end_queued = False
        self._together_s = _TOGETHER_S
        self._buckets = []
        self._bucket_of = {}        # parameter -> its Bucket
        self._bucket_order = None   # parameters buckets are cut from, in backward's order; None: no buckets
        self._bucket_prefix = prefix
        self._bucket_cap = 0        # CHORUS_BUCKET_BYTES, or the last set_bucket_bytes()
        self._env_bucket_cap = 0    # CHORUS_BUCKET_BYTES: where an elastic reset starts again
        # Buckets only where a bucket's result equals its members' one by one: a compression
        # that works element by element (the built-in ones); explicit groups are never re-cut.
        elementwise = compression in (Compression.none, Compression.fp16, Compression.bf16)
        self._can_bucket = elementwise and not groups
        self._order_agreed = False  # _bucket_order is the order a step's backward produced (rank 0's)
        self._rebuild_pending = False  # the next synchronize() agrees the order and cuts again
        self._first_step = []       # parameters, in the order the first step with buckets produced them
        self._param_index = {p: i for i, p in enumerate(all_params)}
        if groups:
            for group in groups:
                group = tuple(group)
                for p in group:
                    self._p_to_group[p] = group
                self._group_counts[group] = 0
        # An elastic job that starts with one worker averages once others join (Horovod's
        # HOROVOD_ELASTIC rule): its hooks are there from the start, as on every worker.
        if (size() > 1 or _lib.elastic_round() >= 0) and self._included:
            self._register_hooks()
            if groups and elementwise:
                self._flatten_small_groups(prefix, bucket_bytes_from_env())
            elif self._can_bucket:
                params = [p for p in all_params if p.requires_grad][::-1]
                self._bucket_order = list(params)
                self._env_bucket_cap = bucket_bytes_from_env()
                self._cut_buckets(self._env_bucket_cap)
                self._recut_after_reinit(params)

    def _cut_buckets(self, cap):
        """Buckets of about `cap` bytes from _bucket_order. Until a step's backward order was
        agreed, the next synchronize() agrees it and cuts them again."""
        self._bucket_cap = cap
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

    # -- hooks ------------------------------------------------------------------------------

    def _register_hooks(self):
        for group in self.param_groups:
            for p in group["params"]:
                if p.requires_grad:
                    self._requires_update.add(p)
                    # The AccumulateGrad node of p: its hook runs right after p.grad was written.
                    acc = p.expand_as(p).grad_fn.next_functions[0][0]
                    acc.register_hook(self._make_hook(p))
                    self._grad_accs.append(acc)

    def _make_hook(self, p):
        def hook(*ignore):
            already = (p in self._bucket_of) or (p in self._handles and self._handles[p][0] is not None)
            if already and self._allreduce_delay[p] <= 0:
                raise AssertionError("Gradients were computed more than backward_passes_per_step times "
                                     "before call to step(). Increase backward_passes_per_step to "
                                     "accumulate gradients locally.")
            assert not p.grad.requires_grad
            self._allreduce_delay[p] -= 1
            handle, ctx = None, None
            if self._allreduce_delay[p] == 0:
                group = self._p_to_group.get(p)
                if group is not None:
                    self._group_counts[group] += 1
                    if self._group_counts[group] == len(group):
                        self._handles[group] = self._grouped_allreduce_grad_async(group)
                        for gp in group:
                            self._handles.pop(gp, None)
                        self._group_counts[group] = 0
                        return
                else:
                    self._ready(p)
                    return
            self._handles[p] = (handle, ctx)
        return hook

    def _ready(self, p):
        """p's gradient is final for this step: submit it (or its bucket, once all of the
        bucket's gradients are), together with those held for it, or hold it when last pass its
        successor came right after it."""
        if not self._end_queued:
            self._end_queued = True
            torch.autograd.Variable._execution_engine.queue_callback(self._end_of_backward)
        if p.grad.is_sparse and self.sparse_as_dense:
            # Reduced as a dense tensor (in its bucket, if any), made sparse again once reduced
            # (Horovod: a sparse optimizer such as SparseAdam still gets a sparse gradient).
            p.grad = p.grad.to_dense()
            self._densified.append(p)
        if self._rebuild_pending:
            self._first_step.append(p)
        bucket = self._bucket_of.get(p)
        if bucket is not None:
            if p.grad.is_sparse and not self.sparse_as_dense:
                self._unbucket(p)  # p goes on alone, below
            else:
                bucket.ready += 1
                if bucket.ready < len(bucket.params):
                    return
                for q in bucket.params:  # placeholders of earlier backward passes
                    self._handles.pop(q, None)
                p = bucket
        now = time.perf_counter()
        if self._held and now - self._held_since > self._together_s:
            self._submit_held()  # the expected partner is late: do not wait for it
        if not self._held:
            self._held_since = now
        self._held.append(p)
        if not self._hold_for_next.get(p, False):
            self._submit_held()
        # When this hook ended: the gap to the next one leaves out this hook's own submit
        # (which would otherwise keep a pair from ever looking "together" on a slow host).
        self._pass_order.append((p, now, time.perf_counter()))

    def _end_of_backward(self):
        self._submit_held()
        order = self._pass_order
        self._hold_for_next = {a: b_start - a_end < self._together_s
                               for (a, _, a_end), (_, b_start, _) in zip(order, order[1:])}
        self._pass_order = []
        self._end_queued = False

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

    def _submit_held(self):
        held, self._held = self._held, []
        items = []  # parameters and buckets, reduced as dense tensors
        for x in held:
            if not isinstance(x, Bucket) and x.grad.is_sparse and not self.sparse_as_dense:
                self._handles[x] = self._allreduce_grad_async(x)
            else:
                items.append(x)
        if len(items) == 1 and not isinstance(items[0], Bucket):
            self._handles[items[0]] = self._allreduce_grad_async(items[0])
            return
        if not items:
            return
        pre, post = self._scale_factors()
        names, raw = [], []
        for x in items:
            if isinstance(x, Bucket):
                raw.append(x.pack())
                names.append(_op_name("allreduce", x.name, None))
            else:
                if x.grad.is_sparse:
                    x.grad = x.grad.to_dense()
                raw.append(x.grad)
                names.append(_op_name("allreduce", self._parameter_names.get(x), None))
        # Compression.fp16/bf16 on the wire when the runtime can do it for every tensor of the
        # call (float32/float64 CPU), else cast here as Horovod does.
        codes = {runtime_code(self._compression, t) for t in raw}
        wire = codes.pop() if len(codes) == 1 and None not in codes else None
        tensors, ctxs = [], []
        for t in raw:
            compressed, ctx = (t, None) if wire is not None else self._compression.compress(t)
            _scale_(compressed, pre)
            tensors.append(compressed)
            ctxs.append(ctx)
        op = _chorus_op(self.op)
        code = -1 if wire is None else wire
        if len(items) == 1:
            subs = [_submit(tensors[0], names[0], op, code, self._nan_check, self._ps)]
        else:
            try:
                subs = _lib.allreduce_async_all(tensors, names, op, stream=_stream_of(tensors[0]), compression=code,
                                                nan_check=self._nan_check, process_set=self._ps)
            except Exception as e:  # noqa: BLE001 - raised by synchronize()
                subs = [_Refused(e)] * len(items)
        for x, sub, ctx in zip(items, subs, ctxs):
            if isinstance(x, Bucket):
                self._handles[x] = (_bucket_waiter(sub, post, x, ctx, self._compression, self._parameter_names,
                                                   self._note_nonfinite), None)
            else:
                self._handles[x] = (_waiter(sub, post, self._note_nonfinite), ctx)

    def _note_nonfinite(self, name, ranks):
        self._nonfinite[name] = list(ranks)

    def _scale_factors(self):
        if self.op == Average:
            # Chorus divides by size() for Average; predivide splits that around the sum.
            return 1.0 / self.gradient_predivide_factor, self.gradient_predivide_factor
        return 1.0, 1.0

    def _allreduce_grad_async(self, p):
        name = self._parameter_names.get(p)
        if p.grad.is_sparse:
            if self.sparse_as_dense:
                p.grad = p.grad.to_dense()
            else:
                return sparse_allreduce_async(p.grad, name=name, op=self.op, process_set=self._process_set), None
        # The hook runs inside backward, on the training thread, once per gradient: it submits
        # straight to the runtime (no handle table, no generator) and returns a callable that
        # waits, which synchronize() accepts as a handle. Same name and op as allreduce_async_.
        wire = runtime_code(self._compression, p.grad)
        compressed, ctx = (p.grad, None) if wire is not None else self._compression.compress(p.grad)
        pre, post = self._scale_factors()
        _scale_(compressed, pre)
        sub = _submit(compressed, _op_name("allreduce", name, None), _chorus_op(self.op),
                      -1 if wire is None else wire, self._nan_check, self._ps)
        return _waiter(sub, post, self._note_nonfinite), ctx

    def _grouped_allreduce_grad_async(self, group):
        for p in group:
            if p.grad.is_sparse:
                p.grad = p.grad.to_dense()
        # Compression.fp16/bf16 on the wire, as for single gradients and buckets, when the
        # runtime can do it for every member (float32/float64 CPU); else cast here as Horovod does.
        codes = {runtime_code(self._compression, p.grad) for p in group}
        wire = codes.pop() if len(codes) == 1 and None not in codes else None
        if wire is not None:
            compressed, ctxs = [p.grad for p in group], [None] * len(group)
        else:
            compressed, ctxs = zip(*[self._compression.compress(p.grad) for p in group])
        pre, post = self._scale_factors()
        handle = _grouped_allreduce_async(list(compressed), list(compressed), self._parameter_names.get(group[0]),
                                          self.op, pre, post, self._process_set,
                                          wire=-1 if wire is None else wire, nan_check=self._nan_check,
                                          sink=self._note_nonfinite)
        return handle, ctxs

    # -- synchronize and step -----------------------------------------------------------------

    def _apply(self, p, output, ctx):
        result = self._compression.decompress(output, ctx)
        if result is not p.grad:
            if p.grad.is_sparse:
                p.grad = result
            else:
                p.grad.copy_(result)

    def synchronize(self):
        """Waits until every gradient was averaged over all ranks (enqueueing those backward did
        not produce: parameters without a gradient this step still take part)."""
        if not self._included:  # outside the optimizer's process set: nothing to average
            self._synchronized = True
            return
        if self._end_queued:  # backward ended without its callback (it raised): end it here
            self._end_of_backward()
        self._submit_held()
        # A group whose members did not all produce a gradient is enqueued now, whole (members
        # without one send zeros), under the same name as on a rank where it completed; and
        # every group's count starts again at zero, so the next step's backward enqueues it
        # when all of its gradients are ready, not when leftovers of this step add up.
        for group in self._group_counts:
            if group not in self._handles:
                for p in group:
                    if p.grad is None:
                        p.grad = torch.zeros_like(p)
                    self._handles.pop(p, None)
                self._handles[group] = self._grouped_allreduce_grad_async(group)
            self._group_counts[group] = 0
        # Likewise a bucket not complete on this rank (some members without a gradient, or not
        # at their last backward pass): reduced whole now, zeros for gradients that do not exist.
        for bucket in self._buckets:
            if bucket not in self._handles:
                for p in bucket.params:
                    if p.grad is None:
                        p.grad = torch.zeros_like(p)
                    self._handles.pop(p, None)
                self._held.append(bucket)
            bucket.ready = 0
        self._submit_held()
        done = set()
        for key in self._handles:
            if isinstance(key, Bucket):
                done.update(key.params)
            else:
                done.update(key) if isinstance(key, tuple) else done.add(key)
        for p in self._requires_update - done:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            self._handles[p] = self._allreduce_grad_async(p)
        for key, (handle, ctx) in list(self._handles.items()):
            if handle is None:
                self._handles[key] = self._allreduce_grad_async(key)
        # Every handle is waited for even after one failed (no gradient may be released while
        # the runtime still writes it); the first error is raised once all ended, and the
        # optimizer is left ready for the next backward.
        error = None
        for key, (handle, ctx) in self._handles.items():
            members = key.params if isinstance(key, Bucket) else key if isinstance(key, tuple) else (key,)
            for gp in members:
                self._allreduce_delay[gp] = self.backward_passes_per_step
            try:
                if isinstance(key, Bucket):
                    handle()  # unpacks into the members' gradients
                elif isinstance(key, tuple):
                    for gp, out, gctx in zip(key, synchronize(handle), ctx):
                        self._apply(gp, out, gctx)
                else:
                    self._apply(key, handle() if callable(handle) else synchronize(handle), ctx)
            except Exception as e:  # noqa: BLE001 - re-raised below, after the others ended
                error = error or e
        self._handles.clear()
        densified, self._densified = self._densified, []
        for p in densified:
            if p.grad is not None and not p.grad.is_sparse:
                p.grad = p.grad.to_sparse()
        if error is not None:
            raise error
        if self._rebuild_pending:
            self._rebuild_buckets()
        self._synchronized = True

    @contextmanager
    def skip_synchronize(self):
        """Inside this context step() does not synchronize: call synchronize() yourself first
        (e.g. to clip the averaged gradients)."""
        self._should_synchronize = False
        try:
            yield
        finally:
            self._should_synchronize = True

    def step(self, closure=None):
        if self._should_synchronize:
            if self._synchronized:
                warnings.warn("optimizer.step() called without optimizer.skip_synchronize() context after "
                              "optimizer.synchronize(). This can cause training slowdown. You may want to "
                              "consider using optimizer.skip_synchronize() context if you use "
                              "optimizer.synchronize() in your code.")
            self.synchronize()
        self._synchronized = False
        if self._nonfinite:
            # The NaN check in skip mode: every rank got the same ranks for every operation (they
            # were ORed inside the collective), so every rank skips this same step.
            found, self._nonfinite = self._nonfinite, {}
            self.skipped_steps += 1
            if rank() == 0:
                warnings.warn("chorus: optimizer step skipped on every rank: NaN/Inf in %s"
                              % "; ".join("%s on rank(s) %s" % (n, ",".join(map(str, r)))
                                          for n, r in sorted(found.items())))
            return None
        return super(self.__class__, self).step(closure)

    def zero_grad(self, *args, **kwargs):
        if self._handles:
            raise AssertionError("optimizer.zero_grad() was called after loss.backward() but before "
                                 "optimizer.step() or optimizer.synchronize(). This is prohibited as it can "
                                 "cause a race condition.")
        return super(self.__class__, self).zero_grad(*args, **kwargs)

    def load_state_dict(self, *args, **kwargs):
        self._handles = {}
        self._synchronized = False
        self._should_synchronize = True
        for group in self._group_counts:
            self._group_counts[group] = 0
        for bucket in self._buckets:
            bucket.ready = 0
        for p in self._allreduce_delay:
            self._allreduce_delay[p] = self.backward_passes_per_step
        super(self.__class__, self).load_state_dict(*args, **kwargs)

    def set_backward_passes_per_step(self, passes):
        self.backward_passes_per_step = passes
        for p in self._allreduce_delay:
            self._allreduce_delay[p] = passes


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none,
                         backward_passes_per_step=1, op=Average, gradient_predivide_factor=1.0,
                         num_groups=0, groups=None, sparse_as_dense=False, process_set=global_process_set,
                         nan_check=None):
    """Wraps `optimizer` (any torch.optim.Optimizer) so that gradients are averaged (op=Average)
    or summed (op=Sum) over all ranks before each step.

    named_parameters: ``model.named_parameters()``, naming each gradient's allreduce (without
        it, gradients are named by position, as in Horovod);
    compression: Compression.none, .fp16 or .bf16 on the wire;
    backward_passes_per_step: backward passes accumulated locally between steps;
    gradient_predivide_factor: with op=Average, divide by this before the sum and by
        size()/factor after it;
    num_groups / groups: reduce gradients in groups (num_groups contiguous groups of the
        parameters, or explicit lists of parameters); each group is enqueued once all of its
        gradients are ready;
    sparse_as_dense: reduce sparse gradients as dense tensors;
    process_set: average gradients among this process set's members only (a rank outside it
        steps on its own gradients);
    nan_check: None (CHORUS_NAN_CHECK), "off", "error" (a NaN/Inf gradient raises on every rank,
        naming tensors and ranks) or "skip" (step() skips the wrapped optimizer's step on every
        rank together and rank 0 warns once which tensors and ranks; skipped_steps counts them)."""
    _check_process_set(process_set)
    if op == Adasum:
        raise NotImplementedError("DistributedOptimizer(op=hvd.Adasum) is not supported by Chorus; use "
                                  "hvd.Average or hvd.Sum")
    if gradient_predivide_factor != 1.0 and op != Average:
        raise ValueError("gradient_predivide_factor not supported with op != Average")
    if num_groups != 0 and groups is not None:
        raise ValueError("Parameter num_groups and groups cannot be set at the same time")
    if num_groups != 0:
        if not isinstance(num_groups, int) or num_groups < 0:
            raise ValueError("num_groups should be a non-negative integer, got %r" % (num_groups,))
        params = [p for g in optimizer.param_groups for p in g["params"] if p.requires_grad]
        groups = _split(params, min(num_groups, max(len(params), 1)))
    elif groups is not None:
        if not isinstance(groups, list) or not all(isinstance(g, list) for g in groups):
            raise ValueError("groups should be a list of lists of parameters")
        seen = set()
        for g in groups:
            for p in g:
                if not isinstance(p, torch.Tensor):
                    raise ValueError("groups must consist of torch.Tensor (parameters)")
                if id(p) in seen:
                    raise ValueError("a parameter appears in more than one group")
                seen.add(id(p))
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,), dict(_DistributedOptimizer.__dict__))
    return cls(optimizer.param_groups, named_parameters, compression, backward_passes_per_step, op,
               gradient_predivide_factor, groups, sparse_as_dense, nan_check, process_set)
