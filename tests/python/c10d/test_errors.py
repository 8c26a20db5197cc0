"""Bad input on the "chorus" backend: members whose calls differ fail with an error naming the call
and the rank (never a hang or a wrong result) and break only their group; arguments the backend
cannot take raise at the call on every rank; a destroyed group ends its pending work."""

import datetime
import gc

import pytest
import torch
import torch.distributed as dist

from c10d_values import rank, size


def fresh_group():
    return dist.new_group(backend="chorus", timeout=datetime.timedelta(seconds=30))


def expect_group_error(group, call, *words):
    """`call` raises on every member, naming what the data plane saw; the group stays broken."""
    with pytest.raises(RuntimeError) as e:
        call()
    text = str(e.value)
    for w in words:
        assert w in text, text
    with pytest.raises(RuntimeError):
        dist.all_reduce(torch.ones(1), group=group)
    dist.destroy_process_group(group)
    return text


@pytest.mark.parametrize("n", [4, 300_000], ids=["small", "chunked"])
def test_a_member_with_another_length_fails_every_member(n):
    g = fresh_group()
    t = torch.ones(n + (1 if rank() == size() - 1 else 0))
    text = expect_group_error(g, lambda: dist.all_reduce(t, group=g), "c10d.all_reduce#1", "rank")
    assert "process group" in text


def test_same_bytes_another_shape_or_dtype_is_refused():
    g = fresh_group()
    t = torch.zeros(2, 3) if rank() == 0 else torch.zeros(3, 2)
    expect_group_error(g, lambda: dist.all_reduce(t, group=g), "c10d.all_reduce", "rank")
    g = fresh_group()
    t = torch.zeros(4, dtype=torch.float32 if rank() == 0 else torch.int32)
    expect_group_error(g, lambda: dist.all_reduce(t, group=g), "c10d.all_reduce", "rank")
    g = fresh_group()
    t = torch.zeros(4)
    op = dist.ReduceOp.SUM if rank() == 0 else dist.ReduceOp.MAX
    expect_group_error(g, lambda: dist.all_reduce(t, op=op, group=g), "c10d.all_reduce", "rank")


@pytest.mark.parametrize("n", [1000, 2_000_000], ids=["small", "large"])
def test_another_collective_is_refused_naming_both(n):
    # On one host the allreduce and the broadcast take different paths (shared-memory mailboxes,
    # the I/O thread), where neither member sees the other's call: the stall check names them.
    g = fresh_group()
    t = torch.zeros(n)
    call = (lambda: dist.all_reduce(t, group=g)) if rank() == 0 else (lambda: dist.broadcast(t, 0, group=g))
    expect_group_error(g, call, "c10d.", "rank")


def test_another_root_fails_the_members_that_receive():
    # A root's broadcast ends once it sent its bytes, so a root may finish a call that its members
    # made with another root; every member that expected bytes fails, and the group with it.
    g = fresh_group()
    t = torch.zeros(100)
    try:
        dist.broadcast(t, src=rank() % 2, group=g)
    except RuntimeError as e:
        assert "c10d.broadcast" in str(e), e
    with pytest.raises(RuntimeError, match="c10d"):
        dist.broadcast(t, src=0, group=g)
        dist.barrier(group=g)
    dist.destroy_process_group(g)


def test_send_and_recv_of_other_sizes_fail_both_ends_naming_the_lengths():
    if rank() == 0:
        with pytest.raises(RuntimeError, match=r"sent 16 bytes .* takes 20"):
            dist.send(torch.zeros(4), size() - 1, tag=3)
    elif rank() == size() - 1:
        with pytest.raises(RuntimeError, match=r"sent 16 bytes .* takes 20"):
            dist.recv(torch.zeros(5), 0, tag=3)
    dist.barrier()  # the default group is not broken by it


def test_arguments_the_backend_cannot_take_raise_at_the_call():
    with pytest.raises(RuntimeError, match=r"c10d.all_reduce.*BAND needs an integer or bool tensor"):
        dist.all_reduce(torch.ones(3), op=dist.ReduceOp.BAND)
    with pytest.raises(RuntimeError, match=r"AVG of a bool tensor"):
        dist.all_reduce(torch.ones(3, dtype=torch.bool), op=dist.ReduceOp.AVG)
    pg = dist.distributed_c10d._get_default_group()
    # (torch's all_reduce refuses MAX of complex itself; the backend refuses it too when called directly.)
    with pytest.raises(RuntimeError, match=r"complex tensors reduce with SUM and AVG only"):
        pg.allreduce([torch.ones(3, dtype=torch.complex64)], _max_opts())
    with pytest.raises(RuntimeError, match=r"root rank .* is not in the group"):
        pg.broadcast([torch.ones(2)], _bcast_opts(size()))
    with pytest.raises(RuntimeError, match=r"sparse tensors are not supported"):
        dist.all_reduce(torch.ones(3).to_sparse())
    with pytest.raises(RuntimeError, match=r"dtype .* is not supported"):
        dist.all_reduce(torch.quantize_per_tensor(torch.ones(3), 0.1, 0, torch.quint8))
    with pytest.raises(RuntimeError, match=r"split sizes sum to"):
        dist.all_to_all_single(torch.zeros(size()), torch.zeros(size()), [1] * size(), [2] * size())
    dist.barrier()  # nothing was issued: the group goes on


def _max_opts():
    o = dist.AllreduceOptions()
    o.reduceOp = dist.ReduceOp.MAX
    return o


def _bcast_opts(root):
    o = dist.BroadcastOptions()
    o.rootRank = root
    return o


def test_a_destroyed_group_refuses_calls_and_ends_its_pending_work_when_dropped():
    g = fresh_group()
    dist.destroy_process_group(g)
    with pytest.raises(RuntimeError):
        dist.all_reduce(torch.ones(1), group=g)
    g = fresh_group()
    pending = g.recv([torch.zeros(3)], 0 if rank() != 0 else size() - 1, 77)  # nobody sends
    dist.barrier(group=g)
    dist.destroy_process_group(g)
    # As for every backend, the group object lives while Python holds it; dropped, it ends what
    # is pending.
    del g
    gc.collect()
    with pytest.raises(RuntimeError, match=r"c10d.recv#1 .*was destroyed"):
        pending.wait()
