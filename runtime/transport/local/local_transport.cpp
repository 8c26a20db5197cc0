// The local fabric's executor (one queue ordered by virtual due time), its endpoints, frame
// delivery with the wire codec's checks, cancellation, kill and close.
#include "runtime/transport/local/local_transport.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "runtime/core/log.hpp"

namespace chorus::local {
namespace {

using ns = std::chrono::nanoseconds;

[[noreturn]] void invariant_failed(const std::string& what) {
  log::write(log::level::error, "local", what);
  std::abort();
}

// One frame between send() and delivery.
struct frame_task {
  int src = 0;
  int dst = 0;
  int stream = 0;
  wire::frame_header header;
  const std::byte* payload = nullptr;
};

}  // namespace

class local_endpoint;

struct local_fabric::state {
  struct task {
    bool is_frame = false;
    frame_task frame;
    std::function<void()> fn;
  };
  using key = std::pair<int64_t, int64_t>;  // (virtual due time in ns, order queued)

  explicit state(fabric_options o) : opts(std::move(o)) {}

  void enqueue_call(std::function<void()> fn);
  void enqueue_urgent(std::function<void()> fn);
  void enqueue_frame(const frame_task& f);
  // Removes queued and parked frames matching `pred`, in queue order.
  template <class Pred>
  std::vector<frame_task> take_frames(Pred pred);
  bool pop(task& out);  // lock held by the caller
  void execute(task& t);
  void deliver(const frame_task& f);
  void do_kill(int rank);
  void thread_main();

  fabric_options opts;
  wire::frame_limits limits;
  std::vector<std::unique_ptr<local_endpoint>> endpoints;

  mutable std::mutex mu;  // guards everything below up to `running`
  std::condition_variable work_cv;
  std::condition_variable idle_cv;
  std::deque<std::function<void()>> urgent;  // start and kill: before anything queued earlier
  std::map<key, task> queue;
  std::vector<int64_t> link_due;  // [src][dst][stream]: due time of the link's latest frame
  int64_t next_order = 0;
  int64_t now_ns = 0;
  bool stopping = false;
  bool running = false;

  std::atomic<uint64_t> delivered{0};
  std::mutex run_mu;  // threaded mode: held while a task runs, so close() can wait it out
  std::thread thread;
  std::vector<std::byte> scratch = std::vector<std::byte>(4096);  // executor only
};

// One rank's view of the fabric. parked_ is touched by the executor only; sink_ is set once by
// start() from any thread.
class local_endpoint final : public transport {
 public:
  local_endpoint(local_fabric::state& s, int rank) : told_(s.opts.size, false), s_(s), rank_(rank) {}

  int rank() const override { return rank_; }
  int size() const override { return s_.opts.size; }
  int num_streams() const override { return s_.opts.num_streams; }
  uint64_t job_id() const override { return s_.opts.job_id; }

  // The sink is set at once (so releases from now on reach it); frames that arrived before
  // start are delivered, in order, by an urgent task (deliver() queues behind them meanwhile).
  void start(frame_sink* sink) override {
    sink_ = sink;
    s_.enqueue_urgent([this] {
      auto parked = std::move(parked_);
      parked_.clear();
      for (auto& f : parked) s_.deliver(f);
      for (int p = 0; p < size(); ++p)
        if (p != rank_ && s_.endpoints[p]->dead_) lost(p, killed_status(p, rank_));
      if (dead_)
        for (int p = 0; p < size(); ++p)
          if (p != rank_) lost(p, killed_status(rank_, p));
    });
  }

  void post(std::function<void()> fn) override { s_.enqueue_call(std::move(fn)); }

  void send(int peer, int stream, const wire::frame_header& h, const std::byte* payload) override {
    if (peer < 0 || peer >= size() || stream < 0 || stream >= num_streams())
      invariant_failed("local send from rank " + std::to_string(rank_) + " to peer=" + std::to_string(peer) +
                       " stream=" + std::to_string(stream) + " (" + wire::describe(h) + "); the fabric has " +
                       std::to_string(size()) + " ranks and " + std::to_string(num_streams()) + " streams");
    frame_task f{rank_, peer, stream, h, payload};
    if (closed_) return;
    if (dead_) {  // its connections are gone: let go of the payload, later, like a failed write
      s_.enqueue_call([this, f] { release(f); });
      return;
    }
    s_.enqueue_frame(f);
  }

