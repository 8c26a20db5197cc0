// The sender actor: a sorted deque per stream, bounded in-flight chunks, work stealing.
#include "actors/sender_actor.hpp"

#include <algorithm>

#include "runtime/collectives/stream_board.hpp"
#include "runtime/core/log.hpp"
#include "runtime/core/tsan_edge.hpp"

namespace chorus {

namespace {

using self_ptr = caf::stateful_actor<sender_state>*;

bool is_direct(const chunk_work& w) { return w.algo == chunk_algo::mailbox_allreduce; }

/// Queues `w` in runs_before order and counts it in the runner's hint (chunk_runner::queued_anywhere)
/// unless it is direct: direct chunks are never stolen (sender_actor.hpp).
void insert_sorted(sender_state& s, chunk_work w) {
  auto& q = s.queue;
  auto at = std::upper_bound(q.begin(), q.end(), w, [](const chunk_work& a, const chunk_work& b) { return runs_before(a, b); });
  if (!is_direct(w)) s.cfg.runner->queued_anywhere().fetch_add(1, std::memory_order_relaxed);
  q.insert(at, std::move(w));
}

/// Takes queue[at] out of the queue, and uncounts it.
chunk_work take(sender_state& s, std::size_t at) {
  auto it = s.queue.begin() + static_cast<std::ptrdiff_t>(at);
  auto w = std::move(*it);
  s.queue.erase(it);
  if (!is_direct(w)) s.cfg.runner->queued_anywhere().fetch_sub(1, std::memory_order_relaxed);
  return w;
}

/// The chunks a thief may take: the queued ones but the direct.
std::size_t stealable(const sender_state& s) {
  return static_cast<std::size_t>(
      std::count_if(s.queue.begin(), s.queue.end(), [](const chunk_work& w) { return !is_direct(w); }));
}

void start(self_ptr self, chunk_work w) {
  auto& s = self->state;
  if (s.in_flight.empty()) s.busy_since = self->clock().now();
  uint64_t seq = w.sequence;
  if (s.cfg.record_starts) s.started.push_back(seq);
  w.started = std::chrono::steady_clock::now();
  observer_of(s.wired.observer).on_chunk_start(s.cfg.stream, seq, w.bytes, w.started);
  auto [it, fresh] = s.in_flight.emplace(seq, std::move(w));
  if (!fresh) {
    CHORUS_LOG(error, "sender", "stream=" << s.cfg.stream << " sequence=" << seq << " started twice");
    return;
  }
  s.stats.max_in_flight = std::max(s.stats.max_in_flight, s.in_flight.size());
  if (is_direct(it->second))
    ++s.direct_in_flight;
  else if (s.wired.board)
    s.wired.board->started(s.cfg.stream, it->second.started);
  s.cfg.runner->run(it->second, s.cfg.stream);
}

/// Whether `w` runs before every chunk in flight that holds a slot (direct chunks hold none).
bool before_every_slot(const sender_state& s, const chunk_work& w) {
  for (const auto& [seq, f] : s.in_flight)
    if (!is_direct(f) && !runs_before(w, f)) return false;
  return true;
}

/// Rule (2) of the invariant in sender_actor.hpp.
void try_start(self_ptr self) {
  auto& s = self->state;
  while (!s.queue.empty()) {
    bool slot = s.in_flight.size() - s.direct_in_flight < s.cfg.max_in_flight;
    bool oldest = before_every_slot(s, s.queue.front());
    bool direct = is_direct(s.queue.front());  // no slot (sender_actor.hpp)
    if (!slot && !oldest && !direct) break;
    start(self, take(s, 0));
  }
}

void maybe_steal(self_ptr self) {
  auto& s = self->state;
  auto n = s.wired.senders.size();
  if (!s.cfg.steal || !s.active || n < 2 || s.stealing || !s.queue.empty() ||
      s.in_flight.size() - s.direct_in_flight >= s.cfg.max_in_flight)
    return;
  // Our deque is empty: the count is the siblings' queued chunks. None: nothing to steal.
  if (s.cfg.runner->queued_anywhere().load(std::memory_order_relaxed) == 0) return;
  s.stealing = true;
  ++s.round;
  s.offers_left = n - 1;
  s.best_victim = -1;
  s.best_queued = 0;
  for (std::size_t i = 0; i < n; ++i)
    if (static_cast<int>(i) != s.cfg.stream) self->send(s.wired.senders[i], steal_request{s.cfg.stream, s.round});
}

void add_busy(self_ptr self) {
  auto& s = self->state;
  auto d = self->clock().now() - s.busy_since;
  s.stats.busy_us += static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(d).count());
}

}  // namespace

