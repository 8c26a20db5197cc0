"""The collectives of chorus.torch, with horovod.torch's names, arguments, defaults and return
values: allreduce, allgather, broadcast (each in place or not, sync or async, grouped),
sparse_allreduce_async, poll, synchronize, barrier (reducescatter and alltoall: scatter_ops.py;
the argument helpers they share: collective_args.py).

Every async call returns an integer handle; poll(handle) tells whether it ended and
synchronize(handle) waits (without the GIL) and returns the output. Contiguous CPU tensors go
to Chorus without a copy (in-place ops complete in the caller's tensor); a non-contiguous one
goes through one staging copy.

Names. Operations are named "<collective>.<name>", or "<collective>.noname.<handle>" when no
name is given (handles count up from 0 after init(), so ranks that issue the same calls agree
on the names, as in Horovod). Such a fresh name is used once: it is negotiated as transient, so
Chorus frees it once agreed and a loop of unnamed calls does not grow the negotiation state. As in Horovod, a name may come back with another spec (dtype,
shape, op, root) once its previous operation has ended; the ranks compare every operation's
spec, and a mismatch raises on every rank. A name still pending on this rank raises at once."""

import threading

import torch

from chorus import _chorus_torch as _lib
from chorus.common.exceptions import ChorusArgumentError, HorovodInternalError  # noqa: F401
from chorus.common.process_sets import _check as _check_process_set
from chorus.common.process_sets import global_process_set
from chorus.torch import basics as _basics
from chorus.torch.basics import _CHORUS_OP, Adasum, Average, Sum, size, rank  # noqa: F401 (Adasum: re-exported)
from chorus.torch.collective_args import (_chorus_op, _fresh_copy, _grad_name, _like, _op_name,
                                          _scale_, _stream_of, _to_host, _unnamed,
                                          handle_average_backwards_compatibility)
from chorus.torch.compression import Compression, runtime_code

_lock = threading.Lock()
_handle_map = {}      # handle -> _Pending
_next_handle = 0


class _Pending:
    """What synchronize() needs for one handle: the submitted ops (one, or one per tensor of a
    group) and finish(results, ops), which turns their results into the returned value."""
    __slots__ = ("ops", "finish")

    def __init__(self, ops, finish):
        self.ops = ops
        self.finish = finish


def _reset():
    global _next_handle
    with _lock:
        _handle_map.clear()
        _next_handle = 0


_basics._reset_hooks.append(_reset)


def _new_handle():
    global _next_handle
    with _lock:
        h = _next_handle
        _next_handle += 1
    return h


def _start(submit, finish):
    """Starts an async op and returns its handle: allocates the handle, submits the op's Chorus
    operations (submit(handle) yields them, one, or one per tensor of a group) and keeps them
    with finish(results, ops) for poll() and synchronize(). When a submit raises, the
    operations already submitted are waited for first, so that no tensor is released while
    Chorus still uses it."""
    handle = _new_handle()
    subs = []
    try:
        for sub in submit(handle):
            subs.append(sub)
    except BaseException:
        _wait_all(subs)
        raise
    with _lock:
        _handle_map[handle] = _Pending(subs, finish)
    return handle


# ---------------------------------------------------------------------------------- allreduce

def _allreduce_async(tensor, output, name, op, prescale_factor, postscale_factor, process_set, wire=-1):
    ps = _check_process_set(process_set)
    code = _chorus_op(op)

    def submit(handle):
        _scale_(output, prescale_factor)
        yield _lib.allreduce_async(output.detach(), _op_name("allreduce", name, handle), code,
                                   transient=_unnamed(name), stream=_stream_of(output), compression=wire,
                                   process_set=ps)

    def finish(results, ops):
        _scale_(output, postscale_factor)
        return output

    return _start(submit, finish)


def allreduce_async(tensor, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
                    process_set=global_process_set):
    """Starts averaging (or summing, ...) `tensor` over all ranks; `tensor` is not modified.
    Returns a handle for poll() and synchronize(), which returns the result."""
    op = handle_average_backwards_compatibility(op, average)
    return _allreduce_async(tensor, _fresh_copy(tensor), name, op, prescale_factor, postscale_factor,
                            process_set)


def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
                     process_set=global_process_set):
    """Starts reducing `tensor` over all ranks in place. Returns a handle."""
    op = handle_average_backwards_compatibility(op, average)
    return _allreduce_async(tensor, tensor, name, op, prescale_factor, postscale_factor, process_set)


