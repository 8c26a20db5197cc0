// Building a group: the store's rendezvous, the CHORUS_* settings, the ordered group.
#include "c10d/process_group.hpp"

#include <pybind11/pybind11.h>

#include <stdexcept>

#include "c10d/torch_store.hpp"
#include "runtime/config/config.hpp"

namespace chorus::python {

namespace {

std::unique_ptr<c10d_calls> join(const c10::intrusive_ptr<::c10d::Store>& store, int rank, int size,
                                 std::chrono::milliseconds timeout, std::string name, std::vector<int> global_ranks) {
  auto fail = [&](const status& st) -> std::unique_ptr<c10d_calls> {
    throw std::runtime_error("the Chorus backend could not build process group '" + name + "' on rank " +
                             std::to_string(rank) + ": " + st.message());
  };
  auto cfg = read_config();
  if (!cfg) return fail(cfg.error());
  auto env = read_group_env(cfg::process_lookup());
  if (!env) return fail(env.error());
  // Members wait for each other at most as long as torch lets the group take (its timeout), and
  // no longer than CHORUS_RENDEZVOUS_TIMEOUT_SECONDS.
  env->rendezvous_timeout = std::min(env->rendezvous_timeout, timeout);
  auto rdv = store_rendezvous::open(std::make_unique<torch_store>(store, name), rank, size, *env);
  if (!rdv) return fail(rdv.error());
  ordered::group_options opts;
  opts.name = name;
  opts.timeout = timeout;
  bool identity = true;
  for (std::size_t i = 0; i < global_ranks.size(); ++i) identity = identity && global_ranks[i] == static_cast<int>(i);
  if (!identity) opts.global_ranks = std::move(global_ranks);
  auto group = ordered::ordered_group::create(std::move(*rdv), *env, *cfg, std::move(opts));
  if (!group) return fail(group.error());
  return std::make_unique<c10d_calls>(std::move(*group));
}

}  // namespace

process_group_chorus::process_group_chorus(const c10::intrusive_ptr<::c10d::Store>& store, int rank, int size,
                                           std::chrono::milliseconds timeout, std::string name,
                                           std::vector<int> global_ranks)
    : ::c10d::ProcessGroup(rank, size), calls_(join(store, rank, size, timeout, name, std::move(global_ranks))) {}

void process_group_chorus::shut_down() { calls_->group().close(); }

process_group_chorus::~process_group_chorus() {
  // Python may drop the group holding the GIL, while the completion thread runs a future's
  // callback that needs it: let go of it while the group's threads end.
  if (Py_IsInitialized() && PyGILState_Check()) {
    pybind11::gil_scoped_release nogil;
    calls_.reset();
  } else {
    calls_.reset();
  }
}

}  // namespace chorus::python