  void cancel(uint64_t sequence) override {
    auto dropped = s_.take_frames([&](const frame_task& f) {
      return f.src == rank_ && f.header.kind == wire::frame_kind::data && f.header.sequence == sequence;
    });
    for (auto& f : dropped) release(f);
  }

  // Like tcp: every peer learns why this rank gave up on the job.
  void abort(const status& why) override {
    status told{errc::protocol, "rank " + std::to_string(rank_) + " aborted the job: " + why.to_string()};
    s_.enqueue_call([this, told] {
      for (int p = 0; p < size(); ++p)
        if (p != rank_ && !s_.endpoints[p]->dead_) s_.endpoints[p]->lost(rank_, told);
    });
  }

  void close(std::chrono::milliseconds) override {
    closed_ = true;
    // Threaded mode, called from outside: wait for a sink call in progress to return.
    if (s_.thread.joinable() && std::this_thread::get_id() != s_.thread.get_id()) std::lock_guard g(s_.run_mu);
  }

  // The transport no longer references f's payload.
  void release(const frame_task& f) {
    if (auto* sink = sink_.load(); sink && !closed_) sink->sent(f.dst, f.header);
  }
  void peer_failed(int peer, const status& why) {
    if (auto* sink = sink_.load(); sink && !closed_) sink->peer_failed(peer, why);
  }
  // The connection to `peer` is gone: the sink hears it once (kill and start may both try).
  void lost(int peer, const status& why) {
    if (!sink_.load() || told_[peer]) return;
    told_[peer] = true;
    peer_failed(peer, why);
  }
  static status killed_status(int victim, int other) {
    return status{errc::connection_lost, "rank " + std::to_string(victim) +
                                             " was killed (local fabric): connection to rank " +
                                             std::to_string(other) + " lost"};
  }

  std::atomic<frame_sink*> sink_{nullptr};  // set by start(), from any thread
  std::vector<frame_task> parked_;  // arrived before start(): executor only
  std::vector<bool> told_;          // [peer]: lost() reported it; executor only
  std::atomic<bool> dead_{false};
  std::atomic<bool> closed_{false};

