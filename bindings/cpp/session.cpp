// Session lifetime: init (env and config → communicator → pipeline), submit (boundary checks, pending
// table, enqueue), shutdown (pipeline first, then the data plane, then a sweep that ends any
// operation the pipeline left without an outcome).
#include "bindings/cpp/session.hpp"
#include "runtime/device/gpu.hpp"

#include <vector>

#include "actors/pipeline.hpp"
#include "actors/producer_actor.hpp"
#include "bindings/cpp/api_checks.hpp"
#include "bindings/cpp/static_sets.hpp"
#include "runtime/process_sets/process_set.hpp"
#include "runtime/collectives/communicator.hpp"
#include "runtime/core/log.hpp"
#include "runtime/env/process_env.hpp"
#include "runtime/rendezvous/elastic_round.hpp"
#include "telemetry/observer_slot.hpp"
#include "telemetry/setup.hpp"
#include "telemetry/trace/live_timeline.hpp"

namespace chorus::detail {

struct session::job {
  process_env env;
  std::shared_ptr<process_set_table> sets;
  std::unique_ptr<communicator> comm;
  std::unique_ptr<pipeline> pipe;
  /// Where start_timeline installs its recorder, fanned out beside the environment's observer.
  std::shared_ptr<telemetry::observer_slot> slot;
  std::unique_ptr<telemetry::trace::live_timeline> timeline;  // under lifecycle_mu_
};

namespace {

status breadcrumb(const char* where, const status& st) { return {st.code(), std::string(where) + st.message()}; }

// The job's CHORUS_COMPRESSION / CHORUS_NAN_CHECK for an op that did not choose: compression
// where it can apply (f32/f64 CPU allreduce and reducescatter with sum or average, allgather),
// the check for float CPU tensors of those collectives.
void apply_defaults(const op_state& op, compression wire, nan_check check, tensor_spec& s) {
  const bool moves = s.kind == collective_kind::allreduce || s.kind == collective_kind::reducescatter ||
                     s.kind == collective_kind::allgather;
  if (!moves || s.device != device_kind::cpu) return;
  const bool sums = s.kind == collective_kind::allgather || s.op == reduce_op::sum || s.op == reduce_op::average;
  const bool wide = s.type == dtype::f32 || s.type == dtype::f64;
  if (!op.wire_set && sums && wide) s.wire = wire;
  if (!op.check_set && (wide || s.type == dtype::f16 || s.type == dtype::bf16)) s.check = check;
}

}  // namespace

session& session::instance() {
  // Deliberately leaked: a static destructor would tear the job down after the libraries it
  // uses; the atexit hook registered by init() shuts down in order instead.
  static session* s = new session();
  return *s;
}

std::shared_ptr<process_set_table> session::process_sets() {
  std::shared_lock lk(job_mu_);
  return job_ ? job_->sets : nullptr;
}

status session::init(const std::vector<std::vector<int>>& process_sets) {
  if (in_callback())
    return {errc::invalid_argument, "chorus::init: called from a completion callback; call it from your own thread"};
  std::lock_guard life(lifecycle_mu_);
  {
    std::shared_lock lk(job_mu_);
    if (job_) return same_static_sets(*job_->sets, process_sets);
  }
  auto env = read_process_env();
  if (!env) return breadcrumb("chorus::init: ", env.error());
  auto cfg = read_config();
  if (!cfg) return breadcrumb("chorus::init: ", cfg.error());
  log::set_level(cfg->log_level);
  const process_env launched = *env;
  result<connected_rank> joined = status{errc::internal, "not started"};
  for (int tries = 0;; ++tries) {
    if (launched.elastic_worker >= 0) {
      // An elastic job: the launcher says which round to join and this worker's rank in it.
      auto round = elastic::join_round(launched, elastic_attempted_);
      if (!round) return breadcrumb("chorus::init: ", round.error());
      *env = std::move(*round);
      elastic_attempted_ = env->elastic_round;
    }
    joined = communicator::connect(*env, *cfg);
    // A round that the launcher replaced while this rank gathered (a worker of it died): join
    // the next one. Each try waits for a round newer than the last, so this ends.
    if (joined || launched.elastic_worker < 0 || !elastic::superseded(joined.error()) || tries >= 16) break;
    CHORUS_LOG(warn, "api", joined.error().message() << "; joining the next round");
  }
  if (!joined) return breadcrumb("chorus::init: ", joined.error());
  std::unique_ptr<communicator> comm = std::move(joined->comm);
  auto opts = pipeline_options::from_config(*cfg);
  opts.local_size = env->local_size;
  auto sets = static_sets(*comm, process_sets);
  if (!sets) {
    comm->close();
    return breadcrumb("chorus::init: ", sets.error());
  }
  opts.process_sets = *sets;
  telemetry::context tctx;
  tctx.rank = env->rank;
  tctx.size = env->size;
  tctx.local_rank = env->local_rank;
  tctx.streams = comm->num_streams();
  tctx.compression_off_on_shm = comm->wire_compression().drops_for_job();
  // The observer reads the data plane at every scrape: the pipeline (which owns it) is always
  // destroyed before the communicator (shutdown below).
  tctx.traffic = [c = comm.get()](int s) { return c->plane().traffic(s); };
  tctx.peer_traffic = [c = comm.get()](int s, int p) { return c->plane().peer_traffic(s, p); };
  tctx.mailbox_sent = [c = comm.get()](shm::mailbox_use use) { return c->mailbox_sent(use); };
  tctx.ports = [c = comm.get()](int s, int p) { return c->plane().connection_ports(s, p); };
  auto obs = telemetry::observer_from_config(tctx, cfg->telemetry);
  if (!obs) {
    comm->close();
    return breadcrumb("chorus::init: ", obs.error());
  }
  auto slot = std::make_shared<telemetry::observer_slot>();
  opts.observer = telemetry::fan_out({std::move(*obs), slot});
  auto pipe = pipeline::start(*comm, std::move(joined->control), opts);
  if (!pipe) {
    comm->close();
    return breadcrumb("chorus::init: ", pipe.error());
  }
  auto j = std::make_unique<job>();
  j->env = *env;
  j->sets = std::move(*sets);
  j->comm = std::move(comm);
  j->pipe = std::move(*pipe);
  j->slot = std::move(slot);
  {
    std::unique_lock lk(job_mu_);
    job_ = std::move(j);
    was_shut_down_ = false;
    rank_ = job_->env.rank;
    local_rank_ = job_->env.local_rank;
    local_size_ = job_->env.local_size;
    default_wire_ = static_cast<uint8_t>(cfg->collectives.wire);
    default_check_ = static_cast<uint8_t>(cfg->collectives.check);
    dynamic_sets_ = cfg->pipeline.dynamic_process_sets;
    priority_ = cfg->pipeline.priority;
    elastic_round_ = job_->env.elastic_round;
    size_ = job_->env.size;  // last: initialized() reads it
  }
  static std::once_flag at_exit;
  std::call_once(at_exit, [] { std::atexit([] { session::instance().shutdown(); }); });
  CHORUS_LOG(info, "api", "initialized " << describe(*env));
  return {};
}

void session::shutdown() {
  if (in_callback()) {
    CHORUS_LOG(error, "api", "chorus::shutdown called from a completion callback: ignored (it would wait for itself)");
    return;
  }
  std::lock_guard life(lifecycle_mu_);
  std::unique_ptr<job> j;
  {
    std::unique_lock lk(job_mu_);
    if (!job_) return;
    j = std::move(job_);
    was_shut_down_ = true;
    size_ = -1;
    rank_ = local_rank_ = local_size_ = -1;
    elastic_round_ = -1;
  }
  {
    std::lock_guard lk(pending_mu_);
    deferring_ = true;
  }
  // 1. The pipeline ends what it holds with errc::shutdown and stops its actors.
  j->pipe->shutdown();
  j->pipe.reset();
  if (auto st = finish_timeline(*j); !st.ok()) CHORUS_LOG(warn, "api", "shutdown: " << st.message());
  // 2. Then the data plane it used. Only now may callers free the buffers of failed ops, so
  //    their outcomes were held back (deferred_) until here.
  j->comm->close();
  j->comm.reset();
  std::vector<outcome> held;
  std::unordered_map<std::string, std::shared_ptr<op_state>> left;
  {
    std::lock_guard lk(pending_mu_);
    deferring_ = false;
    held.swap(deferred_);
    left.swap(pending_);
  }
  for (auto& o : held) o.op->complete(std::move(o.st), std::move(o.gathered), std::move(o.first_dims));
  // 3. Every operation must have ended by now; end any that did not, and say so.
  int unended = 0;
  for (auto& [name, op] : left)
    unended += op->complete({errc::shutdown, describe(op->spec) + ": Chorus shut down with the operation pending"});
  if (unended > 0)
    CHORUS_LOG(warn, "api", "shutdown ended " << unended << " operation(s) the pipeline left without an outcome");
  CHORUS_LOG(info, "api", "shut down");
}

namespace {
/// A CUDA tensor's checks at submit: `data` is memory of the device the view names, then the
/// event that orders Chorus' reads after the work queued on the caller's stream.
result<std::shared_ptr<void>> cuda_ready(const op_state& op, const void* data) {
  const tensor_spec& spec = op.spec;
  if (data) {
    auto dev = gpu::device_of(data);
    if (!dev) return status{errc::invalid_argument, describe(spec) + ": the tensor is on device cuda:" +
                                                        std::to_string(op.device_index) + " but " + dev.error().message()};
    if (*dev != op.device_index)
      return status{errc::invalid_argument, describe(spec) + ": the view says cuda:" + std::to_string(op.device_index) +
                                                " but the memory is on cuda:" + std::to_string(*dev)};
  }
  auto ev = gpu::record_ready(op.device_index, op.cuda_stream);
  if (!ev) return status{ev.error().code(), describe(spec) + ": " + ev.error().message()};
  return std::move(*ev);
}

status no_job(const tensor_spec& spec, bool was_shut_down) {
  if (was_shut_down) return {errc::shutdown, describe(spec) + ": Chorus was shut down; call chorus::init() to start again"};
  return {errc::invalid_argument, describe(spec) + ": Chorus is not initialized; call chorus::init() first"};
}
}  // namespace

status session::submit(const std::shared_ptr<op_state>& op, void* data, void* output, std::vector<int64_t> splits) {
  const tensor_spec& spec = op->spec;
  if (auto st = check_operation(spec, data); !st.ok()) return st;
  std::shared_lock lk(job_mu_);
  if (!job_) return no_job(spec, was_shut_down_);
  op_request r;
  if (auto st = admit(op, data, output, std::move(splits), r); !st.ok()) return st;
  job_->pipe->enqueue(std::move(r));
  return {};
}

void session::submit_all(const std::vector<std::shared_ptr<op_state>>& ops, const std::vector<void*>& data) {
  std::vector<std::pair<std::size_t, status>> rejected;  // ended after the lock is released
  {
    std::vector<op_request> rs;
    rs.reserve(ops.size());
    std::shared_lock lk(job_mu_);
    for (std::size_t i = 0; i < ops.size(); ++i) {
      const tensor_spec& spec = ops[i]->spec;
      status st = check_operation(spec, data[i]);
      if (st.ok() && !job_) st = no_job(spec, was_shut_down_);
      if (st.ok() && spec.kind != collective_kind::allreduce && spec.kind != collective_kind::broadcast)
        st = {errc::invalid_argument, describe(spec) + ": only allreduce and broadcast are submitted together"};
      op_request r;
      if (st.ok()) st = admit(ops[i], data[i], nullptr, {}, r);
      if (st.ok())
        rs.push_back(std::move(r));
      else
        rejected.emplace_back(i, std::move(st));
    }
    if (!rs.empty()) job_->pipe->enqueue_all(std::move(rs));
  }
  for (auto& [i, st] : rejected) ops[i]->complete(std::move(st));
}

status session::admit(const std::shared_ptr<op_state>& op, void* data, void* output, std::vector<int64_t> splits,
                      op_request& r) {
  const tensor_spec& spec = op->spec;
  if (auto st = check_root(spec, job_->env.size); !st.ok()) return st;
  // At the call, as Horovod refuses it: an unknown set, a rank outside it, a root outside it.
  auto in_set = check_process_set(spec, job_->env.rank, job_->sets.get());
  if (!in_set) return in_set.error();
  const int group_size = *in_set ? (*in_set)->size() : job_->env.size;
  if (auto st = check_splits(spec, splits, group_size); !st.ok()) return st;
  // A process set negotiates its own names: "x" may be pending in two sets at once.
  const std::string key = negotiated_name(spec.name, spec.process_set);
  if (spec.device == device_kind::cuda) {
    auto ready = cuda_ready(*op, data);
    if (!ready) return ready.error();
    r.ready = std::move(*ready);
    r.device_index = op->device_index;
  }
  {
    std::lock_guard plk(pending_mu_);
    if (!pending_.emplace(key, op).second)
      return {errc::invalid_argument,
              describe(spec) + ": an operation named '" + spec.name +
                  "' is still pending on this rank; names must be unique among pending operations"};
  }
  r.spec = spec;
  apply_defaults(*op, default_wire(), default_check(), r.spec);
  if (!priority_) r.spec.priority = 0;  // CHORUS_PRIORITY=0: the agreed order, no priority checks
  r.input = data;
  switch (spec.kind) {
    case collective_kind::allgather:
    case collective_kind::alltoall: r.output = nullptr; break;
    case collective_kind::reducescatter: r.output = output; break;
    default: r.output = data;
  }
  r.splits = std::move(splits);
  r.done = [this, op](const status& st, std::vector<std::byte> gathered, std::vector<int64_t> first_dims) {
    finished(op, st, std::move(gathered), std::move(first_dims));
  };
  return {};
}

status session::join(const std::shared_ptr<op_state>& op) {
  std::shared_lock lk(job_mu_);
  if (!job_) {
    if (was_shut_down_) return {errc::shutdown, "join: Chorus was shut down; call chorus::init() to start again"};
    return {errc::invalid_argument, "join: Chorus is not initialized; call chorus::init() first"};
  }
  job_->pipe->join([op](const status& st, int last_rank) {
    if (st.ok()) op->last_rank = last_rank;  // published by complete()
    op->complete(st);
  });
  return {};
}

void session::finished(const std::shared_ptr<op_state>& op, const status& st, std::vector<std::byte> gathered,
                       std::vector<int64_t> first_dims) {
  {
    std::lock_guard lk(pending_mu_);
    // First: a waiter that wakes may reuse the name at once.
    auto it = pending_.find(negotiated_name(op->spec.name, op->spec.process_set));
    if (it != pending_.end() && it->second == op) pending_.erase(it);
    if (deferring_) {
      deferred_.push_back({op, st, std::move(gathered), std::move(first_dims)});
      return;
    }
  }
  op->complete(st, std::move(gathered), std::move(first_dims));
}

}  // namespace chorus::detail