class HorovodAllreduce(torch.autograd.Function):
    """allreduce as an autograd function: the gradient is allreduced the same way."""

    @staticmethod
    def forward(ctx, tensor, average, name, op, prescale_factor, postscale_factor, process_set, wire=-1):
        ctx.average, ctx.op, ctx.process_set, ctx.name = average, op, process_set, name
        ctx.prescale_factor, ctx.postscale_factor = prescale_factor, postscale_factor
        op = handle_average_backwards_compatibility(op, average)
        return synchronize(_allreduce_async(tensor, _fresh_copy(tensor), name, op, prescale_factor,
                                            postscale_factor, process_set, wire))

    @staticmethod
    def backward(ctx, grad_output):
        grad = allreduce(grad_output, average=ctx.average, name=_grad_name(ctx.name), op=ctx.op,
                         prescale_factor=ctx.prescale_factor,
                         postscale_factor=ctx.postscale_factor, process_set=ctx.process_set)
        return grad, None, None, None, None, None, None, None


def allreduce(tensor, average=None, name=None, compression=Compression.none, op=None, prescale_factor=1.0,
              postscale_factor=1.0, process_set=global_process_set):
    """Returns `tensor` averaged (op=Average, the default), summed, min'd, max'd or multiplied
    over all ranks; `tensor` is not modified. Differentiable. Compression.fp16/bf16 of a
    float32/float64 CPU tensor is done on the wire by the runtime (no cast here)."""
    wire = runtime_code(compression, tensor)
    if wire is not None:
        return HorovodAllreduce.apply(tensor, average, name, op, prescale_factor, postscale_factor, process_set,
                                      wire)
    compressed, ctx = compression.compress(tensor)
    reduced = HorovodAllreduce.apply(compressed, average, name, op, prescale_factor, postscale_factor,
                                     process_set)
    return compression.decompress(reduced, ctx)


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
               process_set=global_process_set):
    """Reduces `tensor` over all ranks in place and returns it."""
    return synchronize(allreduce_async_(tensor, average, name, op, prescale_factor, postscale_factor,
                                        process_set))


# -------------------------------------------------------------------------- grouped allreduce

def _grouped_allreduce_async(tensors, outputs, name, op, prescale_factor, postscale_factor, process_set,
                             wire=-1, nan_check=-1, sink=None):
    """`wire` / `nan_check`: runtime codes (-1: the job's default), for DistributedOptimizer's
    groups; `sink(name, ranks)` hears of members whose input held NaN/Inf on some rank."""
    ps = _check_process_set(process_set)
    code = _chorus_op(op)
    tensors, outputs = list(tensors), list(outputs)
    if not tensors:
        raise ValueError("grouped_allreduce: the list of tensors is empty")

    def submit(handle):
        for i, out in enumerate(outputs):
            _scale_(out, prescale_factor)
            member = "%s.%d" % (name, i) if name else "grouped.noname.%d.%d" % (handle, i)
            yield _lib.allreduce_async(out.detach(), _op_name("allreduce", member, handle), code,
                                       transient=_unnamed(name), stream=_stream_of(out), process_set=ps,
                                       compression=wire, nan_check=nan_check)

    def finish(results, ops):
        if sink is not None:
            for sub in ops:
                ranks = sub.nonfinite_ranks()
                if ranks:
                    sink(sub.name, ranks)
        for out in outputs:
            _scale_(out, postscale_factor)
        return outputs

    return _start(submit, finish)


def grouped_allreduce_async(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                            postscale_factor=1.0, process_set=global_process_set):
    """Starts reducing each tensor of the list (not modified); one handle for the group."""
    op = handle_average_backwards_compatibility(op, average)
    return _grouped_allreduce_async(tensors, [_fresh_copy(t) for t in tensors], name, op, prescale_factor,
                                    postscale_factor, process_set)


def grouped_allreduce_async_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                             postscale_factor=1.0, process_set=global_process_set):
    """Starts reducing each tensor of the list in place; one handle for the group."""
    op = handle_average_backwards_compatibility(op, average)
    return _grouped_allreduce_async(tensors, tensors, name, op, prescale_factor, postscale_factor, process_set)


class HorovodGroupedAllreduce(torch.autograd.Function):
    """grouped_allreduce as an autograd function."""

    @staticmethod
    def forward(ctx, average, name, op, prescale_factor, postscale_factor, process_set, *tensors):
        ctx.average, ctx.op, ctx.process_set = average, op, process_set
        ctx.prescale_factor, ctx.postscale_factor = prescale_factor, postscale_factor
        return tuple(synchronize(grouped_allreduce_async(list(tensors), average, name, op, prescale_factor,
                                                         postscale_factor, process_set)))

    @staticmethod
    def backward(ctx, *grad_output):
        grads = grouped_allreduce(list(grad_output), average=ctx.average, op=ctx.op,
                                  prescale_factor=ctx.prescale_factor, postscale_factor=ctx.postscale_factor,
                                  process_set=ctx.process_set)
        return (None, None, None, None, None, None, *grads)


