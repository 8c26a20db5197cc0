"""chorus.torch: horovod.torch's API over Chorus. Switch a Horovod script with

    import chorus.torch as hvd

Same names, arguments, defaults, return values and exception types (HorovodInternalError when
the job fails). Not available yet: Adasum. Process sets (static and dynamic) run on CPU
tensors. The timeline (start_timeline / stop_timeline) is written by rank 0 only, as in Horovod."""

from chorus.common.exceptions import ChorusArgumentError, HorovodInternalError, HostsUpdatedInterrupt
from chorus.common.process_sets import ProcessSet, add_process_set, global_process_set, remove_process_set
from chorus.torch.basics import (Adasum, Average, Max, Min, Product, Sum, ccl_built, cross_rank, cross_size,
                                 cuda_built, ddl_built, gloo_built, gloo_enabled, init, is_homogeneous,
                                 is_initialized, local_rank, local_size, mpi_built, mpi_enabled,
                                 mpi_threads_supported, nccl_built, rank, rocm_built, shutdown, size,
                                 settings, start_timeline, stop_timeline)
from chorus.torch.compression import Compression
from chorus.torch.functions import (allgather_object, broadcast_object, broadcast_optimizer_state,
                                    broadcast_parameters)
from chorus.torch.mpi_ops import (allgather, allgather_async, allreduce, allreduce_, allreduce_async,
                                  allreduce_async_, barrier, broadcast, broadcast_, broadcast_async,
                                  broadcast_async_, grouped_allgather, grouped_allgather_async, grouped_allreduce,
                                  grouped_allreduce_, grouped_allreduce_async, grouped_allreduce_async_, poll,
                                  sparse_allreduce_async, synchronize)
from chorus.torch.optimizer import DistributedOptimizer
from chorus.torch.scatter_ops import (alltoall, alltoall_async, grouped_reducescatter, grouped_reducescatter_async,
                                      join, reducescatter, reducescatter_async)
from chorus.torch.sync_batch_norm import SyncBatchNorm
from chorus.torch import elastic  # noqa: E402  (hvd.elastic)
from chorus.torch import distributed  # noqa: E402,F401  (registers torch.distributed's "chorus" backend)
