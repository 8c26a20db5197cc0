"""Chorus: gradients between data-parallel ranks. ``chorus.torch`` is the PyTorch API
(a drop-in for ``horovod.torch``)."""

__version__ = "0.1.0"
