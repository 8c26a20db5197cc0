// The producer actor: admits operations, forwards them to the negotiator, and ends each one
// exactly once when op_finished arrives. On shutdown it drains: new ops fail at once, and what
// is still pending after the grace ends with errc::shutdown.
#include "actors/producer_actor.hpp"

#include "runtime/device/gpu.hpp"

#include <exception>
#include <string>

#include "runtime/collectives/ring_schedule.hpp"
#include "runtime/core/log.hpp"
#include "runtime/core/tsan_edge.hpp"

namespace chorus {

namespace {

void call_done(const std::shared_ptr<op_request>& r, const status& st, std::vector<std::byte> gathered,
               std::vector<int64_t> dims) {
  if (!r->done) return;
  try {
    r->done(st, std::move(gathered), std::move(dims));
  } catch (const std::exception& e) {
    CHORUS_LOG(error, "producer", "the done callback of " << describe(r->spec) << " threw: " << e.what());
  } catch (...) {
    CHORUS_LOG(error, "producer", "the done callback of " << describe(r->spec) << " threw");
  }
}

void finish(caf::stateful_actor<producer_state>* self, uint64_t handle, const status& st,
            std::vector<std::byte> gathered, std::vector<int64_t> dims) {
  auto& s = self->state;
  auto it = s.table.find(handle);
  if (it == s.table.end()) {
    CHORUS_LOG(warn, "producer", "op_finished for unknown handle=" << handle << " (already ended)");
    return;
  }
  auto r = std::move(it->second);
  s.table.erase(it);
  s.names.erase(r->spec.name);
  ++s.completed;
  steady_time enqueued{};
  if (auto e = s.enqueued_at.find(handle); e != s.enqueued_at.end()) {
    enqueued = e->second;
    s.enqueued_at.erase(e);
  }
  auto called_at = std::chrono::steady_clock::now();
  // Reported first: a caller woken by its callback finds the op recorded (hvd.stop_timeline).
  observer_of(s.wired.observer).on_callback(handle, r->spec, st, enqueued, called_at);
  call_done(r, st, std::move(gathered), std::move(dims));
  if (s.draining && s.table.empty() && s.drained) {
    s.drained->deliver(drain_atom::value);
    s.drained.reset();
  }
}

status join_shutdown(int rank) {
  return {errc::shutdown, "join on rank " + std::to_string(rank) + ": shut down before every rank joined"};
}

/// Calls every waiting join callback once with `st`.
void end_joins(caf::stateful_actor<producer_state>* self, const status& st, int last_rank) {
  auto joins = std::move(self->state.joins);
  self->state.joins.clear();
  for (auto& done : joins) {
    try {
      done(st, last_rank);
    } catch (...) {
      CHORUS_LOG(error, "producer", "a join callback threw");
    }
  }
}

/// Ends every op still in the table with errc::shutdown.
void fail_remaining(caf::stateful_actor<producer_state>* self) {
  auto& s = self->state;
  end_joins(self, join_shutdown(s.cfg.rank), -1);
  std::vector<uint64_t> left;
  for (auto& [h, r] : s.table) left.push_back(h);
  for (auto h : left) {
    const auto& spec = s.table.at(h)->spec;
    finish(self, h,
           {errc::shutdown, describe(spec) + ": shut down with '" + spec.name +
                                "' pending (its transfer had not ended within the shutdown grace)"},
           {}, {});
  }
}

/// Checks a request and, when it may run, records it and tells the negotiator; else ends it.
void admit(caf::stateful_actor<producer_state>* self, const std::shared_ptr<op_request>& request, steady_time at) {
  tsan_edge::observe(request.get());  // published by pipeline::enqueue on the caller's thread
  auto& s = self->state;
  const auto& r = *request;
  auto set = check_process_set(r.spec, s.cfg.rank, s.cfg.process_sets.get());
  status st = set ? check_request(r, s.cfg.rank, s.cfg.size, set->get()) : set.error();
  // A process set negotiates its own names: the same name in two sets is two tensors.
  if (st.ok() && r.spec.process_set != 0) request->spec.name = negotiated_name(r.spec.name, r.spec.process_set);
  if (st.ok() && s.draining) st = {errc::shutdown, describe(r.spec) + ": shut down with '" + r.spec.name + "' pending"};
  if (st.ok() && s.names.count(r.spec.name))
    st = {errc::invalid_argument, describe(r.spec) + ": an operation named '" + r.spec.name +
                                      "' is already pending on rank " + std::to_string(s.cfg.rank)};
  if (!st.ok()) {
    call_done(request, st, {}, {});
    return;
  }
  uint64_t h = s.next_handle++;
  s.table.emplace(h, request);
  s.names.insert(r.spec.name);
  s.enqueued_at.emplace(h, at);
  observer_of(s.wired.observer).on_enqueue(h, r.spec, at);
  self->send(s.wired.negotiator, tensor_ready{make_op_ref(h, r, at)});
}

}  // namespace

result<std::shared_ptr<const process_set>> check_process_set(const tensor_spec& s, int rank,
                                                             const process_set_table* sets) {
  if (s.process_set == 0) return std::shared_ptr<const process_set>{};
  auto bad = [&](const std::string& why) {
    return status{errc::invalid_argument, describe(s) + " on rank " + std::to_string(rank) + ": " + why};
  };
  auto set = sets ? sets->find(s.process_set) : nullptr;
  if (!set) return bad("process set " + std::to_string(s.process_set) + " does not exist or has not been registered");
  // Horovod: "Allreduce: Rank 2 is not a member of the provided process set."
  if (!set->includes(rank))
    return bad("rank " + std::to_string(rank) + " is not a member of the provided process set (ranks " +
               set->rank_list() + ")");
  if (s.kind == collective_kind::broadcast && !set->includes(s.root))
    return bad("root rank " + std::to_string(s.root) + " is not a member of the provided process set (ranks " +
               set->rank_list() + ")");
  if (s.device != device_kind::cpu)
    return bad("process sets other than the global one run CPU tensors only; pass a CPU buffer");
  return set;
}

status check_request(const op_request& r, int rank, int size, const process_set* set) {
  const auto& s = r.spec;
  const int group_rank = set ? set->local_rank(rank) : rank, group_size = set ? set->size() : size;
  auto bad = [&](const std::string& why) {
    return status{errc::invalid_argument, describe(s) + " on rank " + std::to_string(rank) + ": " + why};
  };
  if (!r.done) return bad("no done callback");
  if (static_cast<int>(s.kind) >= collective_kind_count)
    return bad("collective " + std::to_string(static_cast<int>(s.kind)) + " is not supported by the pipeline");
  if (s.device == device_kind::cuda) {
    // CUDA buckets run on the device runner (actors/device_runner.hpp): allreduce and broadcast.
    if (!gpu::built()) return bad("a CUDA tensor, but this build of Chorus has no CUDA support; pass a CPU buffer");
    if (s.kind != collective_kind::allreduce && s.kind != collective_kind::broadcast)
      return bad(std::string(name_of(s.kind)) + " of a CUDA tensor is not run on the device; pass a CPU buffer");
  } else if (s.device != device_kind::cpu) {
    return bad("device " + std::to_string(static_cast<int>(s.device)) + " is not one of cpu, cuda");
  }
  if (auto st = validate(s, size); !st.ok()) return {st.code(), st.message() + " (rank " + std::to_string(rank) + ")"};
  const bool rows_kind = s.kind == collective_kind::reducescatter || s.kind == collective_kind::alltoall;
  if (rows_kind && s.shape.empty()) return bad("needs a tensor with at least one dimension, got a scalar");
  if (s.kind == collective_kind::alltoall) {
    if (r.splits.size() != static_cast<std::size_t>(group_size))
      return bad(std::to_string(r.splits.size()) + " splits for " + std::to_string(group_size) +
                 (set ? " ranks of the process set" : " ranks") + "; give one row count per rank");
    int64_t sum = 0;
    for (std::size_t i = 0; i < r.splits.size(); ++i) {
      int64_t x = r.splits[i];
      if (x < 0) return bad("negative split " + std::to_string(x));
      if (__builtin_add_overflow(sum, x, &sum))
        return bad("split " + std::to_string(i) + " (" + std::to_string(x) + ") makes the splits' sum overflow int64");
    }
    if (sum != s.shape[0])
      return bad("splits sum to " + std::to_string(sum) + " rows but dim 0 is " + std::to_string(s.shape[0]));
  }
  if (s.byte_size() > 0) {
    const bool reads_only = s.kind == collective_kind::allgather || s.kind == collective_kind::alltoall;
    if ((reads_only || s.kind == collective_kind::reducescatter) && !r.input) return bad("no input buffer");
    if (!reads_only && !r.output) {
      bool empty_slice = s.kind == collective_kind::reducescatter &&
                         block_begin(static_cast<std::size_t>(s.shape[0]), group_size, group_rank) ==
                             block_begin(static_cast<std::size_t>(s.shape[0]), group_size, group_rank + 1);
      if (!empty_slice) return bad("no output buffer");
    }
  }
  return {};
}

op_ref make_op_ref(uint64_t handle, const op_request& r, steady_time at) {
  op_ref o;
  o.handle = handle;
  o.spec = r.spec;
  o.input = r.input ? r.input : r.output;
  o.output = r.output;
  o.enqueued_at = at;
  o.device_index = r.device_index;
  o.ready = r.ready;
  if (o.spec.kind == collective_kind::allgather || o.spec.kind == collective_kind::alltoall) {
    if (o.spec.shape.empty()) o.spec.shape.push_back(1);  // a scalar gathers as one row
    o.first_dim = o.spec.shape[0];
    o.spec.shape[0] = 0;
  }
  if (o.spec.kind == collective_kind::alltoall) o.splits = r.splits;
  return o;
}

caf::behavior producer_actor(caf::stateful_actor<producer_state>* self, producer_config cfg) {
  self->state.cfg = cfg;
  // Stopped with ops still in the table (a drain that timed out): end them, never drop them.
  self->set_exit_handler([=](caf::exit_msg& m) {
    self->state.draining = true;
    fail_remaining(self);
    self->quit(m.reason);
  });
  return {
      [=](const producer_wiring& w) { self->state.wired = w; },
      [=](const op_enqueued& e) { admit(self, e.request, e.at); },
      [=](const ops_enqueued& e) {
        for (const auto& r : e.requests) admit(self, r, e.at);
      },
      [=](join_enqueued& j) {
        auto& s = self->state;
        if (!j.done) return;
        if (s.draining) {
          j.done(join_shutdown(s.cfg.rank), -1);
          return;
        }
        s.joins.push_back(std::move(j.done));
        if (s.joins.size() == 1) self->send(s.wired.negotiator, join_atom::value);
      },
      [=](const join_finished& f) { end_joins(self, f.result, f.last_rank); },
      [=](op_finished& f) {
        finish(self, f.handle, f.result, std::move(f.gathered), std::move(f.first_dims));
      },
      [=](ops_finished& fs) {
        for (auto& f : fs.ops) finish(self, f.handle, f.result, std::move(f.gathered), std::move(f.first_dims));
      },
      [=](drain_atom, int64_t grace_ms) -> caf::response_promise {
        auto& s = self->state;
        s.draining = true;
        end_joins(self, join_shutdown(s.cfg.rank), -1);
        auto rp = self->make_response_promise();
        if (s.table.empty()) {
          rp.deliver(drain_atom::value);
          return rp;
        }
        s.drained = rp;
        self->delayed_send(self, std::chrono::milliseconds(grace_ms), deadline_atom::value);
        return rp;
      },
      [=](deadline_atom) { fail_remaining(self); },
  };
}

}  // namespace chorus