 private:
  local_fabric::state& s_;
  int rank_;
};

// ---- queueing --------------------------------------------------------------------------------

void local_fabric::state::enqueue_call(std::function<void()> fn) {
  {
    std::lock_guard g(mu);
    if (stopping) return;
    task t;
    t.fn = std::move(fn);
    queue.emplace(key{now_ns, next_order++}, std::move(t));
  }
  work_cv.notify_one();
}

void local_fabric::state::enqueue_urgent(std::function<void()> fn) {
  {
    std::lock_guard g(mu);
    if (stopping) return;
    urgent.push_back(std::move(fn));
  }
  work_cv.notify_one();
}

void local_fabric::state::enqueue_frame(const frame_task& f) {
  {
    std::lock_guard g(mu);
    if (stopping) return;
    int64_t delay = 0;
    if (opts.delay) {
      delay = opts.delay(frame_route{f.src, f.dst, f.stream, f.header.length, ns(now_ns)}).count();
      if (delay < 0)
        invariant_failed("local fabric delay model returned " + std::to_string(delay) + " ns for a frame from rank " +
                         std::to_string(f.src) + " to rank " + std::to_string(f.dst) + "; delays must be >= 0");
    }
    auto& last = link_due[(static_cast<std::size_t>(f.src) * opts.size + f.dst) * opts.num_streams + f.stream];
    last = std::max(now_ns + delay, last);  // a link delivers in the order it was sent
    task t;
    t.is_frame = true;
    t.frame = f;
    queue.emplace(key{last, next_order++}, std::move(t));
  }
  work_cv.notify_one();
}

template <class Pred>
std::vector<frame_task> local_fabric::state::take_frames(Pred pred) {
  std::vector<frame_task> out;
  {
    std::lock_guard g(mu);
    for (auto it = queue.begin(); it != queue.end();) {
      if (it->second.is_frame && pred(it->second.frame)) {
        out.push_back(it->second.frame);
        it = queue.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& e : endpoints) {  // parked frames are touched by the executor only, as we are
    auto& parked = e->parked_;
    for (auto it = parked.begin(); it != parked.end();) {
      if (pred(*it)) {
        out.push_back(*it);
        it = parked.erase(it);
      } else {
        ++it;
      }
    }
  }
  return out;
}

bool local_fabric::state::pop(task& out) {
  if (!urgent.empty()) {
    out = task{};
    out.fn = std::move(urgent.front());
    urgent.pop_front();
    return true;
  }
  if (queue.empty()) return false;
  auto it = queue.begin();
  now_ns = std::max(now_ns, it->first.first);
  out = std::move(it->second);
  queue.erase(it);
  return true;
}

// ---- running tasks ---------------------------------------------------------------------------

void local_fabric::state::execute(task& t) {
  if (t.is_frame) deliver(t.frame);
  else t.fn();
}

void local_fabric::state::deliver(const frame_task& f) {
  auto& src = *endpoints[f.src];
  auto& dst = *endpoints[f.dst];
  if (src.dead_) return;  // kill released it already
  if (dst.dead_ || dst.closed_) {
    src.release(f);
    return;
  }
  frame_sink* sink = dst.sink_.load();
  if (!sink || !dst.parked_.empty()) {  // not started, or earlier frames not yet handed over
    dst.parked_.push_back(f);
    return;
  }
  // The receiver checks the header exactly as a TCP connection does.
  std::byte head[wire::frame_header_size];
  wire::encode(f.header, head);
  auto h = wire::decode(head, sizeof head, limits);
  if (!h || h->kind != wire::frame_kind::data) {
    std::string why = h ? "unexpected frame " + wire::describe(f.header) : h.error().message();
    dst.peer_failed(f.src, status{errc::protocol, "rank " + std::to_string(f.src) + " stream " +
                                                      std::to_string(f.stream) + " sent a bad frame: " + why});
    src.release(f);
    return;
  }
  const std::size_t n = f.header.length;
  std::byte* where = n ? sink->destination(f.src, f.header) : nullptr;
  if (where) {
    std::memcpy(where, f.payload, n);
  } else {
    if (scratch.size() < n) scratch.resize(n);
    if (n) std::memcpy(scratch.data(), f.payload, n);
    where = scratch.data();
  }
  sink->delivered(f.src, f.header, where);
  delivered.fetch_add(1, std::memory_order_relaxed);
  src.release(f);
}

void local_fabric::state::do_kill(int rank) {
  auto& victim = *endpoints[rank];
  if (victim.dead_) return;
  victim.dead_ = true;
  // 1. Everyone alive learns that the rank is gone, and the victim that its connections broke,
  //    before any payload is let go: an op must not look finished because its frames were
  //    released undelivered.
  for (int p = 0; p < opts.size; ++p) {
    if (p == rank || endpoints[p]->dead_) continue;
    endpoints[p]->lost(rank, local_endpoint::killed_status(rank, p));
  }
  for (int p = 0; p < opts.size; ++p) {
    if (p == rank || endpoints[p]->dead_) continue;
    victim.lost(p, local_endpoint::killed_status(rank, p));
  }
  // 2. What it still had queued is let go; frames parked for it go back to their senders.
  for (auto& f : take_frames([&](const frame_task& f) { return f.src == rank; })) victim.release(f);
  auto parked = std::move(victim.parked_);
  victim.parked_.clear();
  for (auto& f : parked) endpoints[f.src]->release(f);
}

void local_fabric::state::thread_main() {
  std::unique_lock lk(mu);
  for (;;) {
    work_cv.wait(lk, [&] { return stopping || !urgent.empty() || !queue.empty(); });
    if (stopping) break;
    task t;
    pop(t);
    running = true;
    lk.unlock();
    {
      std::lock_guard run(run_mu);
      execute(t);
    }
    t = task{};  // captured state dies outside the lock too
    lk.lock();
    running = false;
    if (urgent.empty() && queue.empty()) idle_cv.notify_all();
  }
  idle_cv.notify_all();
}

// ---- the fabric ------------------------------------------------------------------------------

local_fabric::local_fabric(fabric_options opts) : s_(std::make_unique<state>(std::move(opts))) {
  auto& o = s_->opts;
  if (o.size < 1 || o.num_streams < 1)
    invariant_failed("local_fabric: size=" + std::to_string(o.size) + " num_streams=" +
                     std::to_string(o.num_streams) + "; both must be >= 1");
  s_->limits = wire::frame_limits{o.job_id, o.max_payload};
  s_->link_due.assign(static_cast<std::size_t>(o.size) * o.size * o.num_streams, 0);
  for (int r = 0; r < o.size; ++r) s_->endpoints.push_back(std::make_unique<local_endpoint>(*s_, r));
  if (o.threaded) s_->thread = std::thread([s = s_.get()] { s->thread_main(); });
}

local_fabric::~local_fabric() { stop(); }

int local_fabric::size() const { return s_->opts.size; }
int local_fabric::num_streams() const { return s_->opts.num_streams; }

transport& local_fabric::endpoint(int rank) {
  if (rank < 0 || rank >= size())
    invariant_failed("local_fabric::endpoint(" + std::to_string(rank) + ") of " + std::to_string(size()) + " ranks");
  return *s_->endpoints[rank];
}

bool local_fabric::run_one() {
  if (s_->opts.threaded) invariant_failed("local_fabric::run_one() in threaded mode; use wait_idle()");
  state::task t;
  {
    std::lock_guard g(s_->mu);
    if (s_->stopping || !s_->pop(t)) return false;
  }
  s_->execute(t);
  return true;
}

std::size_t local_fabric::run_until_idle(std::size_t max_tasks) {
  std::size_t n = 0;
  while (n < max_tasks && run_one()) ++n;
  return n;
}

bool local_fabric::wait_idle(std::chrono::milliseconds timeout) {
  if (!s_->opts.threaded) invariant_failed("local_fabric::wait_idle() in deterministic mode; use run_until_idle()");
  std::unique_lock lk(s_->mu);
  return s_->idle_cv.wait_for(lk, timeout, [&] {
    return s_->stopping || (s_->urgent.empty() && s_->queue.empty() && !s_->running);
  });
}

void local_fabric::stop() {
  std::map<state::key, state::task> dropped;
  std::deque<std::function<void()>> dropped_urgent;
  {
    std::lock_guard g(s_->mu);
    s_->stopping = true;
    dropped.swap(s_->queue);
    dropped_urgent.swap(s_->urgent);
  }
  s_->work_cv.notify_all();
  if (s_->thread.joinable() && std::this_thread::get_id() != s_->thread.get_id()) s_->thread.join();
}

void local_fabric::kill(int rank) {
  if (rank < 0 || rank >= size())
    invariant_failed("local_fabric::kill(" + std::to_string(rank) + ") of " + std::to_string(size()) + " ranks");
  s_->enqueue_urgent([s = s_.get(), rank] { s->do_kill(rank); });
}

bool local_fabric::killed(int rank) const { return s_->endpoints.at(rank)->dead_; }

std::size_t local_fabric::queued() const {
  std::lock_guard g(s_->mu);
  return s_->urgent.size() + s_->queue.size();
}

std::chrono::nanoseconds local_fabric::now() const {
  std::lock_guard g(s_->mu);
  return ns(s_->now_ns);
}

uint64_t local_fabric::frames_delivered() const { return s_->delivered.load(std::memory_order_relaxed); }

// ---- delay models ----------------------------------------------------------------------------

delay_fn link_model(std::chrono::nanoseconds latency, double bytes_per_second) {
  if (latency.count() < 0 || !(bytes_per_second > 0))
    invariant_failed("link_model: latency=" + std::to_string(latency.count()) + "ns bytes_per_second=" +
                     std::to_string(bytes_per_second) + "; expected latency >= 0 and a positive bandwidth");
  auto busy_until = std::make_shared<std::map<std::tuple<int, int, int>, ns>>();
  return [=](const frame_route& r) {
    auto& busy = (*busy_until)[{r.src, r.dst, r.stream}];
    ns begin = std::max(r.now, busy);
    busy = begin + ns(static_cast<int64_t>(static_cast<double>(r.bytes) * 1e9 / bytes_per_second));
    return busy + latency - r.now;
  };
}

delay_fn random_delay(uint64_t seed, std::chrono::nanoseconds max) {
  if (max.count() < 0) invariant_failed("random_delay: max=" + std::to_string(max.count()) + "ns; expected >= 0");
  auto rng = std::make_shared<std::mt19937_64>(seed);
  return [=](const frame_route&) {
    return ns(std::uniform_int_distribution<int64_t>(0, max.count())(*rng));
  };
}

}  // namespace chorus::local
