"""A rank that dies leaves no survivor hanging: every pending and later operation ends with
HorovodInternalError naming the lost rank. Run as its own job (the job is broken afterwards)."""

import os
import time

import pytest
import torch

import chorus.torch as hvd


def test_peer_death_raises_horovod_internal_error_on_survivors():
    hvd.allreduce(torch.ones(4), name="before")  # everyone is up
    if hvd.rank() == hvd.size() - 1:
        os._exit(0)  # dies without saying goodbye (exit 0: chorusrun lets the others finish)
    start = time.monotonic()
    with pytest.raises(hvd.HorovodInternalError, match="rank|connection|lost") as info:
        hvd.allreduce(torch.ones(1 << 16), name="after")
    print("survivor %d: %s after %.2f s" % (hvd.rank(), info.value, time.monotonic() - start))
    with pytest.raises(hvd.HorovodInternalError):
        hvd.allreduce(torch.ones(4), name="later")
    assert not isinstance(info.value, ValueError)
    hvd.shutdown()
    with pytest.raises(RuntimeError):
        hvd.allreduce(torch.ones(4), name="after_shutdown")
