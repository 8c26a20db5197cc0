"""hvd.init() under torchrun: where Chorus's store listens, agreed through torch's own store.

torchrun hands workers MASTER_ADDR and MASTER_PORT for torch's TCPStore, a port it checked (or,
with the static rendezvous, that its agent holds). MASTER_PORT + 1, nobody checked: any socket of
rank 0's host may hold it. So under torchrun, unless CHORUS_RENDEZVOUS says otherwise, rank 0
binds a free port for Chorus's store and publishes its address in torch's store at MASTER_PORT,
where every rank reads it. Rank 0 hands the bound socket to the runtime (CHORUS_RENDEZVOUS_FD),
so nobody can take the port in between. With torchrun's c10d rendezvous the worker of rank 0
serves torch's store (TORCHELASTIC_USE_AGENT_STORE=False): it does so as torch's env://
initialisation does, multi-tenant, and keeps it for the life of the process, so that a later
init_process_group in this process shares that server instead of binding the port again."""

import os
import socket
from datetime import timedelta

from chorus import _chorus_torch as _lib

_ADDRESS = "chorus/rendezvous/%d"
_served = []  # rank 0's torch store: kept, so the server outlives init (multi-tenant)


def under_torchrun():
    """Whether this process is a torchrun worker whose Chorus store address nobody gave."""
    return (bool(os.environ.get("TORCHELASTIC_RUN_ID")) and bool(os.environ.get("MASTER_ADDR")) and
            bool(os.environ.get("MASTER_PORT")) and not _lib.read_variable("CHORUS_RENDEZVOUS"))


def meet(generation):
    """Sets CHORUS_RENDEZVOUS (and on rank 0 CHORUS_RENDEZVOUS_FD) for the coming init; returns
    the names set, which the caller removes after init. `generation` numbers the inits of this
    process (alike on every rank), so that a second init reads its own address."""
    import torch.distributed as dist

    rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    host, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
    wait = timedelta(seconds=float(_lib.read_variable("CHORUS_RENDEZVOUS_TIMEOUT_SECONDS")))
    agent_store = os.environ.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() == "true"
    try:
        store = dist.TCPStore(host, port, size, rank == 0 and not agent_store, wait, wait_for_workers=False,
                              multi_tenant=True)
    except Exception as e:  # noqa: BLE001 - re-raised with what to do
        raise RuntimeError("hvd.init() under torchrun: cannot reach torch's store at %s:%d to agree where "
                           "Chorus's store listens (%s); set CHORUS_RENDEZVOUS=host:port" % (host, port, e))
    names = {"CHORUS_RENDEZVOUS": None}
    if rank == 0:
        listener = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        listener.bind(("", 0))
        listener.listen(128)
        address = "%s:%d" % ("[%s]" % host if ":" in host else host, listener.getsockname()[1])
        store.set(_ADDRESS % generation, address)
        names["CHORUS_RENDEZVOUS_FD"] = str(listener.detach())  # the runtime's from here on
    else:
        store.wait([_ADDRESS % generation], wait)
        address = store.get(_ADDRESS % generation).decode()
    names["CHORUS_RENDEZVOUS"] = address
    if rank == 0:
        _served.append(store)
    for name, value in names.items():
        os.environ[name] = value
    return list(names)
