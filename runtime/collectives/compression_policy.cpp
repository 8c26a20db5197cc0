// compression_policy (compression_policy.hpp): all members on one host identity with rings on, or not.
#include "runtime/collectives/compression_policy.hpp"

namespace chorus {

compression_policy::compression_policy(std::vector<link_entry> entries, shm_compression mode)
    : entries_(std::move(entries)), mode_(mode), job_all_shm_(members_share_memory({})) {}

bool compression_policy::all_shm(const std::vector<int>& members) const {
  return members.empty() ? job_all_shm_ : members_share_memory(members);
}

bool compression_policy::members_share_memory(const std::vector<int>& members) const {
  const std::size_t n = members.empty() ? entries_.size() : members.size();
  if (n < 2) return false;
  auto entry = [&](std::size_t i) -> const link_entry* {
    const int r = members.empty() ? static_cast<int>(i) : members[i];
    if (r < 0 || static_cast<std::size_t>(r) >= entries_.size()) return nullptr;
    return &entries_[static_cast<std::size_t>(r)];
  };
  // plan_links gives a pair shm exactly when both run rings and share the identity, so every
  // pair is shm exactly when every member runs rings under the first member's identity.
  const link_entry* first = entry(0);
  for (std::size_t i = 0; i < n; ++i) {
    const link_entry* e = entry(i);
    if (!e || !e->shm_on || e->identity != first->identity) return false;
  }
  return true;
}

compression compression_policy::effective(compression asked, const std::vector<int>& members) const {
  if (asked == compression::none || mode_ == shm_compression::on) return asked;
  return all_shm(members) ? compression::none : asked;
}

std::string compression_policy::describe() const {
  const std::string setting = "CHORUS_COMPRESSION_SHM=" + std::string(name_of(mode_));
  if (entries_.size() < 2) return "compression kept as asked: one rank, no links (" + setting + ")";
  if (!all_shm()) return "compression kept as asked: some ranks reach each other over TCP (" + setting + ")";
  if (mode_ == shm_compression::on)
    return "compression kept as asked although every rank reaches every other through shared memory (" + setting +
           ")";
  return "compression off for operations among all ranks: every rank reaches every other through shared memory, "
         "where the casts cost more than the bytes they save (" +
         setting + "; set on to compress anyway)";
}

}  // namespace chorus
