// Who this process is in the job: rank, size, local rank and the rendezvous address, read once
// from the environment that a launcher (chorusrun, torchrun, mpirun, a PMI launcher, srun) set.
// Pure parsing over a lookup function, so every launcher's variables are testable in-process.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "runtime/config/reader.hpp"
#include "runtime/core/status.hpp"

namespace chorus {

/// The identity of this process within the job. Plain value; copy freely.
struct process_env {
  int rank = 0;                               ///< global rank, in [0, size)
  int size = 1;                               ///< number of ranks in the job, >= 1
  int local_rank = 0;                         ///< rank among the processes on this host
  int local_size = 1;                         ///< processes of this job on this host
  std::string rendezvous_host = "127.0.0.1";  ///< where rank 0 serves the key-value store
  uint16_t rendezvous_port = 0;               ///< 0: pick any (valid for a single rank only)
  /// CHORUS_RENDEZVOUS_FD: a socket already listening on the rendezvous port, bound by the
  /// launcher and inherited, that rank 0 serves the store on (so nobody can take the port
  /// between the launcher's choice and rank 0's start); -1 when unset. Ignored by other ranks.
  int rendezvous_fd = -1;
  std::string job_secret;  ///< raw bytes decoded from CHORUS_JOB_SECRET (hex); empty if unset
  uint64_t job_id = 0;     ///< CHORUS_JOB_ID (hex); unset: a hash of "host:port"
  /// This attempt's id, set after the rendezvous (wire::session_id; 0 before): what every
  /// data-plane handshake, control key and frame header carries. Shared-memory names and
  /// chorusrun's cleanup keep job_id.
  uint64_t session_id = 0;
  std::chrono::milliseconds rendezvous_timeout{60000};  ///< CHORUS_RENDEZVOUS_TIMEOUT_SECONDS
  /// Elastic jobs (chorusrun --min-np/--max-np): the launcher serves the store and forms the job
  /// in numbered rounds (runtime/rendezvous/elastic_round.hpp). CHORUS_ELASTIC_WORKER: this
  /// process' worker id for life (-1: not elastic). elastic_round: the round init() joined, which
  /// also gave rank, size and local rank and size (-1 before joining, and when not elastic).
  int elastic_worker = -1;
  int64_t elastic_round = -1;
  /// CHORUS_ELASTIC_TIMEOUT_SECONDS (HOROVOD_ELASTIC_TIMEOUT), read by elastic workers only: how
  /// long chorusrun may wait for slots below --min-np before it forms the next round, so a worker
  /// waiting for that round waits this long on top of rendezvous_timeout.
  std::chrono::milliseconds elastic_timeout{600000};
  /// Which family of variables gave the rank: "chorus", "torchrun", "openmpi", "pmi", "slurm",
  /// or "default" (no variables: a single-rank job).
  std::string source = "default";
  /// True when no variable gave the local rank and size, and one host was assumed
  /// (local_rank = rank, local_size = size). Set CHORUS_LOCAL_RANK/CHORUS_LOCAL_SIZE to avoid it.
  bool local_assumed = false;
};

/// Reads the process environment with ::getenv. See the overload for the rules.
result<process_env> read_process_env();

/// Reads rank, size, local rank/size and the rendezvous address through `get`.
///
/// Families, highest precedence first (an empty value counts as unset):
///   chorus    CHORUS_RANK, CHORUS_SIZE, CHORUS_LOCAL_RANK, CHORUS_LOCAL_SIZE
///   torchrun  RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE
///   openmpi   OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE
///   pmi       PMI_RANK, PMI_SIZE, PMI_LOCAL_RANK or MPI_LOCALRANKID, PMI_LOCAL_SIZE or
///             MPI_LOCALNRANKS
///   slurm     SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NTASKS_PER_NODE when a plain
///             number, else the first number of SLURM_TASKS_PER_NODE
/// Each field comes from the first family that sets it; every other family that sets it must
/// agree ("CHORUS_RANK=1 contradicts RANK=0"). Slurm is the exception: its variables describe
/// the job step that started this process, which under `srun torchrun` or `mpirun` inside an
/// allocation is the launcher, not this rank, so they are read only when no other family is set.
///
/// Rendezvous address: CHORUS_RENDEZVOUS=host:port, else MASTER_ADDR and MASTER_PORT + 1 (the
/// port itself belongs to torch.distributed's TCPStore; under torchrun chorus.torch agrees on a
/// free port through that store and sets CHORUS_RENDEZVOUS: torch/torchrun_store.py), else, for ranks started by srun alone (the slurm family), the step's first
/// node and a port derived from the job and step ids (runtime/env/slurm_step.hpp); a job
/// of more than one rank must have one. No variables at all: rank 0 of 1 on 127.0.0.1, port 0.
/// Also CHORUS_RENDEZVOUS_FD (a descriptor number), CHORUS_JOB_SECRET (hex), CHORUS_JOB_ID (hex, up to 16 digits) and
/// CHORUS_RENDEZVOUS_TIMEOUT_SECONDS (runtime/config/variables.hpp: a number in [0.001, 1e9]),
/// CHORUS_ELASTIC_WORKER (a whole number), CHORUS_ELASTIC_TIMEOUT_SECONDS (elastic workers only).
/// Numbers are parsed by runtime/config/reader.hpp, with its error text.
///
/// Every failure is errc::config with a message naming the variable and the value seen
/// (except the secret, whose value is never printed).
result<process_env> read_process_env(const env_lookup& get);

/// What a process group created by a framework (torch.distributed's backend) takes from the
/// environment, its rank, size and store coming from the framework: CHORUS_JOB_SECRET,
/// CHORUS_JOB_ID and CHORUS_RENDEZVOUS_TIMEOUT_SECONDS, parsed as read_process_env does, and the
/// rendezvous host (MASTER_ADDR, else CHORUS_RENDEZVOUS's host, else under srun the step's first
/// node, else 127.0.0.1) towards which an address to listen on is chosen. Rank and size are left at 0 of 1, rendezvous_port at 0.
result<process_env> read_group_env(const env_lookup& get);

/// One line for logs: "rank=1 size=4 local_rank=1 local_size=4 rendezvous=127.0.0.1:29500
/// job_id=0x... source=chorus secret=set rendezvous_timeout_ms=60000". Never prints the secret.
std::string describe(const process_env& env);

/// Chorus serves its store on MASTER_PORT + this when the address comes from MASTER_*.
inline constexpr int master_port_offset = 1;

/// "host:port", with brackets around an IPv6 host: "[::1]:29500".
std::string format_host_port(const std::string& host, uint16_t port);

}  // namespace chorus
