"""How chorus.torch's collectives (mpi_ops.py, scatter_ops.py) turn their arguments into what the
runtime takes: operation names, the reduction op, scaling, a CUDA tensor's stream, and the
staging copies."""

import warnings

import torch

from chorus.torch.basics import _CHORUS_OP, Adasum, Average, Sum


def _op_name(prefix, name, handle):
    """The name Chorus negotiates: "<collective>.<name>", or a fresh one for an unnamed op."""
    if name is None or name == "":
        return "%s.noname.%d" % (prefix, handle)
    return "%s.%s" % (prefix, name)


def _unnamed(name):
    """True for an op the user did not name: its name ("<collective>.noname.<handle>", fresh per
    call) is used once, so Chorus negotiates it as transient and frees its id once agreed
    (without that, every unnamed call would widen every negotiation message by one bit)."""
    return name is None or name == ""


def _grad_name(name):
    """The backward op of a named op is named after it (unnamed ones stay unnamed)."""
    return None if name is None or name == "" else "%s.grad" % name


def handle_average_backwards_compatibility(op, average):
    """Horovod's deprecated `average=` flag, mapped onto `op=` (default Average)."""
    if op is not None:
        if average is not None:
            raise ValueError("The op parameter supersedes average. Please provide only one of them.")
        return op
    if average is not None:
        warnings.warn("Parameter `average` has been replaced with `op` and will be removed",
                      DeprecationWarning)
        return Average if average else Sum
    return Average


def _chorus_op(op):
    if op == Adasum:
        raise NotImplementedError("op=hvd.Adasum is not supported by Chorus; use hvd.Average or hvd.Sum")
    if op not in _CHORUS_OP:
        raise ValueError("unknown reduction op %r; use hvd.Average, hvd.Sum, hvd.Min, hvd.Max or hvd.Product"
                         % (op,))
    return _CHORUS_OP[op]


def _scale_(tensor, factor):
    """Multiplies in place as Horovod does: float16 and bfloat16 in float32 arithmetic (the
    factor rounded to float32, the product rounded once to the tensor's type), integer tensors
    through float64 (truncating), float32 and float64 in their own type."""
    if factor == 1.0:
        return
    with torch.no_grad():
        t = tensor.detach()
        if t.dtype in (torch.float16, torch.bfloat16):
            t.copy_(t.float().mul_(torch.tensor(factor, dtype=torch.float32)))
        elif t.dtype.is_floating_point:
            t.mul_(factor)
        else:
            t.copy_(t.double().mul_(factor))


def _stream_of(tensor):
    """For a CUDA tensor, its device's current stream (a cudaStream_t as an int): Chorus records
    an event there at submit and reads the tensor only after the work queued before it. 0 for
    CPU tensors."""
    if not tensor.is_cuda:
        return 0
    return torch.cuda.current_stream(tensor.device).cuda_stream


def _to_host(tensor):
    """The collectives without a device path (allgather, reducescatter, alltoall) stage a CUDA
    tensor through host memory: this copy goes in, and _like(result, tensor) brings the
    result back to the tensor's device."""
    return tensor.detach().cpu() if tensor.is_cuda else tensor.detach()


def _like(result, tensor):
    return result.to(tensor.device) if tensor.is_cuda else result


def _fresh_copy(tensor):
    """A contiguous copy for out-of-place ops (Chorus then reduces it in place)."""
    return tensor.detach().clone(memory_format=torch.contiguous_format)