namespace chorus::detail {

status session::finish_timeline(job& j) {
  if (!j.timeline) return {};
  j.slot->exchange(nullptr);  // returns once no actor is inside the recorder
  auto t = std::move(j.timeline);
  return t->finish();
}

status session::start_timeline(const std::string& path, bool mark_cycles) {
  if (in_callback())
    return {errc::invalid_argument, "chorus::start_timeline: called from a completion callback; call it from your own thread"};
  std::lock_guard life(lifecycle_mu_);
  std::shared_lock lk(job_mu_);  // job_ changes only under lifecycle_mu_: stable from here on
  if (!job_) return {errc::invalid_argument, "chorus::start_timeline: Chorus is not initialized; call chorus::init() first"};
  if (job_->env.rank != 0) return {};  // Horovod writes the timeline on rank 0 only
  // A second start restarts with the new path; the first timeline is written out, not lost.
  if (auto st = finish_timeline(*job_); !st.ok()) CHORUS_LOG(warn, "api", "start_timeline: " << st.message());
  telemetry::trace::live_timeline_options o;
  o.path = path;
  o.mark_cycles = mark_cycles;
  o.rank = job_->env.rank;
  o.size = job_->env.size;
  auto t = telemetry::trace::live_timeline::start(o);
  if (!t) return breadcrumb("chorus::start_timeline: ", t.error());
  job_->slot->exchange((*t)->events());
  job_->timeline = std::move(*t);
  CHORUS_LOG(info, "api", "timeline started path=" << path << " mark_cycles=" << mark_cycles);
  return {};
}

result<int64_t> session::elastic_latest_round() {
  process_env env;
  {
    std::shared_lock lk(job_mu_);
    if (!job_ || job_->env.elastic_worker < 0) return int64_t{-1};
    env = job_->env;
  }
  return elastic::latest_round(env);
}

result<settings_in_force> session::settings() {
  std::shared_lock lk(job_mu_);
  if (!job_) return status{errc::invalid_argument, "chorus::settings: Chorus is not initialized; call chorus::init() first"};
  auto t = job_->slot->last_tunables();
  if (!t) return status{errc::internal, "chorus::settings: the pipeline reported no settings"};
  return settings_in_force{t->fusion_threshold, t->chunk_bytes, t->streams, double(t->cycle_time.count()) / 1000.0,
                           t->in_place_bytes};
}

status session::stop_timeline() {
  if (in_callback())
    return {errc::invalid_argument, "chorus::stop_timeline: called from a completion callback; call it from your own thread"};
  std::lock_guard life(lifecycle_mu_);
  std::shared_lock lk(job_mu_);
  if (!job_ || !job_->timeline) return {};  // stop without start: nothing to do
  std::string path = job_->timeline->path();
  if (auto st = finish_timeline(*job_); !st.ok()) return breadcrumb("chorus::stop_timeline: ", st);
  CHORUS_LOG(info, "api", "timeline written path=" << path);
  return {};
}

}  // namespace chorus::detail
