"""Shared set-up of the torch.distributed backend's tests: one process group "chorus" for the
session (env://: torchrun's or chorusrun's variables; CHORUS_TEST_NO_INIT=1 leaves it to the
tests). Every rank runs the same tests in the same order, so their collectives meet; `-x` ends a
rank at its first failure, and the launcher then stops the job (nothing waits forever). Helpers
are in c10d_values.py."""

import datetime
import os

import pytest
import torch
import torch.distributed as dist

torch.set_num_threads(1)


@pytest.fixture(scope="session", autouse=True)
def default_group(request):
    import chorus.torch.distributed  # noqa: F401  (registers the backend)
    if os.environ.get("CHORUS_TEST_NO_INIT") == "1":
        yield None
        return
    dist.init_process_group("chorus", timeout=datetime.timedelta(seconds=60))
    yield dist.group.WORLD
    if request.session.testsfailed == 0:
        dist.barrier()  # after a failure the other ranks are elsewhere: leave at once
    dist.destroy_process_group()


