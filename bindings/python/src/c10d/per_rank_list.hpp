// The check of a gathering or scattering call's per-rank tensor list, shared by calls.cpp and
// calls_gather.cpp; internal to them.
#pragma once

#include <string>
#include <vector>

#include "c10d/call_support.hpp"

namespace chorus::python::call_support {

/// `lists` must hold one list of `size` tensors (one per rank), each a checked tensor of `ref`'s
/// dtype and element count. `role` names the list's side ("output" or "input"), `ref_role` the
/// side of `ref`; `root_only` says only the root passes the list (gather, scatter).
inline void check_per_rank_list(const std::string& call, const std::vector<std::vector<at::Tensor>>& lists, int size,
                                const at::Tensor& ref, const std::string& role, const std::string& ref_role,
                                bool root_only) {
  if (lists.size() != 1 || lists[0].size() != static_cast<std::size_t>(size))
    refuse(call, (root_only ? "the root needs one " : "needs one ") + role + " list of " + std::to_string(size) +
                     (root_only ? " tensors" : " tensors (one per rank)"));
  for (const auto& t : lists[0]) {
    check_tensor(call, t);
    if (t.scalar_type() != ref.scalar_type() || t.numel() != ref.numel())
      refuse(call, role + " " + describe(t) + " does not match the " + ref_role + " " + describe(ref));
  }
}

/// Gather and scatter: checks the root rank, then the per-rank list, which only the root passes
/// (checked as above; the other ranks must pass none). Returns the root and whether it is this rank.
struct root_place {
  int root;
  bool am_root;
};
inline root_place check_root_list(const std::string& call, int64_t root_rank, int rank, int size,
                                  const std::vector<std::vector<at::Tensor>>& lists, const at::Tensor& ref,
                                  const std::string& role, const std::string& ref_role) {
  check_root(call, root_rank, size);
  const int root = static_cast<int>(root_rank);
  if (rank == root)
    check_per_rank_list(call, lists, size, ref, role, ref_role, true);
  else if (!lists.empty())
    refuse(call, "only the root (rank " + std::to_string(root) + ") takes " + role + " tensors");
  return {root, rank == root};
}

/// Copies row r of the gathered bytes `out` (`n` bytes each) into `list[r]`.
inline void copy_rows_in(const std::vector<at::Tensor>& list, const at::Tensor& out, std::size_t n) {
  for (std::size_t r = 0; r < list.size(); ++r) copy_in(list[r], bytes_ptr(out) + r * n);
}

}  // namespace chorus::python::call_support