def grouped_allreduce(tensors, average=None, name=None, compression=Compression.none, op=None,
                      prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set):
    """Returns the list of `tensors`, each reduced over all ranks. Differentiable."""
    compressed, ctxs = zip(*[compression.compress(t) for t in tensors])
    reduced = HorovodGroupedAllreduce.apply(average, name, op, prescale_factor, postscale_factor, process_set,
                                            *compressed)
    return [compression.decompress(t, c) for t, c in zip(reduced, ctxs)]


def grouped_allreduce_(tensors, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
                       process_set=global_process_set):
    """Reduces each tensor of the list in place; returns the list."""
    return synchronize(grouped_allreduce_async_(tensors, average, name, op, prescale_factor, postscale_factor,
                                                process_set))


def sparse_allreduce_async(tensor, name, op, process_set=global_process_set):
    """Reduces a sparse COO tensor by gathering every rank's indices and values (summing
    duplicates is left to torch, as in Horovod). Returns a callable that synchronize() (or a
    plain call) turns into the reduced sparse tensor."""
    _check_process_set(process_set)
    t = tensor.coalesce() if not tensor.is_coalesced() else tensor
    indices = allgather_async(t._indices().transpose(0, 1).contiguous(), name="%s.indices" % name,
                              process_set=process_set)
    values = allgather_async(t._values(), name="%s.values" % name, process_set=process_set)

    def handle():
        v = synchronize(values)
        i = synchronize(indices)
        if op == Average:
            v = v / (size() if process_set is None else process_set.size())
        if i.dim() == 0 or v.dim() == 0 or i.numel() == 0:
            return torch.sparse_coo_tensor(t._indices()[:, :0], t._values()[:0], t.size())
        return torch.sparse_coo_tensor(i.transpose(0, 1), v, t.size())

    return handle


# ---------------------------------------------------------------------------------- allgather

def _allgather_submit(tensor, name, handle, transient=None, ps=0):
    return _lib.allgather_async(_to_host(tensor), _op_name("allgather", name, handle),
                                transient=_unnamed(name) if transient is None else transient, process_set=ps)


def allgather_async(tensor, name=None, process_set=global_process_set):
    """Starts concatenating every rank's `tensor` along the first dimension (which may differ
    between ranks). Returns a handle; synchronize() returns the concatenation."""
    ps = _check_process_set(process_set)
    return _start(lambda handle: [_allgather_submit(tensor, name, handle, ps=ps)],
                  lambda results, ops: _like(results[0], tensor))


class HorovodAllgather(torch.autograd.Function):
    """allgather as an autograd function: the gradient of this rank's rows, averaged."""

    @staticmethod
    def forward(ctx, tensor, name, process_set):
        ctx.process_set = process_set
        ctx.name = name
        handle = allgather_async(tensor, name, process_set)
        ops = _handle_map[handle].ops
        out = synchronize(handle)
        ctx.first_dims = ops[0].first_dims()
        return out

    @staticmethod
    def backward(ctx, grad_output):
        grad = allreduce(grad_output, op=Average, name=_grad_name(ctx.name), process_set=ctx.process_set)
        # first_dims are the set's members' rows, in set order: this rank's place in the set.
        me = rank() if _check_process_set(ctx.process_set) == 0 else ctx.process_set.rank()
        offset = sum(ctx.first_dims[:me])
        return grad.narrow(0, offset, ctx.first_dims[me]), None, None


def allgather(tensor, name=None, process_set=global_process_set):
    """Returns every rank's `tensor` concatenated along the first dimension, in rank order.
    Differentiable."""
    return HorovodAllgather.apply(tensor, name, process_set)


def grouped_allgather_async(tensors, name=None, process_set=global_process_set):
    """Starts an allgather of each tensor of the list; one handle for the group."""
    ps = _check_process_set(process_set)
    tensors = list(tensors)
    if not tensors:
        raise ValueError("grouped_allgather: the list of tensors is empty")

    def submit(handle):
        base = name if name else "grouped.noname.%d" % handle
        for i, t in enumerate(tensors):
            yield _allgather_submit(t, "%s.%d" % (base, i), handle, transient=_unnamed(name), ps=ps)

    return _start(submit, lambda results, ops: [_like(r, t) for r, t in zip(results, tensors)])


