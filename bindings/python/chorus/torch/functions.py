"""Helpers of chorus.torch (horovod.torch's names): broadcast_parameters,
broadcast_optimizer_state, broadcast_object, allgather_object."""

import io
import pickle

import torch

from chorus.common.process_sets import _check as _check_process_set
from chorus.common.process_sets import global_process_set
from chorus.torch.mpi_ops import allgather, broadcast_, broadcast_async_, synchronize
from chorus.torch.mpi_ops import rank

try:  # Horovod pickles with cloudpickle (lambdas, local classes); plain pickle otherwise
    import cloudpickle as _pickler
except ImportError:  # pragma: no cover - depends on the machine
    _pickler = pickle


def broadcast_parameters(params, root_rank, prefix=None):
    """Copies rank `root_rank`'s parameters into every rank's, in place. `params` is a
    ``model.state_dict()`` (or any dict name -> tensor), ``model.named_parameters()`` or
    ``model.parameters()`` (a list or generator)."""
    if isinstance(params, dict):
        params = sorted(params.items())
    elif isinstance(params, list) or hasattr(params, "__iter__"):
        params = [p if isinstance(p, tuple) else (None, p) for p in params]
    else:
        raise ValueError("invalid params of type: %s" % type(params))
    handles = []
    for name, p in params:
        if p is None:
            continue
        if name is not None and prefix:
            name = prefix + name
        handles.append(broadcast_async_(p, root_rank, name))
    for h in handles:
        synchronize(h)


def _pickle(obj):
    b = io.BytesIO()
    _pickler.dump(obj, b)
    return b.getvalue()


def broadcast_object(obj, root_rank=0, name=None, process_set=global_process_set):
    """Returns rank `root_rank`'s `obj` (pickled, broadcast, unpickled) on every rank."""
    _check_process_set(process_set)
    name = name or type(obj).__name__
    if rank() == root_rank:
        payload = torch.frombuffer(bytearray(_pickle(obj)), dtype=torch.uint8)
        length = torch.tensor([payload.numel()], dtype=torch.int64)
    else:
        length = torch.zeros(1, dtype=torch.int64)
    # As in Horovod: the length first, then the bytes, under fixed names ("<name>.sz",
    # "<name>.t"). The bytes' shape changes with the object, which a name may do once its
    # previous operation ended (broadcast_ waits for it).
    broadcast_(length, root_rank, name + ".sz", process_set)
    if rank() != root_rank:
        payload = torch.empty(int(length.item()), dtype=torch.uint8)
    broadcast_(payload, root_rank, name + ".t", process_set)
    if rank() == root_rank:
        return obj
    return pickle.loads(payload.numpy().tobytes())


def allgather_object(obj, name=None, process_set=global_process_set):
    """Returns the list of every rank's `obj`, in rank order."""
    _check_process_set(process_set)
    name = name or type(obj).__name__
    payload = torch.frombuffer(bytearray(_pickle(obj)), dtype=torch.uint8)
    lengths = allgather(torch.tensor([payload.numel()], dtype=torch.int64), name=name + ".sz",
                        process_set=process_set).tolist()
    gathered = allgather(payload, name=name + ".t", process_set=process_set).numpy().tobytes()
    out, start = [], 0
    for n in lengths:
        out.append(pickle.loads(gathered[start:start + n]))
        start += n
    return out


def _initialize_state(optimizer):
    """A fresh optimizer has no state to broadcast: take one step with zero gradients to create
    it, then restore the parameters and the gradients that existed (so that no rank's weights
    move); a parameter that had no gradient keeps the zeros, as in Horovod."""
    params = [p for g in optimizer.param_groups for p in g["params"] if p.requires_grad]
    saved = [(p, p.detach().clone(), p.grad) for p in params]
    for p in params:
        p.grad = torch.zeros_like(p)
    step = type(optimizer).__mro__[1].step if getattr(optimizer, "_chorus_distributed", False) \
        else type(optimizer).step
    step(optimizer)  # a DistributedOptimizer's own step would allreduce: take the base one
    with torch.no_grad():
        for p, value, grad in saved:
            p.copy_(value)
            if grad is not None:
                p.grad = grad


def broadcast_optimizer_state(optimizer, root_rank, prefix="Parameter."):
    """Copies rank `root_rank`'s optimizer state (per-parameter tensors and scalars, and the
    hyper-parameters of every param group such as the learning rate) into every rank's."""
    if isinstance(optimizer, torch.optim.LBFGS):
        raise ValueError("cannot broadcast torch.optim.LBFGS state")
    if len(optimizer.state_dict()["state"]) == 0:
        _initialize_state(optimizer)
    state_dict = optimizer.state_dict()

    # 1. Hyper-parameters and non-tensor state: one pickled object from the root.
    groups = [{k: v for k, v in g.items() if k != "params"} for g in state_dict["param_groups"]]
    scalars = {}
    tensors = []
    for pid in sorted(state_dict["state"]):
        for key in sorted(state_dict["state"][pid]):
            value = state_dict["state"][pid][key]
            if torch.is_tensor(value):
                tensors.append(("%s%s.%s" % (prefix, pid, key), value))
            else:
                scalars[(pid, key)] = value
    groups, scalars = broadcast_object((groups, scalars), root_rank, name=prefix + "optimizer.scalars")
    for group, options in zip(optimizer.param_groups, groups):
        group.update(options)

    # 2. State tensors, in place (state_dict() shares them with the optimizer).
    broadcast_parameters(tensors, root_rank)
    if scalars:
        index = {pid: p for g, sg in zip(optimizer.param_groups, state_dict["param_groups"])
                 for pid, p in zip(sg["params"], g["params"])}
        for (pid, key), value in scalars.items():
            optimizer.state[index[pid]][key] = value
