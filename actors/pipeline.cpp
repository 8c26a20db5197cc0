// pipeline: boots the actor system of one rank, spawns and wires the actors, starts the
// control link; enqueue/stats/shutdown from any thread.
#include "runtime/process_sets/process_set.hpp"
#include "actors/pipeline.hpp"

#include <atomic>
#include <exception>
#include <optional>

#include "actors/chunk_runner.hpp"
#include "actors/device_runner.hpp"
#include "runtime/collectives/stream_board.hpp"
#include "runtime/device/gpu.hpp"
#if CHORUS_WITH_CUDA
#include "runtime/device/cuda/gpu_executor.hpp"
#endif
#include "actors/autotuner_actor.hpp"
#include "actors/completion_actor.hpp"
#include "actors/control_edge.hpp"
#include "actors/fusion_actor.hpp"
#include "actors/negotiator_actor.hpp"
#include "actors/producer_actor.hpp"
#include "actors/rank_actors.hpp"
#include "actors/sender_actor.hpp"
#include "actors/thread_policy.hpp"
#include "runtime/collectives/communicator.hpp"
#include "runtime/core/log.hpp"
#include "runtime/core/tsan_edge.hpp"

namespace chorus {

struct pipeline::impl {
  explicit impl(communicator& c) : comm(c) {}
  communicator& comm;
  pipeline_options opts;
  caf::actor_system_config cfg;  // outlives sys
  std::unique_ptr<caf::actor_system> sys;
  rank_actors actors;
  std::shared_ptr<completion_router> router = std::make_shared<completion_router>();
  std::shared_ptr<tcp::control_link> link;  ///< the control plane; closed first, released last
  std::atomic<bool> autotune_held{false};    ///< hold_autotune / resume_autotune
#if CHORUS_WITH_CUDA
  std::shared_ptr<gpu::executor> gpu;  ///< CUDA buckets; stopped after the actors
#endif

