"""DistributedOptimizer: wraps a torch optimizer so that every gradient is averaged over all
ranks before the step. A hook on each parameter's gradient accumulator hands the gradient to
Chorus the moment backward produced it (so communication overlaps the rest of backward), in one
call with those that come out together (a layer's weight and bias); small gradients go in
buckets, one operation per bucket once all of its gradients exist (chorus/torch/buckets.py);
step() waits only for what is still in flight. The bucket methods are in optimizer_buckets.py,
synchronize() and step() in optimizer_step.py, the handles they wait on in optimizer_handles.py."""

import time

import torch

from chorus.common.process_sets import _check as _check_process_set
from chorus.common.process_sets import global_process_set
from chorus.torch.buckets import Bucket, bucket_bytes_from_env
from chorus.torch.compression import Compression, runtime_code
from chorus.torch.mpi_ops import Adasum, Average
from chorus.torch.mpi_ops import _chorus_op, _lib, _op_name, _scale_, _stream_of
from chorus.torch.mpi_ops import _grouped_allreduce_async, sparse_allreduce_async, size
from chorus.torch.optimizer_buckets import _GradientBuckets
from chorus.torch.optimizer_handles import _Refused, _bucket_waiter, _waiter
from chorus.torch.optimizer_overlap import _Overlap, overlap_refusal
from chorus.torch.optimizer_step import _SynchronizeAndStep


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


_NAN_CHECK_CODES = {None: -1, "off": 0, "error": 1, "skip": 2}


def _submit(tensor, name, op, wire=-1, check=-1, ps=0, priority=0):
    try:
        return _lib.allreduce_async(tensor, name, op, stream=_stream_of(tensor), compression=wire, nan_check=check,
                                    process_set=ps, priority=priority)
    except Exception as e:  # noqa: BLE001 - raised by synchronize()
        return _Refused(e)


class _DistributedOptimizer(_GradientBuckets, _SynchronizeAndStep, _Overlap, torch.optim.Optimizer):
    _chorus_distributed = True

    def __init__(self, params, named_parameters, compression, backward_passes_per_step=1, op=Average,
                 gradient_predivide_factor=1.0, groups=None, sparse_as_dense=False, nan_check=None,
                 process_set=global_process_set, overlap=False):
        super(self.__class__, self).__init__(params)
        self._overlap = False  # set below, once the hooks exist
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
        # Priority (CHORUS_PRIORITY): the runtime sends larger first, and the next forward pass
        # needs the first layers first. Until a step's backward order is agreed, the
        # registration order stands for the forward order (first registered: largest); then a
        # gradient's place in the agreed backward order (produced last: largest).
        self._priority = {p: len(all_params) - i for i, p in enumerate(all_params)}
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
            if overlap:
                self._overlap = True
                self._start_overlap()

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
        priorities = [self._priority_of(x) for x in items]
        if len(items) == 1:
            subs = [_submit(tensors[0], names[0], op, code, self._nan_check, self._ps, priorities[0])]
        else:
            try:
                subs = _lib.allreduce_async_all(tensors, names, op, stream=_stream_of(tensors[0]), compression=code,
                                                nan_check=self._nan_check, process_set=self._ps,
                                                priorities=priorities)
            except Exception as e:  # noqa: BLE001 - raised by synchronize()
                subs = [_Refused(e)] * len(items)
        for x, sub, ctx in zip(items, subs, ctxs):
            if isinstance(x, Bucket):
                self._handles[x] = (_bucket_waiter(sub, post, x, ctx, self._compression, self._parameter_names,
                                                   self._note_nonfinite), None)
            else:
                self._handles[x] = (_waiter(sub, post, self._note_nonfinite), ctx)

    def _priority_of(self, x):
        """A gradient's priority, or a bucket's: the largest of its members'."""
        if isinstance(x, Bucket):
            return max(self._priority.get(p, 0) for p in x.params)
        return self._priority.get(x, 0)

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
                      -1 if wire is None else wire, self._nan_check, self._ps, self._priority_of(p))
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


def _class_namespace():
    """What the class DistributedOptimizer() makes holds: _DistributedOptimizer's attributes and
    its mixins' (less the mixins' own __dict__ and __weakref__ descriptors)."""
    namespace = {}
    for klass in (_GradientBuckets, _SynchronizeAndStep, _Overlap, _DistributedOptimizer):
        namespace.update((k, v) for k, v in vars(klass).items() if k not in ("__dict__", "__weakref__"))
    return namespace


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none,
                         backward_passes_per_step=1, op=Average, gradient_predivide_factor=1.0,
                         num_groups=0, groups=None, sparse_as_dense=False, process_set=global_process_set,
                         nan_check=None, overlap=None):
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
        rank together and rank 0 warns once which tensors and ranks; skipped_steps counts them);
    overlap: None (CHORUS_OVERLAP=1 turns it on), True or False: step() does not wait for every
        gradient; each bucket's parameters are updated when the next forward pass (or backward,
        or a state_dict()) first needs them, giving the synchronous step's parameters bit for
        bit (optimizer_overlap.py; what it refuses raises ValueError here)."""
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
    if overlap is None:
        overlap = _lib.read_variable("CHORUS_OVERLAP") == "1"
    if overlap:
        why = overlap_refusal(optimizer.__class__, groups, backward_passes_per_step, nan_check)
        if why:
            raise ValueError(why)
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,), _class_namespace())
    return cls(optimizer.param_groups, named_parameters, compression, backward_passes_per_step, op,
               gradient_predivide_factor, groups, sparse_as_dense, nan_check, process_set, overlap)
