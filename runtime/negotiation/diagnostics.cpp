// Mismatch and stall texts, identical on every rank.
#include "runtime/negotiation/diagnostics.hpp"

#include <algorithm>
#include <sstream>

namespace chorus::negotiation {

std::vector<int> rank_list(const dynamic_bitmap& ranks) {
  std::vector<int> out;
  ranks.for_each_set([&](std::size_t r) { out.push_back(static_cast<int>(r)); });
  return out;
}

std::string format_ranks(const dynamic_bitmap& ranks) {
  auto list = rank_list(ranks);
  if (list.empty()) return "no rank";
  std::string out = list.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < list.size();) {
    std::size_t j = i;
    while (j + 1 < list.size() && list[j + 1] == list[j] + 1) ++j;
    if (i) out += ',';
    out += std::to_string(list[i]);
    if (j > i) out += '-' + std::to_string(list[j]);
    i = j + 1;
  }
  return out;
}

dynamic_bitmap complement(const dynamic_bitmap& ranks, int size) {
  dynamic_bitmap out(static_cast<std::size_t>(size), true);
  out.and_not(ranks);
  return out;
}

std::string mismatch_message(const std::vector<announcement>& groups) {
  if (groups.empty()) return "";
  auto first_rank = [](const announcement& a) { return rank_list(a.ranks).front(); };
  auto ref = std::min_element(groups.begin(), groups.end(), [&](const announcement& x, const announcement& y) {
    if (x.ranks.count() != y.ranks.count()) return x.ranks.count() > y.ranks.count();
    return first_rank(x) < first_rank(y);
  });
  // Clauses ordered by the lowest rank of each differing group.
  std::vector<const announcement*> others;
  for (const auto& g : groups)
    if (&g != &*ref) others.push_back(&g);
  std::sort(others.begin(), others.end(),
            [&](const announcement* x, const announcement* y) { return first_rank(*x) < first_rank(*y); });
  std::string out = describe(ref->spec) + ": ";
  for (std::size_t i = 0; i < others.size(); ++i) {
    const auto& g = *others[i];
    auto field = first_difference(ref->spec, g.spec).value_or("spec");
    if (i) out += "; ";
    out += field + " " + field_value(g.spec, field) + " on " + format_ranks(g.ranks) + " but " +
           field_value(ref->spec, field) + " on " + format_ranks(ref->ranks);
  }
  return out;
}

std::string format_seconds(duration d) {
  std::ostringstream os;
  os << std::chrono::duration<double>(d).count() << " s";
  return os.str();
}

std::string stall_message(const tensor_spec& spec, const dynamic_bitmap& ready, const dynamic_bitmap& members,
                          const negotiation_options& options, bool shutdown) {
  dynamic_bitmap have = members, lack = members;
  have.and_with(ready);
  lack.and_not(ready);
  std::string out = "stall: " + describe(spec) + ": ready on " + format_ranks(have) + " but not produced by " +
                    format_ranks(lack) + " after ";
  if (shutdown) {
    return out + format_seconds(options.stall_shutdown_time) +
           "; stopping the job (CHORUS_STALL_SHUTDOWN_TIME_SECONDS)";
  }
  return out + format_seconds(options.stall_warning_time) + " (CHORUS_STALL_CHECK_TIME_SECONDS)";
}

std::string join_refusal(const tensor_spec& spec, const dynamic_bitmap& joined) {
  if (!joined.any()) return {};
  const std::string who = format_ranks(joined) + (joined.count() == 1 ? " has" : " have") + " joined (join)";
  switch (spec.kind) {
    case collective_kind::allgather:
    case collective_kind::alltoall:
      return describe(spec) + ": " + who + "; " + std::string(name_of(spec.kind)) +
             " is not supported while a rank has joined (Horovod refuses it too; with "
             "DistributedOptimizer use sparse_as_dense=True)";
    case collective_kind::broadcast:  // Horovod refuses any broadcast while a rank has joined
      if (spec.root >= 0 && joined.test(static_cast<std::size_t>(spec.root)))
        return describe(spec) + ": its root rank " + std::to_string(spec.root) + " has joined (join) and has no tensor to send";
      return describe(spec) + ": " + who + "; broadcast is not supported while a rank has joined (as in Horovod)";
    case collective_kind::allreduce:
    case collective_kind::reducescatter:
      return {};
  }
  return {};
}

}  // namespace chorus::negotiation
