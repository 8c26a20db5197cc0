// What Chorus derives from the variables of the Slurm job step that started a rank by srun
// alone. Where the ranks meet: rank 0 (SLURM_PROCID=0) runs on the first node of the step, so
// the address is that node's name and a port derived from the job and step ids, the same in
// every task of the step and different for the steps of one allocation (CHORUS_RENDEZVOUS or
// MASTER_ADDR/MASTER_PORT override it). How many tasks share this node: this node's entry of
// SLURM_TASKS_PER_NODE, which differs between nodes when the tasks do not divide evenly.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "runtime/config/reader.hpp"
#include "runtime/core/status.hpp"

namespace chorus {

/// Derived ports lie in [slurm_port_base, slurm_port_base + slurm_port_span).
inline constexpr uint16_t slurm_port_base = 40000;
inline constexpr uint16_t slurm_port_span = 10000;

struct slurm_address {
  std::string host;
  uint16_t port = 0;
};

/// The first host of a Slurm host list: "node[07-09,12],gpu1" -> "node07", "a,b" -> "a".
/// Errors (errc::config) name `variable` and say what is malformed.
result<std::string> first_host(std::string_view list, const char* variable);

/// The tasks on node `node` (SLURM_NODEID) of a SLURM_TASKS_PER_NODE list in Slurm's
/// compressed form: "2(x3),1" is 2 on nodes 0-2 and 1 on node 3. Errors (errc::config) quote
/// the list and say what is wrong, or that it has no entry for `node`.
result<int> tasks_on_node(std::string_view tasks_per_node, int node);

/// The step's rendezvous address from SLURM_STEP_NODELIST (else SLURM_JOB_NODELIST, then
/// SLURM_NODELIST), SLURM_JOB_ID and SLURM_STEP_ID (0 where unset); nullopt where no node list
/// or no job id is set.
result<std::optional<slurm_address>> read_slurm_rendezvous(const env_lookup& get);

}  // namespace chorus
