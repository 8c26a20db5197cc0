"""reducescatter, grouped_reducescatter and alltoall of chorus.torch (horovod.torch's names,
arguments, defaults and return values), and join, over the runtime's reduce-scatter, alltoall
and join."""

import numbers

import torch

from chorus import _chorus_torch as _lib
from chorus.common.process_sets import _check as _check_process_set
from chorus.common.process_sets import global_process_set
from chorus.torch.basics import _CHORUS_OP, Max, Sum
from chorus.torch.compression import Compression
from chorus.torch.mpi_ops import (Average, _chorus_op, _fresh_copy, _grad_name, _like, _op_name, _scale_, _start,
                                  _to_host, _unnamed, allgather, grouped_allgather, size, synchronize)

# ------------------------------------------------------------------------------ reducescatter

def _submit_reducescatter(tensor, name, handle, code, prescale_factor, transient=None, ps=0):
    src = tensor
    if prescale_factor != 1.0:
        src = _fresh_copy(tensor)  # the input is not modified
        _scale_(src, prescale_factor)
    return _lib.reducescatter_async(_to_host(src), _op_name("reducescatter", name, handle), code,
                                    transient=_unnamed(name) if transient is None else transient, process_set=ps)


def reducescatter_async(tensor, name=None, op=Average, process_set=global_process_set, prescale_factor=1.0,
                        postscale_factor=1.0):
    """Starts reducing `tensor` (same shape on every rank) over all ranks; this rank gets its
    slice of the first dimension (dim0 // size rows, one more on the first dim0 % size ranks).
    Returns a handle; synchronize() returns the slice."""
    ps = _check_process_set(process_set)
    code = _chorus_op(op)

    def finish(results, ops):
        out = _like(results[0], tensor)
        _scale_(out, postscale_factor)
        return out

    return _start(lambda handle: [_submit_reducescatter(tensor, name, handle, code, prescale_factor, ps=ps)], finish)


def _set_size(process_set):
    return size() if process_set is None or process_set.process_set_id == 0 else process_set.size()


def _backward_scale(op, prescale_factor, postscale_factor, process_set):
    """The factor of a reduce-scatter's gradient, as Horovod has it: the set's size for Sum,
    1 for Average (the gradient summed over the ranks, as allreduce's), times the forward's
    scale factors."""
    return prescale_factor * postscale_factor * (_set_size(process_set) if op == Sum else 1)


def _gather_back(grad, op, prescale_factor, postscale_factor, process_set=global_process_set):
    """Backward of a reduce-scatter: every rank's slice gradient, gathered (in its process set)
    and scaled (_backward_scale)."""
    full = allgather(grad, process_set=process_set)
    scale = _backward_scale(op, prescale_factor, postscale_factor, process_set)
    return full * scale if scale != 1.0 else full


class HorovodReducescatter(torch.autograd.Function):
    """reducescatter as an autograd function."""

    @staticmethod
    def forward(ctx, tensor, name, op, process_set, prescale_factor, postscale_factor):
        ctx.op, ctx.prescale_factor, ctx.postscale_factor = op, prescale_factor, postscale_factor
        ctx.process_set = process_set
        return synchronize(reducescatter_async(tensor, name, op, process_set, prescale_factor, postscale_factor))

    @staticmethod
    def backward(ctx, grad_output):
        return _gather_back(grad_output, ctx.op, ctx.prescale_factor, ctx.postscale_factor, ctx.process_set), \
            None, None, None, None, None


def reducescatter(tensor, name=None, compression=Compression.none, op=Average, process_set=global_process_set,
                  prescale_factor=1.0, postscale_factor=1.0):
    """Returns this rank's slice of `tensor` reduced over all ranks (see reducescatter_async).
    Differentiable."""
    compressed, ctx = compression.compress(tensor)
    out = HorovodReducescatter.apply(compressed, name, op, process_set, prescale_factor, postscale_factor)
    return compression.decompress(out, ctx)


def grouped_reducescatter_async(tensors, name=None, op=Average, process_set=global_process_set,
                                prescale_factor=1.0, postscale_factor=1.0):
    """Starts a reducescatter of each tensor of the list; one handle for the group."""
    ps = _check_process_set(process_set)
    code = _chorus_op(op)
    tensors = list(tensors)
    if not tensors:
        raise ValueError("grouped_reducescatter: the list of tensors is empty")

    def submit(handle):
        for i, t in enumerate(tensors):
            member = "%s.%d" % (name, i) if name else "grouped.noname.%d.%d" % (handle, i)
            yield _submit_reducescatter(t, member, handle, code, prescale_factor, transient=_unnamed(name), ps=ps)

    def finish(results, ops):
        for r in results:
            _scale_(r, postscale_factor)
        return list(results)

    return _start(submit, finish)


