// The in-process job: spawns N negotiators (+ fusion actors) and their capture actors in one
// actor system, hands them enqueued tensors, and keeps what the captures and the capture
// observers recorded. Sends tensor_ready; captures receive batch_agreed, op_finished,
// bucket_planned and chunk_work, and answer chunks with chunk_ended.
#include "actors/in_process_job.hpp"

#include <sys/prctl.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <sstream>
#include <unordered_map>

#include <caf/all.hpp>

#include "actors/fusion_actor.hpp"
#include "actors/negotiator_actor.hpp"
#include "actors/producer_actor.hpp"
#include "actors/protocol.hpp"

namespace chorus {

namespace {

/// What one rank's capture actor and capture observer write, and the accessors read.
struct rank_log {
  mutable std::mutex mu;
  std::unordered_map<uint64_t, std::string> pending;  ///< handle → name, enqueued and not ended
  std::vector<agreed_record> batches;
  std::vector<bucket_record> buckets;
  std::vector<telemetry::cycle_event> cycles;
  std::vector<failed_record> failures;
  std::atomic<uint64_t> sent{0}, received{0};
};

/// Job-wide progress: how many ops ended, to wake wait().
struct progress {
  std::mutex mu;
  std::condition_variable cv;
  uint64_t enqueued = 0;
  uint64_t ended = 0;
  status first_failure;
  void end(uint64_t n, const status* failure) {
    std::lock_guard lk(mu);
    ended += n;
    if (failure && first_failure.ok()) first_failure = *failure;
    if (ended >= enqueued) cv.notify_all();
  }
};

/// Counts a rank's control messages and keeps its cycles; everything else is ignored.
class capture_observer final : public telemetry::observer {
 public:
  explicit capture_observer(std::shared_ptr<rank_log> log) : log_(std::move(log)) {}
  void on_gossip_sent(int, std::span<const uint8_t>, telemetry::time_point) override {
    log_->sent.fetch_add(1, std::memory_order_relaxed);
  }
  void on_gossip_received(std::span<const uint8_t>, telemetry::time_point) override {
    log_->received.fetch_add(1, std::memory_order_relaxed);
  }
  void on_cycle(const telemetry::cycle_event& c) override {
    std::lock_guard lk(log_->mu);
    log_->cycles.push_back(c);
  }

 private:
  std::shared_ptr<rank_log> log_;
};

/// Stands in for rank r's producer, senders and completion (and sits in front of its fusion
/// actor when there is one). Chunks "end" as soon as they arrive: fusion hands them out in
/// increasing sequence order, so everything below the newest one has ended.
caf::behavior capture_actor(caf::event_based_actor* self, int rank, std::shared_ptr<rank_log> log,
                            std::shared_ptr<progress> prog, caf::actor fusion) {
  return {
      [=](batch_agreed& b) {
        agreed_record rec{b.cycle, {}, {}, std::chrono::steady_clock::now()};
        rec.names.reserve(b.ops.size());
        rec.handles.reserve(b.ops.size());
        for (const auto& op : b.ops) {
          rec.names.push_back(op.spec.name);
          rec.handles.push_back(op.handle);
        }
        auto n = b.ops.size();
        {
          std::lock_guard lk(log->mu);
          for (auto h : rec.handles) log->pending.erase(h);
          log->batches.push_back(std::move(rec));
        }
        if (fusion) self->send(fusion, std::move(b));
        prog->end(n, nullptr);
      },
      [=](op_finished& f) {
        failed_record rec{f.handle, {}, f.result};
        {
          std::lock_guard lk(log->mu);
          if (auto it = log->pending.find(f.handle); it != log->pending.end()) {
            rec.name = it->second;
            log->pending.erase(it);
          }
          log->failures.push_back(rec);
        }
        status why{f.result.code(), "rank " + std::to_string(rank) + ": " + f.result.message()};
        prog->end(1, &why);
      },
      [=](const bucket_planned& p) {
        if (!p.job) return;
        bucket_record rec{p.job->id, p.job->first_sequence, p.job->chunks, p.job->plan.bytes, p.job->plan.in_place, {}};
        for (const auto& op : p.job->ops) rec.names.push_back(op.spec.name);
        std::lock_guard lk(log->mu);
        log->buckets.push_back(std::move(rec));
      },
      [=](const chunk_work& w) {
        if (fusion) self->send(fusion, chunk_ended{w.sequence});
      },
  };
}

// A copy of one record list of a rank's log, taken under the log's lock (the capture actor
// and observer append to it meanwhile).
template <class T>
std::vector<T> copy_locked(const rank_log& log, std::vector<T> rank_log::*list) {
  std::lock_guard lk(log.mu);
  return log.*list;
}

}  // namespace

struct in_process_job::impl {
  in_process_job_options opts;
  caf::actor_system_config cfg;  // outlives sys
  std::unique_ptr<caf::actor_system> sys;
  std::vector<caf::actor> negotiators, fusions, captures;
  std::vector<std::shared_ptr<rank_log>> logs;
  std::shared_ptr<progress> prog = std::make_shared<progress>();
  std::atomic<uint64_t> next_handle{1};
  std::mutex scratch_mu;
  std::vector<std::unique_ptr<std::byte[]>> scratch;  ///< zeroed; the newest is the largest
  std::size_t scratch_bytes = 0;
  bool stopped = false;

