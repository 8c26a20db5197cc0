"""Every rank's inputs and the expected results, computed locally for the backend's tests."""

import functools

import torch
import torch.distributed as dist

ALL_DTYPES = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16,
              torch.bfloat16, torch.float32, torch.float64]
COMPLEX_DTYPES = [torch.complex64, torch.complex128]


def rank():
    return dist.get_rank()


def size():
    return dist.get_world_size()


def value(r, shape, dtype, seed=0):
    """Rank r's input: small integers (exact in every dtype, products included), the same on every
    rank that computes it."""
    g = torch.Generator().manual_seed(7919 * seed + r + 1)
    if dtype.is_complex:
        real = torch.float32 if dtype == torch.complex64 else torch.float64
        return torch.complex(value(r, shape, real, seed), value(r + 100, shape, real, seed))
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    low = 0 if dtype == torch.uint8 else -3
    return torch.randint(low, 4, shape, generator=g).to(dtype)


def reduced(op, tensors):
    """The reduction of `tensors` by a torch.distributed ReduceOp, computed locally (wide, then
    cast back), as every backend defines it; AVG of integers truncates toward zero."""
    dtype = tensors[0].dtype
    if dtype == torch.bool:
        t = [x.to(torch.uint8) for x in tensors]
        if op in (dist.ReduceOp.SUM, dist.ReduceOp.MAX, dist.ReduceOp.BOR):
            return functools.reduce(torch.maximum, t).bool()
        if op in (dist.ReduceOp.PRODUCT, dist.ReduceOp.MIN, dist.ReduceOp.BAND):
            return functools.reduce(torch.minimum, t).bool()
        return functools.reduce(torch.bitwise_xor, t).bool()
    wide = torch.complex128 if dtype.is_complex else torch.float64 if dtype.is_floating_point else torch.int64
    t = [x.to(wide) for x in tensors]
    if op == dist.ReduceOp.SUM:
        out = functools.reduce(torch.add, t)
    elif op == dist.ReduceOp.AVG:
        s = functools.reduce(torch.add, t)
        out = s / len(t) if wide != torch.int64 else torch.div(s, len(t), rounding_mode="trunc")
    elif op == dist.ReduceOp.PRODUCT:
        out = functools.reduce(torch.mul, t)
    elif op == dist.ReduceOp.MIN:
        out = functools.reduce(torch.minimum, t)
    elif op == dist.ReduceOp.MAX:
        out = functools.reduce(torch.maximum, t)
    elif op == dist.ReduceOp.BAND:
        out = functools.reduce(torch.bitwise_and, t)
    elif op == dist.ReduceOp.BOR:
        out = functools.reduce(torch.bitwise_or, t)
    else:
        out = functools.reduce(torch.bitwise_xor, t)
    if dtype == torch.uint8:
        out = out % 256
    return out.to(dtype)


TOLERANCE = {torch.float16: 1e-3, torch.bfloat16: 1e-2, torch.float32: 1e-6, torch.float64: 1e-12,
             torch.complex64: 1e-6, torch.complex128: 1e-12}


def same(actual, expected):
    """Exact for integers (and for floats, whose inputs are small integers, except where an average
    rounds: within the dtype's rounding)."""
    if actual.dtype != expected.dtype or actual.shape != expected.shape:
        return False
    tol = TOLERANCE.get(actual.dtype)
    if tol is None:
        return torch.equal(actual, expected)
    wide = torch.complex128 if actual.is_complex() else torch.float64
    return torch.allclose(actual.to(wide), expected.to(wide), rtol=tol, atol=tol)
