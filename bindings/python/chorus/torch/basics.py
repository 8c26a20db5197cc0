"""Setup and queries of chorus.torch (horovod.torch's names): init, shutdown, rank, size, ...,
the build queries, and the reduction op constants."""

import atexit
import os
import threading

from chorus import _chorus_torch as _lib
from chorus.common import process_sets as _process_sets
from chorus.common.process_sets import global_process_set
from chorus.torch import torchrun_store as _torchrun_store

# Reduction ops, with Horovod's values.
Average = 0
Sum = 1
Adasum = 2
Min = 3
Max = 4
Product = 5

_OP_NAMES = {Average: "Average", Sum: "Sum", Adasum: "Adasum", Min: "Min", Max: "Max", Product: "Product"}
# Horovod op -> the op code of chorus._chorus_torch (sum 0, average 1, min 2, max 3, product 4).
_CHORUS_OP = {Sum: 0, Average: 1, Min: 2, Max: 3, Product: 4}

_NOT_INITIALIZED = "Chorus has not been initialized; use hvd.init()."

_state_lock = threading.Lock()
_topology = None  # (cross_rank, cross_size, is_homogeneous), measured by init()
_generation = 0   # bumped by init() and shutdown(): handles of an older job are stale


# Called by init() and shutdown(): the op layer forgets its handles and name counters.
_reset_hooks = []


def init(comm=None, process_sets=None):
    """Starts this process' part of the job: reads rank, size and the rendezvous address from
    the environment (chorusrun, torchrun, Open MPI, PMI, Slurm; none: one rank), connects to
    the other ranks. Blocks until every rank arrived. A second call is a no-op.

    `process_sets`: Horovod's static process sets (a list of ProcessSet), registered on every
    rank alike (every rank must pass the same list); their process_set_id is set here. A set
    given twice (or one of every rank) raises ValueError after init, as in Horovod. "dynamic":
    none now, but HOROVOD_DYNAMIC_PROCESS_SETS=1 so that add_process_set works later.
    `comm` (an MPI communicator or a list of ranks) is not supported: the job is every rank
    the launcher started."""
    global _topology, _generation
    if comm is not None and not (isinstance(comm, (list, tuple)) and len(comm) == 0):
        raise NotImplementedError("hvd.init(comm=...): Chorus does not run on an MPI communicator or a "
                                  "subset of ranks; call hvd.init() and launch the ranks with chorusrun, "
                                  "torchrun or mpirun")
    if isinstance(process_sets, str) and process_sets.lower() == "dynamic":
        process_sets = []
        os.environ["HOROVOD_DYNAMIC_PROCESS_SETS"] = "1"
    static = _process_sets._static_lists(process_sets)
    if _lib.is_initialized():
        if static:
            _lib.init_with_process_sets(static)  # raises unless these are the sets in force
            _process_sets._init_process_sets(list(process_sets))
        return
    # Under torchrun, Chorus's store address is agreed through torch's store (torchrun_store.py).
    ours = _torchrun_store.meet(_generation) if _torchrun_store.under_torchrun() else []
    try:
        _lib.init_with_process_sets(static)
    finally:
        for name in ours:
            os.environ.pop(name, None)
    with _state_lock:
        _generation += 1
        _topology = None
    for hook in _reset_hooks:
        hook()
    _process_sets._setup(_Queries)
    _process_sets._init_process_sets(list(process_sets or []))
    _topology = _measure_topology()
    _process_sets._refuse_duplicates(list(process_sets or []))


def _measure_topology():
    """Every rank's (local_rank, local_size), gathered once: cross_rank, cross_size and
    is_homogeneous follow from them exactly."""
    n, me = _lib.size(), _lib.rank()
    if n == 1:
        return 0, 1, True
    import torch
    mine = torch.tensor([[_lib.local_rank(), _lib.local_size()]], dtype=torch.int64)
    op = _lib.allgather_async(mine, "chorus.init.topology")
    op.wait()
    table = op.result().tolist()
    my_local = table[me][0]
    same_local = [r for r in range(n) if table[r][0] == my_local]
    homogeneous = len({row[1] for row in table}) == 1
    return same_local.index(me), len(same_local), homogeneous


def shutdown():
    """Stops the job: every pending operation ends with HorovodInternalError. A no-op when not
    initialized; init() may be called again afterwards."""
    global _topology, _generation
    _lib.shutdown()
    with _state_lock:
        _generation += 1
        _topology = None
    for hook in _reset_hooks:
        hook()


@atexit.register
def _shutdown_at_exit():
    # Before the interpreter frees the tensors of pending operations (Chorus' own exit hook
    # runs later, after Python's teardown).
    try:
        _lib.shutdown()
    except Exception:  # noqa: BLE001 - nothing to report to at exit
        pass


def is_initialized():
    """True between init() and shutdown()."""
    return _lib.is_initialized()


