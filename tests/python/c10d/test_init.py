"""Every way torch.distributed 1.13 starts a "chorus" group: env:// (torchrun's or chorusrun's
variables), tcp://, file:// and an explicit store; destroy_process_group and a new
init_process_group in one process, several times; and the Horovod API beside the backend in one
process. Run with CHORUS_TEST_NO_INIT=1 (each test starts its own groups)."""

import datetime
import os
import socket
import tempfile

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


def agreed(make):
    """A value rank 0 makes, learned by every rank through a throwaway env:// group."""
    dist.init_process_group("chorus", timeout=TIMEOUT)
    box = [make() if RANK == 0 else None]
    dist.broadcast_object_list(box, src=0)
    dist.destroy_process_group()
    return box[0]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_env_init_then_destroy_and_init_again_three_times():
    for _ in range(3):
        dist.init_process_group("chorus", timeout=TIMEOUT)
        assert dist.get_backend() == "chorus"
        check_group()
        dist.destroy_process_group()
        assert not dist.is_initialized()


def test_tcp_init_method():
    port = agreed(free_port)
    dist.init_process_group("chorus", init_method=f"tcp://127.0.0.1:{port}", rank=RANK, world_size=SIZE,
                            timeout=TIMEOUT)
    check_group()
    dist.destroy_process_group()


def test_file_init_method():
    path = agreed(lambda: tempfile.mktemp(prefix="chorus-c10d-file-init-"))
    try:
        dist.init_process_group("chorus", init_method=f"file://{path}", rank=RANK, world_size=SIZE, timeout=TIMEOUT)
        check_group()
        dist.destroy_process_group()
    finally:
        if RANK == 0 and os.path.exists(path):
            os.unlink(path)


def test_an_explicit_store():
    port = agreed(free_port)
    store = dist.TCPStore("127.0.0.1", port, SIZE, RANK == 0, timeout=TIMEOUT)
    dist.init_process_group("chorus", store=store, rank=RANK, world_size=SIZE, timeout=TIMEOUT)
    check_group()
    dist.destroy_process_group()


def test_the_horovod_api_and_the_backend_in_one_process():
    import chorus.torch as hvd
    hvd.init()
    dist.init_process_group("chorus", timeout=TIMEOUT)
    for i in range(3):
        a = torch.full((100,), float(RANK))
        b = torch.full((100,), float(RANK))
        h = hvd.allreduce_async_(a, name=f"both.{i}", op=hvd.Sum)
        dist.all_reduce(b)
        hvd.synchronize(h)
        assert torch.equal(a, b)
    dist.destroy_process_group()
    hvd.shutdown()
