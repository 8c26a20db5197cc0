"""Process sets, with Horovod's names and behaviour (horovod.common.process_sets): a set of ranks
that runs collectives among themselves, concurrently with other sets. Static sets are given to
``hvd.init(process_sets=[...])``; with ``HOROVOD_DYNAMIC_PROCESS_SETS=1`` (or
``CHORUS_DYNAMIC_PROCESS_SETS=1``) ``add_process_set`` and ``remove_process_set`` change them
later, collectively (every rank calls them alike). Every op takes ``process_set=``."""

_basics = None  # the framework's queries (chorus.torch.basics._Queries), set by _setup()


class ProcessSet:
    """A set of job ranks that run collectives together. Build it from a list of ranks and pass
    it to hvd.init(process_sets=[...]) or hvd.add_process_set(); once registered its
    ``process_set_id`` is set (0 is the global set, every rank)."""

    process_set_id = None
    ranks = None
    mpi_comm = None

    def __init__(self, ranks_or_comm=None):
        if ranks_or_comm is None:
            self.ranks = None
            return
        if hasattr(ranks_or_comm, "Get_rank"):  # an mpi4py communicator
            raise ValueError("Apparently you tried to build a ProcessSet from an MPI communicator, but Chorus "
                             "does not use MPI; build it from a list of ranks")
        try:
            ranks = sorted(ranks_or_comm)
        except TypeError:
            raise ValueError("ProcessSet should be initialized with a list of process ranks or an mpi4py Comm "
                             "object") from None
        if any(not isinstance(r, int) for r in ranks):
            raise ValueError("ProcessSet should be initialized with a list of process ranks or an mpi4py Comm "
                             "object")
        self.ranks = ranks

    def _invalidate(self):
        self.process_set_id = None

    def size(self):
        """Number of ranks in the set, or None if it is not registered."""
        if self.process_set_id is None:
            return None
        return _basics._process_set_size(self.process_set_id)

    def rank(self):
        """This process' rank within the set, or None if it is not registered. Raises
        ValueError when this process is not a member. (Ops like broadcast still take global
        ranks, as hvd.rank() gives them.)"""
        if self.process_set_id is None:
            return None
        return _basics._process_set_rank(self.process_set_id)

    def included(self):
        """Whether this process belongs to the set, or None if its ranks are unknown."""
        if self.ranks is None:
            return None
        return _basics.rank() in self.ranks

    def __str__(self):
        return "ProcessSet(process_set_id=%s, ranks=%s, mpi_comm=%s)" % (self.process_set_id, self.ranks,
                                                                       self.mpi_comm)

    __repr__ = __str__


global_process_set = ProcessSet([])
global_process_set.process_set_id = 0


def _setup(basics):
    """Chorus internal: called by the framework's init() once the job runs."""
    global _basics
    _basics = basics


def _init_process_sets(process_set_list):
    """Chorus internal, after init(): sets the ids of the static sets (registered in list order,
    a repeated set only once: its clones are invalidated, as in Horovod) and the global set's
    ranks."""
    id_to_ranks = _basics._get_process_set_ids_and_ranks()
    ranks_to_id = {tuple(r): i for i, r in id_to_ranks.items()}
    seen = {0}
    for ps in process_set_list:
        if ps is global_process_set:
            continue
        ps.process_set_id = ranks_to_id.get(tuple(ps.ranks))
        if ps.process_set_id in seen:
            ps._invalidate()
        else:
            seen.add(ps.process_set_id)
    global_process_set.ranks = list(id_to_ranks[0])


def _refuse_duplicates(process_set_list):
    """Horovod's check after init: an entry that got no id repeats an earlier set (or the
    global one)."""
    for index, ps in enumerate(process_set_list):
        if ps is not global_process_set and ps.process_set_id is None:
            raise ValueError("Horovod could not be initialized because process_sets entry number %d is a duplicate: %s"
                             % (index, ps))


def _static_lists(process_set_list):
    """The rank lists to register at init: each set once, in order, the global set left out."""
    out = []
    for ps in process_set_list or []:
        if not isinstance(ps, ProcessSet):
            raise ValueError("hvd.init(process_sets=...): expected a list of ProcessSet, got %r" % (ps,))
        if ps is global_process_set:
            continue
        if ps.ranks is None:
            raise ValueError("hvd.init(process_sets=...): %s has no ranks" % (ps,))
        if list(ps.ranks) not in out:  # the runtime registers each set once, as Horovod does
            out.append(list(ps.ranks))
    return out


def _check(process_set):
    """The id an op runs in: 0 for the global set (or None); raises ValueError for anything
    that is not a registered ProcessSet."""
    if process_set is None or process_set is global_process_set:
        return 0
    if not isinstance(process_set, ProcessSet):
        raise ValueError("process_set must be a ProcessSet (e.g. hvd.global_process_set), got %r" % (process_set,))
    if process_set.process_set_id is None:
        raise ValueError("%s is not registered: pass it to hvd.init(process_sets=[...]) or hvd.add_process_set() "
                         "first (a removed set cannot be used)" % (process_set,))
    return process_set.process_set_id


def add_process_set(process_set):
    """Adds a process set after initialization and returns it (a ProcessSet, also when given a
    list of ranks). Requires HOROVOD_DYNAMIC_PROCESS_SETS=1; every rank must call it with the
    same ranks. A set with the same ranks as a registered one raises ValueError."""
    if _basics is None:
        raise ValueError("Horovod has not been initialized; use hvd.init().")
    if not isinstance(process_set, ProcessSet):
        process_set = ProcessSet(process_set)
    if process_set.ranks is None:
        raise NotImplementedError("Dynamically adding process sets defined by an MPI communicator is not "
                                  "implemented. Please build the process set via a list of ranks.")
    process_set_id = _basics._add_process_set_impl(process_set.ranks)
    if process_set_id is None:
        raise ValueError("Attempted to add a duplicate process set: %s" % (process_set,))
    process_set.process_set_id = process_set_id
    return process_set


def remove_process_set(process_set):
    """Removes a process set (every rank calls it alike) and returns whether it was removed; the
    object is invalidated. The global set and unregistered sets are not removed (False).
    Requires HOROVOD_DYNAMIC_PROCESS_SETS=1."""
    if _basics is None:
        raise ValueError("Horovod has not been initialized; use hvd.init().")
    process_set_id = process_set.process_set_id
    if process_set_id is None or process_set_id == 0:
        return False
    process_set._invalidate()
    returned = _basics._remove_process_set_impl(process_set_id)
    return returned is not None
