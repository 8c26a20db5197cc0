// Static process sets: registration at init and the check that every rank got the same lists.
#include "bindings/cpp/static_sets.hpp"

#include <algorithm>
#include <cstdint>
#include <string>

#include "runtime/collectives/communicator.hpp"

namespace chorus::detail {
namespace {

std::string format(const std::vector<std::vector<int>>& lists) {
  std::string out = "[";
  for (const auto& l : lists) {
    out += out.size() > 1 ? ", [" : "[";
    for (std::size_t i = 0; i < l.size(); ++i) out += (i ? "," : "") + std::to_string(l[i]);
    out += "]";
  }
  return out + "]";
}

// FNV-1a over the sorted lists; `valid` false marks a rank whose lists were refused, so that
// its peers see a difference too.
int64_t digest(const std::vector<std::vector<int>>& lists, bool valid) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](uint64_t v) {
    for (int i = 0; i < 8; ++i) h = (h ^ ((v >> (8 * i)) & 0xff)) * 1099511628211ull;
  };
  mix(valid ? 1 : 2);
  mix(lists.size());
  for (auto l : lists) {
    std::sort(l.begin(), l.end());
    mix(l.size());
    for (int r : l) mix(static_cast<uint64_t>(r));
  }
  return static_cast<int64_t>(h >> 1);
}

// The lists as registered: sorted, each once, none equal to the job's ranks (the global set),
// as Horovod's init maps a repeated set to the id it already has.
std::vector<std::vector<int>> distinct(const std::vector<std::vector<int>>& lists, int world_size) {
  std::vector<std::vector<int>> out;
  std::vector<int> all;
  for (int r = 0; r < world_size; ++r) all.push_back(r);
  for (auto l : lists) {
    std::sort(l.begin(), l.end());
    if (l != all && std::find(out.begin(), out.end(), l) == out.end()) out.push_back(std::move(l));
  }
  return out;
}

}  // namespace

result<std::shared_ptr<process_set_table>> static_sets(communicator& comm, const std::vector<std::vector<int>>& lists) {
  auto table = std::make_shared<process_set_table>(comm.size());
  status local;
  for (const auto& l : distinct(lists, comm.size())) {
    auto id = table->add(l);
    if (!id) {
      local = id.error();
      break;
    }
  }
  // Always exchanged (two one-element allreduces at init): a rank given no sets must still
  // answer a peer that was given some.
  int64_t lo = digest(lists, local.ok()), hi = lo;
  if (auto st = comm.allreduce(&lo, 1, dtype::i64, reduce_op::min); !st.ok()) return st;
  if (auto st = comm.allreduce(&hi, 1, dtype::i64, reduce_op::max); !st.ok()) return st;
  if (!local.ok())
    return status{errc::invalid_argument, "process_sets " + format(lists) + " on rank " + std::to_string(comm.rank()) +
                                              ": " + local.message()};
  if (lo != hi)
    return status{errc::invalid_argument, "process_sets " + format(lists) + " on rank " + std::to_string(comm.rank()) +
                                              " differ from those of another rank; pass the same lists, in the "
                                              "same order, on every rank"};
  return table;
}

status same_static_sets(const process_set_table& table, const std::vector<std::vector<int>>& lists) {
  auto sets = table.all();
  auto want = distinct(lists, table.world_size());
  bool same = sets.size() == want.size() + 1;
  for (std::size_t i = 0; same && i < want.size(); ++i)
    same = sets[i + 1]->id == static_cast<int>(i + 1) && sets[i + 1]->ranks == want[i];
  if (same || lists.empty()) return {};
  return {errc::invalid_argument, "chorus::init: already initialized with other process sets; call shutdown() "
                                  "first to start again with process_sets " + format(lists)};
}

}  // namespace chorus::detail
