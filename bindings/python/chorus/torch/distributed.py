"""torch.distributed's "chorus" backend. Importing this module (or chorus.torch) registers it, so a
torch.distributed program switches with one word:

    import chorus.torch.distributed  # noqa: F401  (or: import chorus.torch)
    torch.distributed.init_process_group("chorus")

Every process group (the default one, new_group, new_subgroups) gets a data plane of its own,
built through the store torch hands it (no port of Chorus's own): multi-stream TCP, shared memory
between the ranks of a host, the hierarchical algorithms across hosts. torch.distributed already
issues a group's collectives in the same order on every member, so they run without Chorus's
negotiation; a member whose call differs (another shape, dtype or collective) fails the group
with an error naming the call and the ranks. CPU tensors only. See docs/python.md.

torch 1.13 tells a backend nothing when a group is destroyed, so this module wraps
torch.distributed.destroy_process_group: a Chorus group it destroys ends its pending work and
closes its connections at once, and its later calls raise."""

import datetime

import torch.distributed as _dist

from chorus import _chorus_torch as _lib

BACKEND = "chorus"


def _create_process_group(backend_options, pg_options):
    """torch.distributed's creator (extended API): the group's store, rank, size, timeout, name and
    global ranks."""
    if pg_options is not None:
        raise RuntimeError("the Chorus backend takes no pg_options; it is configured by the CHORUS_* variables")
    timeout = backend_options.timeout
    seconds = timeout.total_seconds() if isinstance(timeout, datetime.timedelta) else float(timeout)
    ranks = list(backend_options.global_ranks_in_group) or list(range(backend_options.group_size))
    return _lib._create_process_group(backend_options.store, backend_options.group_rank,
                                      backend_options.group_size, seconds, str(backend_options.group_id), ranks)


def _wrap_destroy(torch_destroy):
    def destroy_process_group(group=None):
        c10d = _dist.distributed_c10d
        if group is None or group == c10d.GroupMember.WORLD:
            doomed = list(c10d._pg_map.keys())
        elif group == c10d.GroupMember.NON_GROUP_MEMBER:
            doomed = []
        else:
            doomed = [group]
        torch_destroy(group)
        for pg in doomed:
            _lib._shut_down_process_group(pg)
    destroy_process_group.__doc__ = torch_destroy.__doc__
    destroy_process_group._chorus_wraps = torch_destroy
    return destroy_process_group


def _register():
    if BACKEND.upper() not in _dist.Backend._plugins:
        _dist.Backend.register_backend(BACKEND, _create_process_group, extended_api=True)
    if not hasattr(_dist.distributed_c10d.destroy_process_group, "_chorus_wraps"):
        wrapped = _wrap_destroy(_dist.distributed_c10d.destroy_process_group)
        _dist.distributed_c10d.destroy_process_group = wrapped
        _dist.destroy_process_group = wrapped


_register()
