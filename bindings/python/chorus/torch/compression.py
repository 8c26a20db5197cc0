"""Gradient compression for allreduce, as in horovod.torch: ``compress`` returns the tensor to
send and a context, ``decompress`` turns the reduced tensor back into the original dtype."""

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


class BF16Compressor(_CastCompressor):
    """Sends floating-point tensors as bfloat16 (half the bytes, float32's range)."""
    wire_dtype = torch.bfloat16


class Compression:
    """The compressors: ``Compression.none``, ``Compression.fp16``, ``Compression.bf16``."""
    none = NoneCompressor
    fp16 = FP16Compressor
    bf16 = BF16Compressor
