"""Gradient compression for allreduce, as in horovod.torch: ``compress`` returns the tensor to
send and a context, ``decompress`` turns the reduced tensor back into the original dtype.

Compression.fp16 and Compression.bf16 are done by the runtime where it can (float32/float64 CPU
tensors): chorus.torch then hands the tensor over uncast, and Chorus casts each segment as it
goes on the wire and sums in float32 (CHORUS_COMPRESSION, per operation), so there is no extra
pass in Python and gradient buckets stay on. Elsewhere (CUDA tensors) they cast in Python as
Horovod does."""

import torch


class Compressor:
    """Interface: compress a tensor before allreduce, decompress the result."""

    @staticmethod
    def compress(tensor):
        """Returns (tensor to send, context for decompress)."""
        raise NotImplementedError

    @staticmethod
    def decompress(tensor, ctx):
        """Returns the reduced tensor in the dtype the caller passed to compress."""
        raise NotImplementedError


class NoneCompressor(Compressor):
    """Sends tensors as they are."""

    @staticmethod
    def compress(tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor


class _CastCompressor(Compressor):
    wire_dtype = None

    @classmethod
    def compress(cls, tensor):
        if tensor.dtype.is_floating_point and tensor.dtype != cls.wire_dtype:
            return tensor.type(cls.wire_dtype), tensor.dtype
        return tensor, None

    @classmethod
    def decompress(cls, tensor, ctx):
        return tensor if ctx is None else tensor.type(ctx)


class FP16Compressor(_CastCompressor):
    """Sends floating-point tensors as float16 (half the bytes)."""
    wire_dtype = torch.float16
    runtime_code = 1  # CHORUS_COMPRESSION=fp16


class BF16Compressor(_CastCompressor):
    """Sends floating-point tensors as bfloat16 (half the bytes, float32's range)."""
    wire_dtype = torch.bfloat16
    runtime_code = 2  # CHORUS_COMPRESSION=bf16


def runtime_code(compression, tensor):
    """The runtime's compression code (1 fp16, 2 bf16) when the runtime compresses `tensor`
    itself (a built-in compressor, a float32/float64 CPU tensor), else None (cast in Python)."""
    code = getattr(compression, "runtime_code", None)
    if code is None or tensor.is_cuda or tensor.is_sparse or tensor.dtype not in (torch.float32, torch.float64):
        return None
    return code


class Compression:
    """The compressors: ``Compression.none``, ``Compression.fp16``, ``Compression.bf16``."""
    none = NoneCompressor
    fp16 = FP16Compressor
    bf16 = BF16Compressor