def _checked(value):
    if value < 0 or not _lib.is_initialized():
        raise ValueError(_NOT_INITIALIZED)
    return value


def size():
    """Number of ranks in the job."""
    return _checked(_lib.size())


def rank():
    """This process' rank, in [0, size())."""
    return _checked(_lib.rank())


def local_size():
    """Number of ranks of this job on this host."""
    return _checked(_lib.local_size())


def local_rank():
    """This process' rank among the ranks on its host."""
    return _checked(_lib.local_rank())


def _topo():
    _checked(_lib.size())
    if _topology is None:
        raise ValueError(_NOT_INITIALIZED)
    return _topology


def cross_rank():
    """This process' rank among the ranks that share its local rank (one per host)."""
    return _topo()[0]


def cross_size():
    """Number of ranks that share this process' local rank (the number of hosts, when every
    host runs the same number of ranks)."""
    return _topo()[1]


def is_homogeneous():
    """True when every host runs the same number of ranks."""
    return _topo()[2]


# Build queries: what this Chorus build uses. It moves tensors over its own TCP data plane;
# it is neither MPI nor Gloo, and its pipeline takes CPU tensors only.
def mpi_built():
    return False


def mpi_enabled():
    return False


def mpi_threads_supported():
    raise ValueError("Chorus does not use MPI; mpi_threads_supported() has no answer")


def gloo_built():
    return False


def gloo_enabled():
    return False


def nccl_built():
    return False


def ddl_built():
    return False


def ccl_built():
    return False


def cuda_built():
    return False


def rocm_built():
    return False


def start_timeline(file_path, mark_cycles=False):
    """Creates a timeline file at `file_path` and begins recording (Horovod's timeline).

    stop_timeline() (or shutdown()) writes it as Chrome-trace JSON, for chrome://tracing or
    ui.perfetto.dev: each tensor as a span from enqueue to completion holding its phases
    (NEGOTIATE_ALLREDUCE, QUEUE, ALLREDUCE, ...), negotiation cycles, fusion buckets and the
    chunks of each data-plane stream. `mark_cycles=True` adds a CYCLE_START instant per
    negotiation cycle. As in Horovod, only rank 0 records and writes the file: on the other
    ranks the call does nothing. Calling it again while recording writes the first timeline
    and starts a new one at the new path. It records beside CHORUS_TRACE=<dir> (the job-long
    trace of every rank) without disturbing it.

    Raises a `ValueError` if Chorus is not initialized, a `RuntimeError` naming the path if
    the file cannot be created."""
    if not _lib.is_initialized():
        raise ValueError(_NOT_INITIALIZED)
    _lib.start_timeline(str(file_path), bool(mark_cycles))


def settings():
    """The settings in force on this rank, as a dict: fusion_threshold, chunk_bytes, streams,
    cycle_time_ms, in_place_bytes. With CHORUS_AUTOTUNE=1 the autotuner moves them, on every
    rank alike at an agreed cycle. A DistributedOptimizer's buckets follow fusion_threshold
    with opt.set_bucket_bytes(settings()["fusion_threshold"] // 4) (a fraction: buckets as large
    as the threshold overlap less with backward), called on every rank between the same two
    steps (it uses the lowest rank's value).

    Raises a `ValueError` if Chorus is not initialized."""
    if not _lib.is_initialized():
        raise ValueError(_NOT_INITIALIZED)
    return dict(_lib.settings())


def stop_timeline():
    """Stops the active timeline recording and writes the file (on rank 0; see
    start_timeline). A no-op when no timeline is recording.

    Raises a `ValueError` if Chorus is not initialized."""
    if not _lib.is_initialized():
        raise ValueError(_NOT_INITIALIZED)
    _lib.stop_timeline()


def _add_process_set_impl(ranks):
    """The new set's id, or None when a set of these ranks exists (chorus.common.process_sets)."""
    try:
        return _lib.add_process_set(list(ranks))
    except ValueError as e:
        if "exists already" in str(e):
            return None
        raise


def _remove_process_set_impl(process_set_id):
    """`process_set_id` once removed, or None when no such set exists."""
    try:
        _lib.remove_process_set(int(process_set_id))
    except ValueError as e:
        if "does not exist" in str(e):
            return None
        raise
    return process_set_id


class _Queries:
    """What chorus.common.process_sets asks of the job (Horovod's basics)."""
    size = staticmethod(size)
    rank = staticmethod(rank)
    _process_set_size = staticmethod(lambda i: _lib.process_set_size(int(i)))
    _process_set_rank = staticmethod(lambda i: _lib.process_set_rank(int(i)))
    _get_process_set_ids_and_ranks = staticmethod(
        lambda: {i: _lib.process_set_ranks(i) for i in _lib.process_set_ids()})
    _add_process_set_impl = staticmethod(_add_process_set_impl)
    _remove_process_set_impl = staticmethod(_remove_process_set_impl)