  void* scratch_for(std::size_t bytes) {
    std::lock_guard lk(scratch_mu);
    if (bytes > scratch_bytes || scratch.empty()) {
      scratch_bytes = std::max<std::size_t>({bytes, 2 * scratch_bytes, 4096});
      scratch.push_back(std::make_unique<std::byte[]>(scratch_bytes));  // value-initialised: zeros
    }
    return scratch.back().get();
  }
};

in_process_job::in_process_job(std::unique_ptr<impl> p) : impl_(std::move(p)) {}

in_process_job::~in_process_job() { stop(); }

int in_process_job::size() const { return impl_->opts.ranks; }

result<std::unique_ptr<in_process_job>> in_process_job::start(const in_process_job_options& o) {
  if (o.ranks < 1 || o.scheduler_threads < 1 || o.streams < 1 || o.start_window < 1 || o.link_latency.count() < 0)
    return status{errc::config, "in_process_job: ranks=" + std::to_string(o.ranks) + " scheduler_threads=" +
                                    std::to_string(o.scheduler_threads) + " streams=" + std::to_string(o.streams) +
                                    " start_window=" + std::to_string(o.start_window) + " link_latency_us=" +
                                    std::to_string(o.link_latency.count()) +
                                    "; ranks, threads, streams and window must be at least 1, latency at least 0"};
  if (auto s = negotiation::make_strategy(o.strategy, 0, o.ranks, o.negotiation); !s)
    return status{s.error().code(), "in_process_job: " + s.error().message()};

  auto p = std::make_unique<impl>();
  p->opts = o;
  register_types(p->cfg);
  p->cfg.set("scheduler.max-threads", static_cast<std::size_t>(o.scheduler_threads));
  if (!o.busy_poll) {
    p->cfg.set("work-stealing.aggressive-poll-attempts", std::size_t{0});
    p->cfg.set("work-stealing.moderate-poll-attempts", std::size_t{0});
  }
  p->cfg.set("logger.file-verbosity", caf::atom("quiet"));
  p->cfg.set("logger.console-verbosity", caf::atom("quiet"));
  // Threads inherit their creator's timer slack: with the default 50 µs every modelled link
  // (a delayed send, woken by CAF's timer thread) would be up to 50 µs late.
  int old_slack = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  try {
    p->sys = std::make_unique<caf::actor_system>(p->cfg);
  } catch (const std::exception& e) {
    if (old_slack > 0) prctl(PR_SET_TIMERSLACK, static_cast<unsigned long>(old_slack), 0, 0, 0);
    return status{errc::internal, std::string("in_process_job: the actor system did not start: ") + e.what()};
  }
  if (old_slack > 0) prctl(PR_SET_TIMERSLACK, static_cast<unsigned long>(old_slack), 0, 0, 0);
  auto& sys = *p->sys;

  // 1. Spawn every rank: fusion (optional), its capture, its negotiator.
  const auto n = static_cast<std::size_t>(o.ranks);
  for (int r = 0; r < o.ranks; ++r) {
    p->logs.push_back(std::make_shared<rank_log>());
    caf::actor fusion;
    if (o.fusion) {
      fusion_config fc;
      fc.rank = r;
      fc.size = o.ranks;
      fc.fusion_threshold = o.fusion_threshold;
      fc.chunk_bytes = o.chunk_bytes;
      fc.small_bytes = o.small_bytes;
      fc.in_place_bytes = o.in_place_bytes;
      fc.start_window = o.start_window;
      fc.pool_bytes = o.pool_bytes;
      fc.pre_touch = false;
      fc.first_sequence = 0;
      fusion = sys.spawn(fusion_actor, fc);
    }
    p->fusions.push_back(fusion);
    p->captures.push_back(sys.spawn(capture_actor, r, p->logs.back(), p->prog, fusion));
    negotiator_config nc;
    nc.rank = r;
    nc.size = o.ranks;
    nc.strategy = o.strategy;
    nc.options = o.negotiation;
    nc.link_latency = o.link_latency;
    nc.max_samples = 1024;
    p->negotiators.push_back(sys.spawn(negotiator_actor, nc));
  }

  // 2. Wire: the negotiator's producer and fusion are the capture; fusion's completion and
  //    senders are the capture too. Every negotiator gets every other one as a local handle.
  for (std::size_t r = 0; r < n; ++r) {
    std::vector<std::shared_ptr<telemetry::observer>> parts{std::make_shared<capture_observer>(p->logs[r])};
    if (o.observer) parts.push_back(o.observer(static_cast<int>(r)));
    auto observer = telemetry::fan_out(std::move(parts));
    caf::anon_send(p->negotiators[r], negotiator_wiring{p->captures[r], p->captures[r], {}, observer});
    if (o.fusion) {
      std::vector<caf::actor> senders(static_cast<std::size_t>(o.streams), p->captures[r]);
      caf::anon_send(p->fusions[r], fusion_wiring{p->captures[r], std::move(senders), observer, nullptr});
    }
    caf::anon_send(p->negotiators[r], peers_connected{p->negotiators});
  }
  caf::logger::set_current_actor_system(nullptr);  // see pipeline.cpp, caf_thread_scope
  return std::unique_ptr<in_process_job>(new in_process_job(std::move(p)));
}

uint64_t in_process_job::enqueue(int rank, const tensor_spec& spec) {
  auto& p = *impl_;
  if (rank < 0 || rank >= p.opts.ranks)
    throw std::out_of_range("in_process_job::enqueue: rank " + std::to_string(rank) + " of " +
                            std::to_string(p.opts.ranks));
  op_request r;
  r.spec = spec;
  if (p.opts.fusion) r.output = p.scratch_for(static_cast<std::size_t>(std::max<int64_t>(spec.byte_size(), 0)));
  uint64_t handle = p.next_handle.fetch_add(1);
  auto op = make_op_ref(handle, r, std::chrono::steady_clock::now());
  {
    std::lock_guard lk(p.logs[static_cast<std::size_t>(rank)]->mu);
    p.logs[static_cast<std::size_t>(rank)]->pending.emplace(handle, spec.name);
  }
  {
    std::lock_guard lk(p.prog->mu);
    ++p.prog->enqueued;
  }
  caf::anon_send(p.negotiators[static_cast<std::size_t>(rank)], tensor_ready{std::move(op)});
  return handle;
}

status in_process_job::wait(std::chrono::milliseconds timeout) {
  auto& p = *impl_;
  {
    std::unique_lock lk(p.prog->mu);
    if (p.prog->cv.wait_for(lk, timeout, [&] { return p.prog->ended >= p.prog->enqueued; }))
      return p.prog->first_failure;
  }
  std::ostringstream why;
  why << "in_process_job: after " << timeout.count() << " ms ops are still pending on";
  int listed = 0, ranks = 0;
  for (std::size_t r = 0; r < p.logs.size(); ++r) {
    std::lock_guard lk(p.logs[r]->mu);
    if (p.logs[r]->pending.empty()) continue;
    ++ranks;
    if (listed++ >= 4) continue;
    why << " rank " << r << " (" << p.logs[r]->pending.size() << ": '" << p.logs[r]->pending.begin()->second
        << "'...)";
  }
  why << "; " << ranks << " rank(s) in all";
  return {errc::timeout, why.str()};
}

std::vector<agreed_record> in_process_job::batches(int rank) const {
  return copy_locked(*impl_->logs.at(static_cast<std::size_t>(rank)), &rank_log::batches);
}

std::vector<bucket_record> in_process_job::buckets(int rank) const {
  return copy_locked(*impl_->logs.at(static_cast<std::size_t>(rank)), &rank_log::buckets);
}

std::vector<telemetry::cycle_event> in_process_job::cycles(int rank) const {
  return copy_locked(*impl_->logs.at(static_cast<std::size_t>(rank)), &rank_log::cycles);
}

std::vector<failed_record> in_process_job::failures(int rank) const {
  return copy_locked(*impl_->logs.at(static_cast<std::size_t>(rank)), &rank_log::failures);
}

message_counts in_process_job::messages(int rank) const {
  auto& log = *impl_->logs.at(static_cast<std::size_t>(rank));
  return {log.sent.load(), log.received.load()};
}

std::string in_process_job::divergence() const {
  auto show = [](const agreed_record& b) {
    std::string s = "cycle " + std::to_string(b.cycle) + " [";
    for (std::size_t i = 0; i < b.names.size(); ++i) s += (i ? "," : "") + b.names[i];
    return s + "]";
  };
  auto ref = batches(0);
  for (int r = 1; r < size(); ++r) {
    auto mine = batches(r);
    for (std::size_t i = 0; i < std::max(mine.size(), ref.size()); ++i) {
      if (i < mine.size() && i < ref.size() && mine[i].cycle == ref[i].cycle && mine[i].names == ref[i].names)
        continue;
      return "rank " + std::to_string(r) + " batch " + std::to_string(i) + ": " +
             (i < mine.size() ? show(mine[i]) : "none") + " but rank 0 has " + (i < ref.size() ? show(ref[i]) : "none");
    }
  }
  return "";
}

void in_process_job::stop() {
  auto& p = *impl_;
  if (p.stopped) return;
  p.stopped = true;
  {
    // 1. Ops still in negotiation end with errc::shutdown (recorded as failures).
    caf::scoped_actor self{*p.sys};
    for (auto& a : p.negotiators) self->send(a, stop_atom::value);
    for (auto& a : p.negotiators)
      self->request(a, std::chrono::seconds(5), stats_atom::value).receive([](negotiation_stats&) {},
                                                                            [](caf::error&) {});
  }
  (void)wait(std::chrono::seconds(2));  // their op_finished reach the captures
  // 2. Every actor ends; the system waits for them.
  for (auto* group : {&p.negotiators, &p.fusions, &p.captures})
    for (auto& a : *group)
      if (a) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  p.negotiators.clear();
  p.fusions.clear();
  p.captures.clear();
  p.sys.reset();
  caf::logger::set_current_actor_system(nullptr);
}

}  // namespace chorus