  std::vector<caf::actor> all() const {
    std::vector<caf::actor> v{actors.producer, actors.negotiator, actors.fusion, actors.completion};
    v.insert(v.end(), actors.senders.begin(), actors.senders.end());
    if (actors.autotuner) v.push_back(actors.autotuner);
    return v;
  }
  /// Closes the router, stops every actor and the system (waits for the actors to end).
  void stop_actors() {
    router->close();
    if (link) link->close();  // later sends are dropped; the negotiator may still make some
    for (auto& a : all())
      if (a) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    actors = {};
    sys.reset();
    link.reset();
    // Chunks handed out and never started no longer hold up the direct path's order.
    if (auto* lane = comm.pipeline_lane()) lane->forget_unstarted();
#if CHORUS_WITH_CUDA
    if (gpu) gpu->stop();  // GPU work finishes or fails; the data plane's later calls fail at once
#endif
  }
};

namespace {

negotiation::negotiation_options negotiation_options_of(const pipeline_options& o) {
  negotiation::negotiation_options n;
  n.cycle_time = o.cycle_time;
  n.early_start = o.early_start;
  n.hold_when_ahead = o.hold_when_ahead;
  n.start_bytes = static_cast<int64_t>(o.fusion_threshold);
  n.stall_warning_time = o.stall_check;
  n.stall_shutdown_time = o.stall_shutdown;
  n.process_sets = o.process_sets;
  return n;
}

/// The tunables `t` for every batch fusion plans after these messages, with the autotuner's
/// two messages: a hold from cycle 0 (any later batch) and the switch for it, back to back from
/// one sender, so in this order in fusion's mailbox. Only sound while nothing is in negotiation
/// (pipeline::set_tunables' contract), where "any later batch" is the same batch on every rank.
void send_switch(const rank_actors& a, const telemetry::tunables& t) {
  tunables_switch sw{0, t.streams, t.chunk_bytes, t.fusion_threshold, t.in_place_bytes, t.cycle_time.count()};
  caf::anon_send(a.fusion, tunables_pending{0});
  caf::anon_send(a.fusion, sw);
  caf::anon_send(a.negotiator, sw);
  for (const auto& s : a.senders) caf::anon_send(s, sw);
  if (a.autotuner) caf::anon_send(a.autotuner, sw);  // held, it follows (autotune_hold)
}

/// Latency over throughput: workers sleep instead of spinning (TOOLCHAIN.md: remote round
/// trips 320-530 µs with CAF's default polling, 89-101 µs with these on two cores).
void tune(caf::actor_system_config& cfg, const pipeline_options& o) {
  register_types(cfg);
  cfg.set("scheduler.max-threads", static_cast<std::size_t>(o.scheduler_threads));
  cfg.set("work-stealing.aggressive-poll-attempts", std::size_t{0});
  cfg.set("work-stealing.moderate-poll-attempts", std::size_t{0});
  // A sleeping worker also wakes every relaxed-sleep-duration (10 ms) to steal from the
  // others; alone, it has no one to steal from, and those wake-ups (about 18 per training
  // step of the small CNN) preempt the training thread for nothing.
  if (o.scheduler_threads == 1) cfg.set("work-stealing.relaxed-sleep-duration", caf::timespan{std::chrono::seconds(1)});
  if (o.scheduler_batch) cfg.add_thread_hook<batch_scheduling_hook>();
  cfg.set("logger.file-verbosity", caf::atom("quiet"));
  cfg.set("logger.console-verbosity", caf::atom("quiet"));
}

/// CAF 0.17 keeps a reference to the system's logger in a thread-local slot of every thread
/// that boots a system or uses a scoped_actor, and ~actor_system waits until the logger is
/// gone: a caller thread that keeps its slot would hang a shutdown run on another thread.
/// Every public entry that touches CAF clears the slot when it returns.
struct caf_thread_scope {
  caf_thread_scope() = default;
  caf_thread_scope(const caf_thread_scope&) = delete;
  caf_thread_scope& operator=(const caf_thread_scope&) = delete;
  ~caf_thread_scope() { caf::logger::set_current_actor_system(nullptr); }
};

#if CHORUS_WITH_CUDA
/// Whether this job runs CUDA tensors on NCCL: built with it, not CHORUS_GPU_OPERATIONS=host,
/// and every rank sees at least as many CUDA devices as its host has ranks (each rank a GPU of
/// its own). Every rank publishes what it sees and decides from all of them, so all agree.
result<bool> gpu_backend_is_nccl(communicator& comm, const pipeline_options& opts) {
#if !CHORUS_WITH_NCCL
  (void)comm;
  (void)opts;
  return false;
#else
  if (opts.gpu_operations == "host") return false;
  const int devices = gpu::visible_devices();
  const int local = opts.local_size;
  const bool mine = devices > 0 && devices >= local;
  if (comm.size() == 1) return mine;
  auto& store = comm.plane().store();
  if (auto st = store.publish("gpu/" + std::to_string(comm.rank()), mine ? "1" : "0"); !st.ok())
    return status{st.code(), "pipeline: " + st.message()};
  auto all = store.gather("gpu/", opts.connect_timeout);
  if (!all) return status{all.error().code(), "pipeline: " + all.error().message()};
  for (const auto& v : *all)
    if (v != "1") return false;
  return true;
#endif
}

/// The NCCL unique id, from rank 0 to every rank through the rendezvous store (hex).
result<std::string> agree_nccl_id(communicator& comm, const std::string& mine, std::chrono::milliseconds timeout) {
  static const char* hex = "0123456789abcdef";
  if (comm.rank() == 0) {
    std::string text;
    for (unsigned char c : mine) {
      text += hex[c >> 4];
      text += hex[c & 15];
    }
    if (auto st = comm.plane().store().publish("nccl/id", text); !st.ok()) return st;
    return mine;
  }
  auto text = comm.plane().store().get("nccl/id", timeout);
  if (!text) return text.error();
  if (text->size() % 2) return status{errc::protocol, "the NCCL unique id in the store has an odd length"};
  std::string out;
  for (std::size_t i = 0; i < text->size(); i += 2) {
    auto nib = [](char c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1; };
    int hi = nib((*text)[i]), lo = nib((*text)[i + 1]);
    if (hi < 0 || lo < 0) return status{errc::protocol, "the NCCL unique id in the store is not hex"};
    out += static_cast<char>(hi * 16 + lo);
  }
  return out;
}
#endif

}  // namespace

pipeline::pipeline(std::unique_ptr<impl> p) : impl_(std::move(p)) {
  rank_ = impl_->comm.rank();
  size_ = impl_->comm.size();
}

result<std::unique_ptr<pipeline>> pipeline::start(communicator& comm, std::shared_ptr<tcp::control_link> control,
                                                  const pipeline_options& configured) {
  caf_thread_scope scope;
  const int rank = comm.rank(), size = comm.size(), streams = comm.num_streams();
  pipeline_options opts = configured;
  opts.chunk_bytes = chunk_bytes_in_force(opts.chunk_bytes, opts.chunk_bytes_given, comm.hosts(), opts.hierarchical);
  opts = with_autotune_start(opts, streams);
  if (!opts.process_sets) opts.process_sets = std::make_shared<process_set_table>(size);
  if (opts.process_sets->world_size() != size)
    return status{errc::internal, "pipeline: a process set table of " + std::to_string(opts.process_sets->world_size()) +
                                      " ranks for a job of " + std::to_string(size)};
  auto nopts = negotiation_options_of(opts);
  if (auto s = negotiation::make_strategy(opts.negotiation, rank, size, nopts); !s) return s.error();
  if (opts.scheduler_threads < 1 || streams < 1 || opts.start_window < 1 || opts.chunks_in_flight < 1)
    return status{errc::config, "pipeline: scheduler_threads=" + std::to_string(opts.scheduler_threads) +
                                    " streams=" + std::to_string(streams) + " start_window=" +
                                    std::to_string(opts.start_window) + " chunks_in_flight=" +
                                    std::to_string(opts.chunks_in_flight) + "; each must be at least 1"};
  if (configured.autotune.enabled && configured.autotune.max_streams > streams)
    return status{errc::config, "pipeline: CHORUS_MAX_STREAMS=" + std::to_string(configured.autotune.max_streams) +
                                    " but only CHORUS_NUM_STREAMS=" + std::to_string(streams) +
                                    " connections per peer are opened; raise CHORUS_NUM_STREAMS or lower CHORUS_MAX_STREAMS"};
  if (opts.start_streams < 0 || opts.start_streams > streams)
    return status{errc::config, "pipeline: start_streams=" + std::to_string(opts.start_streams) + ", expected 0 (all) or 1.." +
                                    std::to_string(streams) + " (CHORUS_NUM_STREAMS)"};
  if (opts.stream_placement != "speed" && opts.stream_placement != "round_robin")
    return status{errc::config,
                  "pipeline: stream_placement='" + opts.stream_placement + "'; expected speed or round_robin"};
  // Every rank must run the same negotiation, fuse and cut tensors alike (else their chunks
  // differ), and tune or not.
  if (size > 1)
    if (auto st = agree_settings(comm.plane().store(), "pipeline-settings/", pipeline_settings(opts),
                                 "it decides how the pipeline negotiates, fuses and cuts tensors into chunks",
                                 opts.connect_timeout);
        !st.ok())
      return status{st.code(), "pipeline: " + st.message()};
  auto p = std::make_unique<impl>(comm);
  p->opts = opts;
  p->autotune_held = opts.autotune.enabled && opts.autotune_held;
  p->link = std::move(control);
  if (!p->link) return status{errc::config, "pipeline: no control link (communicator::connect hands it out)"};
  tune(p->cfg, opts);
  try {
    p->sys = std::make_unique<caf::actor_system>(p->cfg);
  } catch (const std::exception& e) {
    return status{errc::internal, std::string("pipeline: the actor system did not start: ") + e.what()};
  }
  auto& sys = *p->sys;

  // 1. Spawn; every actor learns the actors it sends to (wire_actors).
  auto& a = p->actors;
  a.producer = sys.spawn(producer_actor, producer_config{rank, size, opts.process_sets});
  negotiator_config nc;
  nc.rank = rank;
  nc.size = size;
  nc.strategy = opts.negotiation;
  nc.options = nopts;
  // A peer lost on the control plane breaks the data plane with the same cause (so that our
  // peers' errors name that peer, not us). The communicator outlives the pipeline's actors.
  nc.on_peer_lost = [c = &comm](const status& why) { c->abort(why); };
  nc.send_control = control_edge_sender(p->link);
  nc.max_control_bytes = p->link->max_message_bytes();
  a.negotiator = sys.spawn(negotiator_actor, nc);
  bool gpu_nccl = false;
#if CHORUS_WITH_CUDA
  {
    auto nccl = gpu_backend_is_nccl(comm, opts);
    if (!nccl) return nccl.error();
    gpu_nccl = *nccl;
  }
#endif
  fusion_config fc;
  fc.device_whole = gpu_nccl;
  fc.rank = rank;
  fc.size = size;
  fc.fusion_threshold = opts.fusion_threshold;
  fc.chunk_bytes = opts.chunk_bytes;
  fc.small_bytes = comm.options().small_bytes;
  fc.start_window = opts.start_window;
  fc.priority = opts.priority;
  fc.pool_bytes = opts.pool_bytes;
  fc.in_place_bytes = opts.in_place_bytes;
  fc.first_sequence = data_plane::pipeline_sequence_base;
  fc.hierarchical = comm.options().hierarchical;
  fc.hosts = std::make_shared<const host_groups>(comm.hosts());
  fc.process_sets = opts.process_sets;
  fc.wire_compression = std::make_shared<const compression_policy>(comm.wire_compression());
  fc.direct = comm.pipeline_lane();
  fc.direct_max_bytes = fc.direct ? fc.direct->max_bytes() : 0;
  a.fusion = sys.spawn(fusion_actor, fc);
  a.completion = sys.spawn(completion_actor, completion_config{rank, size});
  std::shared_ptr<chunk_runner> runner;
  auto host_runner = std::make_shared<comm_runner>(comm, p->router);
  runner = host_runner;
#if CHORUS_WITH_CUDA
  {
    gpu::executor::options go;
    go.rank = rank;
    go.size = size;
    go.peer_timeout = opts.peer_timeout;
    go.agree_id = [c = &comm, timeout = opts.connect_timeout](const std::string& mine) { return agree_nccl_id(*c, mine, timeout); };
    p->gpu = std::make_shared<gpu::executor>(go);
    runner = std::make_shared<device_runner>(host_runner, p->router, p->gpu, gpu_nccl);
  }
#endif
  for (int s = 0; s < streams; ++s) {
    sender_config sc;
    sc.stream = s;
    sc.runner = runner;
    sc.max_in_flight = opts.chunks_in_flight;
    a.senders.push_back(sys.spawn(sender_actor, sc));
  }
  p->router->wire(a.senders);
  if (opts.stream_placement == "speed")
    a.board = comm.plane().speed_board();
  if (opts.autotune.enabled) a.autotuner = sys.spawn(autotuner_actor, autotuner_config_of(opts, rank, size, streams));
  a.observer = opts.observer;
  const telemetry::tunables first{opts.fusion_threshold, opts.chunk_bytes,
                                  opts.start_streams > 0 ? opts.start_streams : streams,
                                  std::chrono::duration_cast<std::chrono::microseconds>(opts.cycle_time),
                                  opts.in_place_bytes};
  if (a.observer) {
    if (fc.direct_max_bytes) a.observer->on_direct_path(fc.direct_max_bytes, std::chrono::steady_clock::now());
    a.observer->on_tunables(first, std::chrono::steady_clock::now());
  }
  wire_actors(a);
  if (first.streams < streams) send_switch(a, first);  // before any batch: nothing negotiated yet

  // 2. Control plane: the link is connected already (with the data plane).
  p->link->start(control_edge_handlers(a.negotiator));
  CHORUS_LOG(info, "pipeline", "started negotiation=" << opts.negotiation << " control_plane=tcp"
                                                      << " streams=" << streams
                                                      << " fusion_threshold=" << opts.fusion_threshold
                                                      << " chunk_bytes=" << opts.chunk_bytes
                                                      << " cycle_time_us=" << opts.cycle_time.count());
  return std::unique_ptr<pipeline>(new pipeline(std::move(p)));
}

void pipeline::enqueue(op_request r) {
  {
    std::shared_lock lk(mu_);
    if (!stopped_) {
      auto request = std::make_shared<op_request>(std::move(r));
      tsan_edge::publish(request.get());  // the caller's buffers, to the producer (admit)
      caf::anon_send(impl_->actors.producer, op_enqueued{std::move(request), std::chrono::steady_clock::now()});
      return;
    }
  }
  if (r.done)
    r.done({errc::shutdown, describe(r.spec) + ": shut down with '" + r.spec.name + "' pending"}, {}, {});
}

void pipeline::enqueue_all(std::vector<op_request> rs) {
  {
    std::shared_lock lk(mu_);
    if (!stopped_) {
      ops_enqueued e{{}, std::chrono::steady_clock::now()};
      e.requests.reserve(rs.size());
      for (auto& r : rs) {
        e.requests.push_back(std::make_shared<op_request>(std::move(r)));
        tsan_edge::publish(e.requests.back().get());
      }
      caf::anon_send(impl_->actors.producer, std::move(e));
      return;
    }
  }
  for (auto& r : rs)
    if (r.done) r.done({errc::shutdown, describe(r.spec) + ": shut down with '" + r.spec.name + "' pending"}, {}, {});
}

void pipeline::join(std::function<void(const status&, int)> done) {
  {
    std::shared_lock lk(mu_);
    if (!stopped_) {
      caf::anon_send(impl_->actors.producer, join_enqueued{std::move(done)});
      return;
    }
  }
  if (done) done({errc::shutdown, "join: shut down"}, -1);
}

status pipeline::set_tunables(const telemetry::tunables& t) {
  std::shared_lock lk(mu_);
  if (stopped_) return {errc::shutdown, "set_tunables: the pipeline is shut down"};
  auto& p = *impl_;
  if (p.opts.autotune.enabled && !p.autotune_held.load())
    return {errc::config, "set_tunables: CHORUS_AUTOTUNE=1 owns the tunables; set them with autotune off or held "
                          "(hold_autotune)"};
  const int streams = p.comm.num_streams();
  if (t.streams < 1 || t.streams > streams)
    return {errc::invalid_argument, "set_tunables: streams=" + std::to_string(t.streams) + ", expected 1.." +
                                        std::to_string(streams) + " (CHORUS_NUM_STREAMS connections per peer)"};
  if (t.chunk_bytes < 1 || t.fusion_threshold < 1 || t.cycle_time.count() < 1)
    return {errc::invalid_argument, "set_tunables: chunk_bytes=" + std::to_string(t.chunk_bytes) +
                                        " fusion_threshold=" + std::to_string(t.fusion_threshold) +
                                        " cycle_time_us=" + std::to_string(t.cycle_time.count()) +
                                        "; each must be at least 1"};
  send_switch(p.actors, t);
  if (p.actors.observer) p.actors.observer->on_tunables(t, std::chrono::steady_clock::now());
  return {};
}

pipeline_stats pipeline::stats() {
  caf_thread_scope scope;
  std::shared_lock lk(mu_);
  pipeline_stats out;
  if (stopped_) return out;
  caf::scoped_actor self{*impl_->sys};
  self->request(impl_->actors.negotiator, std::chrono::seconds(1), stats_atom::value)
      .receive([&](negotiation_stats& n) { out.negotiation = n; }, [](caf::error&) {});
  for (auto& s : impl_->actors.senders)
    self->request(s, std::chrono::seconds(1), stats_atom::value)
        .receive([&](stream_stats& st) { out.streams.push_back(st); }, [](caf::error&) {});
  return out;
}

void pipeline::shutdown() {
  {
    std::unique_lock lk(mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  caf_thread_scope scope;
  auto& p = *impl_;
  // 1. If the data plane lost a peer, the negotiator relays that cause to its peers first:
  //    otherwise a peer that sees our control connection close next would blame this rank.
  //    Then nothing new is negotiated; what is in negotiation ends now with errc::shutdown.
  if (auto lost = p.comm.plane().failure(); lost.code() == errc::connection_lost)
    caf::anon_send(p.actors.negotiator, gone_atom::value, -1, lost.message());
  caf::anon_send(p.actors.negotiator, stop_atom::value);
  // The relay goes out on the control link before its goodbye: wait until the negotiator has
  // handled both (it answers this after them, in mailbox order).
  {
    caf::scoped_actor self{*p.sys};
    self->request(p.actors.negotiator, std::chrono::seconds(5), stats_atom::value)
        .receive([](negotiation_stats&) {}, [](caf::error&) {});
  }
  // 2. Chunks already agreed keep running (peers wait for them) until the grace ends.
  {
    caf::scoped_actor self{*p.sys};
    auto grace = p.opts.shutdown_grace;
    self->request(p.actors.producer, grace + std::chrono::seconds(5), drain_atom::value,
                  static_cast<int64_t>(grace.count()))
        .receive([](drain_atom) {},
                 [&](caf::error& err) {
                   CHORUS_LOG(warn, "pipeline", "shutdown: the producer did not drain: " << p.sys->render(err));
                 });
  }
  // 3. The data plane may still call back (until communicator::close); the router drops those.
  p.stop_actors();
  CHORUS_LOG(info, "pipeline", "shut down");
}

namespace {
/// Sends `msg` to the autotuner and waits for its answer (`Reply`).
template <class Reply, class Msg>
result<Reply> ask_autotuner(pipeline::impl& p, const Msg& msg, const char* what) {
  if (!p.actors.autotuner) return status{errc::config, std::string(what) + ": autotune is off (CHORUS_AUTOTUNE)"};
  std::optional<Reply> out;
  status failed;
  caf::scoped_actor self{*p.sys};
  self->request(p.actors.autotuner, std::chrono::seconds(30), msg)
      .receive([&](Reply& r) { out = r; },
               [&](caf::error& err) {
                 failed = status{errc::timeout, std::string(what) + ": the autotuner did not answer within 30 s (" +
                                                    p.sys->render(err) +
                                                    "); a window is not agreed: does every rank hold, quiescent?"};
               });
  if (!out) return failed;
  return *out;
}
}  // namespace

status pipeline::hold_autotune() {
  caf_thread_scope scope;
  std::shared_lock lk(mu_);
  if (stopped_) return {errc::shutdown, "hold_autotune: the pipeline is shut down"};
  auto& p = *impl_;
  // 1. No more real windows; how many did this rank submit? Ranks cut windows where their
  //    agreements happened to arrive, so the counts can differ.
  auto mine = ask_autotuner<autotune_windows>(p, autotune_hold{true, false}, "hold_autotune");
  if (!mine) return mine.error();
  // 2. The most any rank submitted; every rank pads to it, so every window gets agreed and
  //    every rank handles the same ones.
  int64_t most = static_cast<int64_t>(mine->submitted);
  if (auto st = p.comm.allreduce(&most, 1, dtype::i64, reduce_op::max); !st.ok())
    return status{st.code(), "hold_autotune: " + st.message()};
  auto done = ask_autotuner<autotune_windows>(p, autotune_pad{static_cast<uint64_t>(most)}, "hold_autotune");
  if (!done) return done.error();
  p.autotune_held = true;
  return {};
}

status pipeline::resume_autotune(bool restart) {
  caf_thread_scope scope;
  std::shared_lock lk(mu_);
  if (stopped_) return {errc::shutdown, "resume_autotune: the pipeline is shut down"};
  auto& p = *impl_;
  p.autotune_held = false;
  auto r = ask_autotuner<autotune_hold>(p, autotune_hold{false, restart}, "resume_autotune");
  return r ? status{} : r.error();
}

pipeline::~pipeline() { shutdown(); }

}  // namespace chorus
