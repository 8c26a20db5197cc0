"""Shared set-up of the chorus.torch tests. Every rank of a chorusrun job runs the same pytest
session in the same order, so each test's collectives meet; `-x` ends a rank at its first
failure and chorusrun then stops the whole job (nothing waits forever)."""

import os

import pytest
import torch

torch.set_num_threads(1)

DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.int32, torch.int64, torch.uint8]
FLOAT_DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]


@pytest.fixture(scope="session", autouse=True)
def job(request):
    """One Chorus job for the whole session (init once: a rendezvous per test would be slow)."""
    import chorus.torch as hvd
    if os.environ.get("CHORUS_TEST_NO_INIT") != "1":
        hvd.init()
    yield hvd
    if hvd.is_initialized():
        if request.session.testsfailed == 0:
            hvd.barrier()  # after a failure the other ranks are elsewhere: leave at once
        hvd.shutdown()


def close(actual, expected, dtype):
    """Compares in float64 with a tolerance fitting `dtype`."""
    tol = {torch.float16: 1e-2, torch.bfloat16: 2e-2}.get(dtype, 1e-6)
    return torch.allclose(actual.double(), expected.double(), rtol=tol, atol=tol)