class HorovodGroupedAllgather(torch.autograd.Function):
    """grouped_allgather as an autograd function: each tensor's gradient is its rows of the
    averaged gradient, as for allgather."""

    @staticmethod
    def forward(ctx, name, process_set, *tensors):
        ctx.process_set = process_set
        ctx.name = name
        handle = grouped_allgather_async(list(tensors), name, process_set)
        ops = _handle_map[handle].ops
        out = synchronize(handle)
        ctx.first_dims = [op.first_dims() for op in ops]
        return tuple(out)

    @staticmethod
    def backward(ctx, *grad_output):
        grads = grouped_allreduce(list(grad_output), op=Average, name=_grad_name(ctx.name),
                                  process_set=ctx.process_set)
        me = rank() if _check_process_set(ctx.process_set) == 0 else ctx.process_set.rank()
        mine = [g.narrow(0, sum(dims[:me]), dims[me]) for g, dims in zip(grads, ctx.first_dims)]
        return (None, None, *mine)


def grouped_allgather(tensors, name=None, process_set=global_process_set):
    """Returns, for each tensor of the list, every rank's rows concatenated. Differentiable."""
    tensors = list(tensors)
    if not tensors:
        raise ValueError("grouped_allgather: the list of tensors is empty")
    return list(HorovodGroupedAllgather.apply(name, process_set, *tensors))


# ---------------------------------------------------------------------------------- broadcast

def _broadcast_async(tensor, output, root_rank, name, process_set):
    ps = _check_process_set(process_set)

    def submit(handle):
        root = int(root_rank)
        yield _lib.broadcast_async(output.detach(), _op_name("broadcast", name, handle), root,
                                   transient=_unnamed(name), stream=_stream_of(output), process_set=ps)

    return _start(submit, lambda results, ops: output)


def broadcast_async(tensor, root_rank, name=None, process_set=global_process_set):
    """Starts copying rank `root_rank`'s `tensor` to every rank; `tensor` is not modified.
    Returns a handle; synchronize() returns the broadcast value."""
    return _broadcast_async(tensor, _fresh_copy(tensor), root_rank, name, process_set)


def broadcast_async_(tensor, root_rank, name=None, process_set=global_process_set):
    """Starts copying rank `root_rank`'s `tensor` into `tensor` on every rank. Returns a handle."""
    return _broadcast_async(tensor, tensor, root_rank, name, process_set)


class HorovodBroadcast(torch.autograd.Function):
    """broadcast as an autograd function: the root receives the averaged gradient."""

    @staticmethod
    def forward(ctx, tensor, root_rank, name, process_set):
        ctx.root_rank, ctx.process_set = root_rank, process_set
        return synchronize(broadcast_async(tensor, root_rank, name, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        grad = allreduce(grad_output, op=Average, process_set=ctx.process_set)
        if rank() != ctx.root_rank:
            grad = grad * 0
        return grad, None, None, None


def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    """Returns rank `root_rank`'s `tensor` on every rank; `tensor` is not modified."""
    return HorovodBroadcast.apply(tensor, root_rank, name, process_set)


def broadcast_(tensor, root_rank, name=None, process_set=global_process_set):
    """Copies rank `root_rank`'s `tensor` into `tensor` on every rank; returns it."""
    return synchronize(broadcast_async_(tensor, root_rank, name, process_set))


# ------------------------------------------------------------------ handles and barrier

def _wait_all(subs):
    for s in subs:
        s.wait()


def poll(handle):
    """True once the operation behind `handle` ended; synchronize() then returns at once."""
    with _lock:
        p = _handle_map.get(handle)
    if p is None:
        raise ValueError("Handle %r was not created or has been cleared." % (handle,))
    return all(s.poll() for s in p.ops)


def synchronize(handle):
    """Waits for the operation behind `handle` and returns its output (a tensor, or a list for
    grouped ops). Raises HorovodInternalError when the job failed, ChorusArgumentError (a
    ValueError and RuntimeError) when the ranks' tensors disagree. Unknown handles: None."""
    if callable(handle):
        return handle()
    with _lock:
        p = _handle_map.get(handle)
    if p is None:
        return None
    try:
        # Every op of a group must end before any tensor may be released.
        _wait_all(p.ops)
        results = [s.result() for s in p.ops]
    finally:
        with _lock:
            _handle_map.pop(handle, None)
    return p.finish(results, p.ops)


def barrier(process_set=global_process_set):
    """Returns once every rank called barrier()."""
    ps = _check_process_set(process_set)
    # One name for every barrier (per set): it is synchronous, so never pending twice on a rank.
    sub = _lib.allreduce_async(torch.zeros(1, dtype=torch.uint8), "barrier", _CHORUS_OP[Sum], process_set=ps)
    sub.wait()
    sub.result()