caf::behavior sender_actor(self_ptr self, sender_config cfg) {
  self->state.cfg = cfg;
  self->state.stats.stream = cfg.stream;
  return {
      [=](const sender_wiring& w) { self->state.wired = w; },
      [=](chunk_work& w) {
        insert_sorted(self->state, std::move(w));
        try_start(self);
      },
      [=](const chunk_ran& r) {
        auto& s = self->state;
        auto it = s.in_flight.find(r.sequence);
        if (it == s.in_flight.end()) {
          CHORUS_LOG(error, "sender", "stream=" << s.cfg.stream << " sequence=" << r.sequence << " ended but is not in flight");
          return;
        }
        tsan_edge::observe(it->second.job.get());  // published by completion_router::post on the I/O thread
        ++s.stats.chunks;
        s.stats.bytes += it->second.bytes;
        observer_of(s.wired.observer).on_chunk_end(s.cfg.stream, r.sequence, it->second.bytes, r.result, it->second.started,
                                          std::chrono::steady_clock::now());
        if (const auto& job = it->second.job; job && !job->ops.empty() && r.result.ok() &&
                                               job->wire != compression::none) {
          const std::size_t raw = it->second.bytes;  // compressed: 2 bytes on the wire per element
          observer_of(s.wired.observer).on_compressed(s.cfg.stream, raw, raw / size_of(it->second.type) * 2,
                                             std::chrono::steady_clock::now());
        }
        if (is_direct(it->second))
          --s.direct_in_flight;
        else if (s.wired.board)
          s.wired.board->finished(s.cfg.stream, it->second.bytes, std::chrono::steady_clock::now());
        uint64_t bucket = it->second.job ? it->second.job->id : 0;
        s.in_flight.erase(it);
        if (s.in_flight.empty()) add_busy(self);
        self->send(s.wired.completion, chunk_done{r.sequence, bucket, s.cfg.stream, r.result});
        try_start(self);
        maybe_steal(self);
      },
      [=](const steal_request& q) {
        auto& s = self->state;
        self->send(s.wired.senders[static_cast<std::size_t>(q.thief)], steal_offer{s.cfg.stream, q.round, stealable(s)});
      },
      [=](const steal_offer& o) {
        auto& s = self->state;
        if (!s.stealing || o.round != s.round) return;
        if (o.queued > s.best_queued) {
          s.best_queued = o.queued;
          s.best_victim = o.victim;
        }
        if (--s.offers_left > 0) return;
        if (s.best_victim < 0) {
          s.stealing = false;  // nothing anywhere; the next chunk_ran or chunk_work retries
          return;
        }
        self->send(s.wired.senders[static_cast<std::size_t>(s.best_victim)], steal_take{s.cfg.stream, s.round});
      },
      [=](const steal_take& t) {
        auto& s = self->state;
        steal_reply r{s.cfg.stream, t.round, std::nullopt};
        // The newest chunk but a direct one: a direct chunk is only queued behind a chunk
        // waiting for a slot, and runs on the direct path whichever sender starts it.
        for (std::size_t i = s.queue.size(); i-- > 0;)
          if (!is_direct(s.queue[i])) {
            r.chunk = take(s, i);
            ++s.stats.given;
            break;
          }
        self->send(s.wired.senders[static_cast<std::size_t>(t.thief)], std::move(r));
        try_start(self);  // a direct chunk that waited behind the stolen one may head the deque now
      },
      [=](steal_reply& r) {
        auto& s = self->state;
        if (r.round != s.round) return;
        s.stealing = false;
        if (!r.chunk) return;
        ++s.stats.stolen;
        observer_of(s.wired.observer).on_steal(s.cfg.stream, r.victim, r.chunk->sequence, std::chrono::steady_clock::now());
        if (s.wired.board) s.wired.board->moved_chunk(r.victim, s.cfg.stream, r.chunk->bytes);  // never direct
        insert_sorted(s, std::move(*r.chunk));
        try_start(self);
        maybe_steal(self);
      },
      [=](const tunables_switch& sw) { self->state.active = self->state.cfg.stream < sw.streams; },
      [=](stats_atom) {
        auto& s = self->state;
        stream_stats out = s.stats;
        if (!s.in_flight.empty())
          out.busy_us += static_cast<uint64_t>(
              std::chrono::duration_cast<std::chrono::microseconds>(self->clock().now() - s.busy_since).count());
        return out;
      },
  };
}

}  // namespace chorus
