// The C++ API's process sets (chorus.hpp): static sets at init, dynamic add/remove (collective
// over the job: an allreduce through the pipeline checks that every rank asked for the same set,
// a barrier after the change keeps any rank from using it before all have it), look-ups and
// barrier.
#include <string>

#include "chorus/chorus.hpp"
#include "bindings/cpp/session.hpp"
#include "runtime/process_sets/process_set.hpp"

namespace chorus {
namespace {

using detail::session;

const char* const unknown_set = "Process set does not exist or has not been registered.";

status not_initialized(const std::string& what) {
  return {errc::invalid_argument, what + ": Horovod has not been initialized; use hvd.init()."};
}

std::shared_ptr<const process_set> find(int id) {
  auto t = session::instance().process_sets();
  return t ? t->find(id) : nullptr;
}

// One blocking allreduce of `v` (min, then max when `both`) in the global set; fails with
// errc::mismatch when the ranks' values differ.
status agree(const std::string& name, int64_t v, const std::string& what) {
  int64_t lo = v, hi = v;
  tensor_view a{&lo, dtype::i64, {1}}, b{&hi, dtype::i64, {1}};
  if (auto st = allreduce_async(transient(name + ".min"), a, reduce_op::min).wait(); !st.ok()) return st;
  if (auto st = allreduce_async(transient(name + ".max"), b, reduce_op::max).wait(); !st.ok()) return st;
  if (lo != hi)
    return {errc::mismatch, what + " on rank " + std::to_string(rank()) +
                                ": the ranks asked for different process sets; every rank must make the same "
                                "add_process_set / remove_process_set calls in the same order"};
  return {};
}

int64_t digest(const std::vector<int>& ranks) {
  uint64_t h = 1469598103934665603ull;
  for (int r : ranks)
    for (int i = 0; i < 4; ++i) h = (h ^ ((static_cast<uint32_t>(r) >> (8 * i)) & 0xff)) * 1099511628211ull;
  return static_cast<int64_t>((h ^ ranks.size()) >> 1);
}

status dynamic_allowed(const std::string& what, const char* verb) {
  if (!is_initialized()) return not_initialized(what);
  if (!session::instance().dynamic_process_sets())
    return {errc::invalid_argument, what + ": Set HOROVOD_DYNAMIC_PROCESS_SETS=1 (or CHORUS_DYNAMIC_PROCESS_SETS=1) "
                                           "to allow " + verb + " process sets after Horovod initialization."};
  return {};
}

}  // namespace

status init(const std::vector<std::vector<int>>& process_sets) { return session::instance().init(process_sets); }

result<int> add_process_set(std::vector<int> ranks) {
  const std::string what = "add_process_set";
  if (auto st = dynamic_allowed(what, "adding"); !st.ok()) return st;
  auto table = session::instance().process_sets();
  if (!table) return not_initialized(what);
  auto sorted = normalize_ranks(ranks, table->world_size());
  // 1. Every rank asked for the same ranks (a bad list on one rank fails all of them alike).
  if (auto st = agree("chorus.process_set.add", sorted ? digest(*sorted) : -1, what); !st.ok()) return st;
  if (!sorted) return status{errc::invalid_argument, what + ": " + sorted.error().message()};
  // 2. Register here (the same id everywhere: the same calls in the same order), then
  // 3. wait until every rank has, so that no member negotiates a name of it too early.
  auto id = table->add(std::move(*sorted));
  if (!id) return status{errc::invalid_argument, what + ": " + id.error().message()};
  if (auto st = barrier(0); !st.ok()) return st;
  return *id;
}

status remove_process_set(int id) {
  const std::string what = "remove_process_set(" + std::to_string(id) + ")";
  if (auto st = dynamic_allowed(what, "removing"); !st.ok()) return st;
  auto table = session::instance().process_sets();
  if (!table) return not_initialized(what);
  if (auto st = agree("chorus.process_set.remove", id, what); !st.ok()) return st;
  // Every rank reached this point, so no member still has an operation of the set to submit.
  if (auto st = barrier(0); !st.ok()) return st;
  auto st = table->remove(id);
  return st.ok() ? st : status{st.code(), what + ": " + st.message()};
}

std::vector<int> process_set_ids() {
  std::vector<int> out;
  if (auto t = session::instance().process_sets())
    for (const auto& s : t->all()) out.push_back(s->id);
  return out;
}

result<std::vector<int>> process_set_ranks(int id) {
  if (!is_initialized()) return not_initialized("process_set_ranks");
  auto s = find(id);
  if (!s) return status{errc::invalid_argument, unknown_set};
  return s->ranks;
}

result<int> process_set_rank(int id) {
  if (!is_initialized()) return not_initialized("process_set_rank");
  auto s = find(id);
  if (!s) return status{errc::invalid_argument, unknown_set};
  int r = s->local_rank(rank());
  if (r < 0) return status{errc::invalid_argument, "Process is not part of provided process set."};
  return r;
}

result<int> process_set_size(int id) {
  if (!is_initialized()) return not_initialized("process_set_size");
  auto s = find(id);
  if (!s) return status{errc::invalid_argument, unknown_set};
  return s->size();
}

status barrier(int process_set) {
  uint8_t one = 0;
  // One name per set: a barrier is synchronous, so never pending twice on a rank (one thread
  // per set at a time).
  return allreduce_async(op_name("chorus.barrier", false, process_set), tensor_view{&one, dtype::u8, {1}},
                         reduce_op::sum)
      .wait();
}

}  // namespace chorus