class HorovodGroupedReducescatter(torch.autograd.Function):
    """grouped_reducescatter as an autograd function."""

    @staticmethod
    def forward(ctx, name, op, process_set, prescale_factor, postscale_factor, *tensors):
        ctx.op, ctx.prescale_factor, ctx.postscale_factor = op, prescale_factor, postscale_factor
        ctx.process_set = process_set
        return tuple(synchronize(grouped_reducescatter_async(list(tensors), name, op, process_set,
                                                             prescale_factor, postscale_factor)))

    @staticmethod
    def backward(ctx, *grads):
        full = grouped_allgather(list(grads), process_set=ctx.process_set)
        scale = _backward_scale(ctx.op, ctx.prescale_factor, ctx.postscale_factor, ctx.process_set)
        return (None, None, None, None, None, *[g * scale if scale != 1.0 else g for g in full])


def grouped_reducescatter(tensors, name=None, compression=Compression.none, op=Average,
                          process_set=global_process_set, prescale_factor=1.0, postscale_factor=1.0):
    """Returns, for each tensor of the list, this rank's slice of it reduced over all ranks."""
    compressed, ctxs = zip(*[compression.compress(t) for t in tensors])
    outs = HorovodGroupedReducescatter.apply(name, op, process_set, prescale_factor, postscale_factor,
                                             *compressed)
    return [compression.decompress(o, c) for o, c in zip(outs, ctxs)]


# ----------------------------------------------------------------------------------- alltoall

def _split_list(splits, name):
    """splits as a list of ints: an integer tensor (Horovod wants int32; any integer dtype is
    taken) or a sequence of integers. Anything else is refused before it becomes a row count."""
    if isinstance(splits, torch.Tensor):
        if splits.is_floating_point() or splits.is_complex() or splits.dtype == torch.bool:
            raise ValueError("alltoall('%s'): splits must be an integer tensor (torch.int32), not %s"
                             % (name, splits.dtype))
        return [int(s) for s in splits.reshape(-1).tolist()]
    out = []
    for s in splits:
        if isinstance(s, bool) or not isinstance(s, numbers.Integral):
            raise ValueError("alltoall('%s'): splits must be integers, got %r" % (name, s))
        out.append(int(s))
    return out


def alltoall_async(tensor, splits=None, name=None, process_set=global_process_set):
    """Starts sending splits[i] rows of `tensor`'s first dimension to rank i (without splits:
    dim 0 split equally). Returns a handle; synchronize() returns (rows received in rank order,
    int32 tensor of the rows received from each rank)."""
    ps = _check_process_set(process_set)
    n = size() if ps == 0 else process_set.size()
    if splits is None:
        dim0 = tensor.shape[0] if tensor.dim() > 0 else -1
        if dim0 < 0 or dim0 % n:
            raise ValueError("alltoall('%s'): without splits, dimension 0 (%d) must be divisible by the number of "
                             "ranks (%d); pass splits=" % (name, dim0, n))
        split_list = [dim0 // n] * n
    else:
        split_list = _split_list(splits, name)

    def finish(results, ops):
        return _like(results[0], tensor), torch.tensor(_lib.received_splits(ops[0]), dtype=torch.int32)

    return _start(lambda handle: [_lib.alltoall_async(_to_host(tensor), _op_name("alltoall", name, handle),
                                                      split_list, transient=_unnamed(name), process_set=ps)],
                  finish)


class HorovodAlltoall(torch.autograd.Function):
    """alltoall as an autograd function: gradients travel back the way the rows came."""

    @staticmethod
    def forward(ctx, tensor, splits, name, process_set):
        output, received = synchronize(alltoall_async(tensor, splits, name, process_set))
        ctx.name, ctx.process_set, ctx.received = name, process_set, received
        if splits is None:
            return output
        ctx.mark_non_differentiable(received)
        return output, received

    @staticmethod
    def backward(ctx, grad_output, *ignored):
        grad, _ = synchronize(alltoall_async(grad_output.contiguous(), ctx.received, _grad_name(ctx.name),
                                             ctx.process_set))
        return grad, None, None, None


def alltoall(tensor, splits=None, name=None, process_set=global_process_set):
    """Sends splits[i] rows of `tensor` to rank i and returns the rows received, in rank order;
    with `splits` given, returns (rows, rows received from each rank). Differentiable."""
    return HorovodAlltoall.apply(tensor, splits, name, process_set)


def join(device=-1):
    """Tells the others this rank has no more data: until every rank joined, it takes part in
    their collectives with neutral data (0 for sum and average, which still divides by size();
    no rows for allgather). Blocks until every rank joined; returns the last rank to join.
    `device` is accepted for Horovod's signature (a joined rank contributes host data)."""
    last = _lib.join()
    _agree_on_handles()
    return last


def _agree_on_handles():
    """Ranks with uneven data issued different numbers of operations, so their handle counters
    (which name unnamed operations) differ; after join every rank goes on from the largest."""
    from chorus.torch import mpi_ops
    with mpi_ops._lock:
        mine = mpi_ops._next_handle
    sub = _lib.allreduce_async(torch.tensor([mine], dtype=torch.int64), "chorus.join.handles", _CHORUS_OP[Max])
    sub.wait()
    agreed = int(sub.result().item())
    with mpi_ops._lock:
        mpi_ops._next_handle = max(agreed, mpi_ops._next_handle)


__all__ = ["reducescatter", "reducescatter_async", "grouped_reducescatter", "grouped_reducescatter_async",
           "alltoall", "alltoall_async", "join"]
