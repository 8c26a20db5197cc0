"""Process sets, with Horovod's names. Chorus runs every collective over all ranks of the job
today: the global process set works everywhere a ``process_set=`` argument is taken; adding any
other set raises NotImplementedError until a later issue builds them."""

_NOT_YET = ("process sets other than the global one are not supported yet by Chorus; "
            "leave process_set= at its default (hvd.global_process_set)")


class ProcessSet:
    """A set of ranks that runs collectives together. ``ProcessSet([0, 2])`` can be built (as
    in Horovod) but only ``global_process_set`` can be used today."""

    def __init__(self, ranks_or_comm=None):
        self.process_set_id = None
        if ranks_or_comm is None:
            self.ranks = None
        elif hasattr(ranks_or_comm, "Get_rank"):  # an mpi4py communicator
            raise NotImplementedError("ProcessSet from an MPI communicator: Chorus does not use MPI; "
                                      "pass a list of ranks")
        else:
            self.ranks = sorted(int(r) for r in ranks_or_comm)
        self._basics = None

    def _is_global(self):
        return self.process_set_id == 0

    def size(self):
        """Number of ranks in the set (the job's size for the global set)."""
        if self._is_global():
            return self._basics.size()
        return len(self.ranks) if self.ranks is not None else None

    def rank(self):
        """This process' rank within the set (its job rank for the global set)."""
        if self._is_global():
            return self._basics.rank()
        if self.ranks is None:
            return None
        r = self._basics.rank() if self._basics else None
        return self.ranks.index(r) if r in self.ranks else -1

    def included(self):
        """Whether this process belongs to the set."""
        if self._is_global():
            return True
        return self.rank() is not None and self.rank() >= 0

    def __eq__(self, other):
        return isinstance(other, ProcessSet) and self.process_set_id == other.process_set_id \
            and self.process_set_id is not None

    def __hash__(self):
        return hash(self.process_set_id)

    def __repr__(self):
        if self._is_global():
            return "ProcessSet(process_set_id=0, ranks=<all ranks>)"
        return "ProcessSet(process_set_id=%s, ranks=%s)" % (self.process_set_id, self.ranks)


global_process_set = ProcessSet()
global_process_set.process_set_id = 0


def _setup(basics):
    global_process_set._basics = basics


def _check(process_set):
    """Raises unless `process_set` is the global set (None counts as global)."""
    if process_set is None or process_set is global_process_set or \
            (isinstance(process_set, ProcessSet) and process_set.process_set_id == 0):
        return
    if not isinstance(process_set, ProcessSet):
        raise ValueError("process_set must be a ProcessSet (e.g. hvd.global_process_set), got %r"
                         % (process_set,))
    raise NotImplementedError(_NOT_YET)


def add_process_set(process_set):
    """Horovod registers a new set of ranks here; Chorus does not support that yet."""
    raise NotImplementedError(_NOT_YET)


def remove_process_set(process_set):
    """Horovod removes a registered set here; the global set cannot be removed, and no other
    set can exist in Chorus yet."""
    if process_set is global_process_set or getattr(process_set, "process_set_id", None) == 0:
        raise ValueError("the global process set cannot be removed")
    raise NotImplementedError(_NOT_YET)
