"""One error case per function: every rank raises, with a message naming the tensor and what
differs, and the job goes on working afterwards."""

import pytest
import torch

import chorus.torch as hvd
from chorus.common.exceptions import ChorusArgumentError


def still_works():
    assert torch.equal(hvd.allreduce(torch.ones(3), op=hvd.Sum, name="still_works"), torch.full((3,), float(hvd.size())))


def test_allreduce_shape_mismatch_across_ranks():
    t = torch.ones(2 + hvd.rank())
    with pytest.raises(ChorusArgumentError, match="bad_shape") as info:
        hvd.allreduce(t, name="bad_shape")
    assert "shape" in str(info.value)
    assert isinstance(info.value, ValueError) and isinstance(info.value, RuntimeError)
    still_works()


def test_allreduce_dtype_mismatch_across_ranks():
    t = torch.ones(3, dtype=torch.float32 if hvd.rank() == 0 else torch.float64)
    with pytest.raises(RuntimeError, match="bad_dtype.*dtype|dtype.*bad_dtype"):
        hvd.allreduce_(t, name="bad_dtype")
    still_works()


def test_allreduce_unsupported_dtype_and_device():
    for dtype in (torch.complex64, torch.complex128):
        with pytest.raises(ValueError, match="not supported"):
            hvd.allreduce(torch.ones(3, dtype=dtype))
    with pytest.raises(ValueError, match="unknown reduction op"):
        hvd.allreduce(torch.ones(3), op=42)
    still_works()


def test_grouped_allreduce_one_member_mismatched():
    ts = [torch.ones(3), torch.ones(4 + hvd.rank())]
    with pytest.raises(ChorusArgumentError, match="shape"):
        hvd.grouped_allreduce(ts, name="grp_bad")
    still_works()


def test_broadcast_bad_root_rank():
    for root in (hvd.size(), -1):
        with pytest.raises(ValueError, match="root"):
            hvd.broadcast(torch.ones(3), root_rank=root, name="bad_root")
        with pytest.raises(ValueError, match="root"):
            hvd.broadcast_async_(torch.ones(3), root_rank=root)
    with pytest.raises(ValueError, match="root"):
        hvd.broadcast_object({"a": 1}, root_rank=hvd.size())
    still_works()


def test_broadcast_shape_mismatch_across_ranks():
    with pytest.raises(ChorusArgumentError, match="bc_shape"):
        hvd.broadcast_(torch.ones(2, 1 + hvd.rank()), root_rank=0, name="bc_shape")
    still_works()


def test_broadcast_root_mismatch_across_ranks():
    with pytest.raises(ChorusArgumentError, match="root"):
        hvd.broadcast_(torch.ones(2), root_rank=hvd.rank(), name="bc_root")
    still_works()


def test_allgather_trailing_dims_mismatch_and_scalar():
    with pytest.raises(ChorusArgumentError, match="ag_shape"):
        hvd.allgather(torch.ones(2, 2 + hvd.rank()), name="ag_shape")
    with pytest.raises(ValueError, match="dimension"):
        hvd.allgather(torch.tensor(1.0))
    with pytest.raises(ValueError, match="not supported"):
        hvd.allgather(torch.ones(2, dtype=torch.complex64))
    still_works()


def test_name_still_pending_on_this_rank():
    # Rank k submits "dup.k" only after the barrier, so on every other rank it is certainly
    # still pending when they submit it a second time.
    for k in range(hvd.size()):
        if hvd.rank() != k:
            h = hvd.allreduce_async(torch.ones(3), name="dup.%d" % k)
            with pytest.raises(ValueError, match="still pending"):
                hvd.allreduce_async(torch.ones(3), name="dup.%d" % k)
            hvd.barrier()
        else:
            hvd.barrier()
            h = hvd.allreduce_async(torch.ones(3), name="dup.%d" % k)
        hvd.synchronize(h)
        hvd.synchronize(hvd.allreduce_async(torch.ones(3), name="dup.%d" % k))  # reusable once ended
    still_works()


def test_allreduce_op_mismatch_across_ranks():
    with pytest.raises(ChorusArgumentError, match="op"):
        hvd.allreduce(torch.ones(3), op=hvd.Sum if hvd.rank() == 0 else hvd.Max, name="bad_op")
    still_works()


def test_distributed_optimizer_parameter_shape_mismatch_across_ranks():
    # Rank 0's model has a wider hidden layer: its gradients disagree in shape with the other
    # ranks'. step() raises, naming the parameter, on every rank; the job goes on.
    width = 5 if hvd.rank() == 0 else 4
    model = torch.nn.Sequential(torch.nn.Linear(3, width), torch.nn.Linear(width, 2))
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=[("mm." + k, p) for k, p in model.named_parameters()])
    model(torch.ones(4, 3)).sum().backward()
    with pytest.raises(ChorusArgumentError, match=r"mm\.\d\.(weight|bias).*shape|shape.*mm\.\d\.(weight|bias)"):
        opt.step()
    # Every gradient's operation was waited for and dropped: zero_grad() (which refuses while
    # any is pending) goes through, and the runtime takes new work.
    assert not opt._handles
    opt.zero_grad()
    still_works()
