"""Every way torch.distributed 1.13 starts a "chorus" group: env:// (torchrun's or chorusrun's
variables), tcp://, file:// and an explicit store; destroy_process_group and a new
init_process_group in one process, several times; and the Horovod API beside the backend in one
process. Run with CHORUS_TEST_NO_INIT=1 (each test starts its own groups).

Rank 0 serves each round's store, and ranks leave a group at different times: a rank that meets
at the same store address again at once could find the old store going away (torch 1.13, any
backend). So the first env:// group agrees on fresh addresses for every later round."""

import datetime
import os
import socket
import tempfile

import pytest
import torch
import torch.distributed as dist

RANK, SIZE = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
TIMEOUT = datetime.timedelta(seconds=60)


def check_group():
    t = torch.full((1000,), float(RANK + 1))
    dist.all_reduce(t)
    assert torch.equal(t, torch.full((1000,), float(SIZE * (SIZE + 1) // 2)))
    g = dist.new_group(list(range(SIZE)), backend="chorus")
    x = torch.tensor([RANK])
    dist.broadcast(x, src=SIZE - 1, group=g)
    assert x.item() == SIZE - 1
    dist.destroy_process_group(g)


def free_port_pair():
    """A port P with P + 1 free too (chorus.torch meets at MASTER_PORT + 1 under torchrun)."""
    for _ in range(100):
        with socket.socket() as a, socket.socket() as b:
            a.bind(("127.0.0.1", 0))
            try:
                b.bind(("127.0.0.1", a.getsockname()[1] + 1))
            except OSError:
                continue
            return a.getsockname()[1]
    raise RuntimeError("no free pair of ports")


@pytest.fixture(scope="module")
def plan():
    """Ports and a file path for every later round, agreed in one env:// round."""
    dist.init_process_group("chorus", timeout=TIMEOUT)
    assert dist.get_backend() == "chorus"
    check_group()
    box = [None]
    if RANK == 0:
        box = [{"rounds": [free_port_pair() for _ in range(3)], "tcp": free_port_pair(), "store": free_port_pair(),
                "both": free_port_pair(), "file": tempfile.mktemp(prefix="chorus-c10d-file-init-")}]
    dist.broadcast_object_list(box, src=0)
    dist.destroy_process_group()
    yield box[0]
    if RANK == 0 and os.path.exists(box[0]["file"]):
        os.unlink(box[0]["file"])


def test_env_init_then_destroy_and_init_again_three_times(plan, monkeypatch):
    for port in plan["rounds"]:
        monkeypatch.setenv("MASTER_PORT", str(port))
        dist.init_process_group("chorus", timeout=TIMEOUT)
        check_group()
        dist.destroy_process_group()
        assert not dist.is_initialized()


def test_tcp_init_method(plan):
    dist.init_process_group("chorus", init_method=f"tcp://127.0.0.1:{plan['tcp']}", rank=RANK, world_size=SIZE,
                            timeout=TIMEOUT)
    check_group()
    dist.destroy_process_group()


def test_file_init_method(plan):
    dist.init_process_group("chorus", init_method=f"file://{plan['file']}", rank=RANK, world_size=SIZE,
                            timeout=TIMEOUT)
    check_group()
    dist.destroy_process_group()


def test_an_explicit_store(plan):
    store = dist.TCPStore("127.0.0.1", plan["store"], SIZE, RANK == 0, timeout=TIMEOUT)
    dist.init_process_group("chorus", store=store, rank=RANK, world_size=SIZE, timeout=TIMEOUT)
    check_group()
    dist.destroy_process_group()


def test_the_horovod_api_and_the_backend_in_one_process(plan, monkeypatch):
    import chorus.torch as hvd
    monkeypatch.setenv("MASTER_PORT", str(plan["both"]))
    hvd.init()
    dist.init_process_group("chorus", timeout=TIMEOUT)
    for i in range(3):
        a = torch.full((100,), float(RANK))
        b = torch.full((100,), float(RANK))
        h = hvd.allreduce_async_(a, name=f"both.{i}", op=hvd.Sum)
        dist.all_reduce(b)
        hvd.synchronize(h)
        assert torch.equal(a, b)
    hvd.shutdown()
    dist.destroy_process_group()
