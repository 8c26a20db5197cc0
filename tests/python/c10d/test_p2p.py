"""send/recv on the "chorus" backend: blocking and async, tags, any source, batches, and a ring of
transfers in both directions at once."""

import torch
import torch.distributed as dist

from c10d_values import rank, size, value


def test_send_recv_around_the_ring_with_async_forms():
    n = size()
    right, left = (rank() + 1) % n, (rank() - 1) % n
    out = value(rank(), (1 << 18,), torch.float32, 1)
    got = torch.zeros(1 << 18)
    s = dist.isend(out, right)
    r = dist.irecv(got, left)
    s.wait()
    r.wait()
    assert torch.equal(got, value(left, (1 << 18,), torch.float32, 1))


def test_tags_match_sends_to_receives_out_of_order():
    if size() < 2 or rank() > 1:
        return
    if rank() == 0:
        works = [dist.isend(torch.full((3,), float(tag)), 1, tag=tag) for tag in (5, 6, 7)]
        for w in works:
            w.wait()
    else:
        got = {tag: torch.zeros(3) for tag in (7, 5, 6)}
        works = [dist.irecv(got[tag], 0, tag=tag) for tag in (7, 5, 6)]  # posted in another order
        for w in works:
            w.wait()
        for tag, t in got.items():
            assert torch.equal(t, torch.full((3,), float(tag))), tag


def test_sends_with_one_tag_arrive_in_order():
    if rank() == 0:
        for i in range(20):
            dist.send(torch.tensor([i]), size() - 1)
    elif rank() == size() - 1:
        for i in range(20):
            t = torch.tensor([-1])
            dist.recv(t, 0)
            assert t.item() == i


def test_recv_from_any_source_names_the_sender():
    # A tag of their own: a receive from any source may take any sender's next message with its
    # tag, such as a later test's (MPI's rules, and Gloo's).
    if rank() == 0:
        senders = set()
        for _ in range(size() - 1):
            t = torch.zeros(2, dtype=torch.int64)
            src = dist.recv(t, tag=9)  # any source
            assert torch.equal(t, torch.full((2,), src * 11, dtype=torch.int64))
            senders.add(src)
        assert senders == set(range(1, size()))
    else:
        dist.send(torch.full((2,), rank() * 11, dtype=torch.int64), 0, tag=9)


def test_batch_isend_irecv_exchanges_with_both_neighbours():
    n = size()
    right, left = (rank() + 1) % n, (rank() - 1) % n
    to_r, to_l = torch.full((4,), rank() + 0.5), torch.full((4,), -rank() - 0.5)
    from_l, from_r = torch.zeros(4), torch.zeros(4)
    ops = [dist.P2POp(dist.isend, to_r, right), dist.P2POp(dist.isend, to_l, left),
           dist.P2POp(dist.irecv, from_l, left), dist.P2POp(dist.irecv, from_r, right)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    if n == 2:  # the same peer on both sides: its two sends arrive in order
        assert torch.equal(from_l, torch.full((4,), left + 0.5))
        assert torch.equal(from_r, torch.full((4,), -right - 0.5))
    else:
        assert torch.equal(from_l, torch.full((4,), left + 0.5))
        assert torch.equal(from_r, torch.full((4,), -right - 0.5))


def test_non_contiguous_and_empty_transfers():
    if rank() == 0:
        base = torch.arange(24.).reshape(4, 6)
        dist.send(base[:, ::3], size() - 1)
        dist.send(torch.empty(0), size() - 1)
    elif rank() == size() - 1:
        target = torch.zeros(6, 4)
        view = target.t()[:, ::3]
        dist.recv(view, 0)
        assert torch.equal(target.t()[:, ::3], torch.arange(24.).reshape(4, 6)[:, ::3])
        assert torch.equal(target.t()[:, 1::3], torch.zeros(4, 2))
        e = torch.empty(0)
        dist.recv(e, 0)
