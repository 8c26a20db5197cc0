// Frame routing, early-frame replay and failure fan-out for chunk ops.
#include "runtime/collectives/engine.hpp"

#include <cstring>
#include <optional>
#include <string>

#include "runtime/core/log.hpp"
#include "runtime/core/log_limit.hpp"

namespace chorus {

namespace {
// The frame's step without the layout tag, or nothing when the tag is not the op's.
std::optional<wire::frame_header> local_view(const chunk_op& op, const wire::frame_header& h) {
  if ((h.step >> 16) != op.layout_tag()) return std::nullopt;
  auto local = h;
  local.step &= 0xffff;
  return local;
}

// A refused frame ends an engine's job, so one engine logs it once; a process with many engines
// failing together (or a test feeding hostile frames to engine after engine) still writes at most
// a few such lines a second. Every op still ends with the full error.
void log_failure(const status& st) {
  static log::line_limit limit{5};
  std::size_t held = 0;
  if (!limit.admit(held)) return;
  CHORUS_LOG(error, "engine", st.message() << (held ? " (" + std::to_string(held) +
                                                          " more such errors were not logged)"
                                                    : std::string()));
}

status layout_mismatch(const chunk_op& op, int peer, const wire::frame_header& h) {
  return status{errc::protocol, "rank " + std::to_string(peer) + " ran a different collective for chunk " +
                                    std::to_string(op.sequence()) + " (layout tag " + std::to_string(h.step >> 16) +
                                    ", here " + std::to_string(op.layout_tag()) +
                                    "); do all ranks run the same collectives with the same sizes, dtypes and roots?"};
}
status not_a_member(const chunk_op& op, int peer) {
  return status{errc::protocol, "rank " + std::to_string(peer) + " sent a frame for chunk " +
                                    std::to_string(op.sequence()) + ", which runs in a process set without it" +
                                    "; do all ranks agree on the job's process sets?"};
}

// Whether `op` still needs job rank `peer` (never a rank outside its process set).
bool needs(const chunk_op& op, int peer) {
  const int member = op.peer_of(peer);
  return member >= 0 && op.needs(member);
}
}  // namespace

void engine::run(std::unique_ptr<chunk_op> op, done_fn done) {
  if (!broken_.ok()) {
    done(broken_);
    return;
  }
  uint64_t seq = op->sequence();
  if (active_.count(seq)) {
    done(status{errc::internal, "chunk sequence " + std::to_string(seq) + " is already in flight"});
    return;
  }
  auto it = active_.emplace(seq, active{std::move(op), std::move(done), {}}).first;
  starting_ = seq;  // completions wait until start() and the replay below are over
  it->second.op->start(t_);
  if (auto e = early_.find(seq); e != early_.end()) {
    auto frames = std::move(e->second);
    early_.erase(e);
    for (auto& f : frames) early_bytes_ -= f.header.length;
    for (auto& f : frames) {
      auto a = active_.find(seq);
      if (a == active_.end() || !a->second.failure.ok()) break;
      auto local = local_view(*a->second.op, f.header);
      const int peer = a->second.op->peer_of(f.peer);
      status st;
      if (!local) {
        st = layout_mismatch(*a->second.op, f.peer, f.header);
      } else if (peer < 0) {
        st = not_a_member(*a->second.op, f.peer);
      } else {
        std::byte* dest = a->second.op->destination(peer, *local);
        const std::byte* data = f.data();
        if (dest) {
          // An empty payload's data() may be null, which memcpy must not be given even for 0 bytes.
          if (f.header.length > 0) std::memcpy(dest, f.data(), f.header.length);
          data = dest;
        }
        st = a->second.op->delivered(t_, peer, *local, data);
      }
      if (!st.ok()) {
        log_failure(st);
        starting_.reset();
        t_.abort(st);
        fail_all(st);
        return;
      }
    }
  }
  starting_.reset();
  // A peer that already left cleanly may have sent everything this op needs (it arrived as
  // early frames and was replayed above); only an op that still needs it fails.
  if (auto a = active_.find(seq); a != active_.end()) {
    for (auto& [peer, why] : departed_) {
      if (needs(*a->second.op, peer)) {
        fail(seq, a->second, why);
        break;
      }
    }
  }
  maybe_complete(seq);
}


std::byte* engine::destination(int peer, const wire::frame_header& h) {
  auto it = active_.find(h.sequence);
  if (it == active_.end() || !it->second.failure.ok()) return nullptr;
  auto local = local_view(*it->second.op, h);
  const int member = it->second.op->peer_of(peer);
  return local && member >= 0 ? it->second.op->destination(member, *local) : nullptr;
}

void engine::delivered(int peer, const wire::frame_header& h, std::byte* data) {
  auto it = active_.find(h.sequence);
  if (it == active_.end()) {
    if (!broken_.ok()) return;
    if (finished_.count(h.sequence)) {
      refuse(peer, h, "its chunk already finished here");
      return;
    }
    if (h.length > max_early_bytes - early_bytes_) {
      refuse(peer, h, "more than " + std::to_string(max_early_bytes) +
                          " bytes of frames for chunks that have not started here");
      return;
    }
    early_bytes_ += h.length;
    early_frame f{peer, h, {}, {}};
    if (h.length > 0)
      if (auto lease = early_pool_.acquire(h.length); lease.ok()) f.pooled = std::move(lease.value());
    if (f.pooled)
      std::memcpy(f.pooled.data(), data, h.length);
    else
      f.spill.assign(data, data + h.length);
    early_[h.sequence].push_back(std::move(f));
    return;
  }
  if (!it->second.failure.ok()) return;
  auto local = local_view(*it->second.op, h);
  const int member = it->second.op->peer_of(peer);
  auto st = !local        ? layout_mismatch(*it->second.op, peer, h)
            : member < 0 ? not_a_member(*it->second.op, peer)
                         : it->second.op->delivered(t_, member, *local, data);
  if (!st.ok()) {
    log_failure(st);
    t_.abort(st);  // the ranks disagree: nobody may wait for frames that will never come
    fail_all(st);
    return;
  }
  maybe_complete(h.sequence);
}

void engine::refuse(int peer, const wire::frame_header& h, const std::string& why) {
  status st{errc::protocol, "rank " + std::to_string(peer) + " sent a frame that does not fit (" + wire::describe(h) +
                                "): " + why + "; do all ranks run the same collectives?"};
  log_failure(st);
  t_.abort(st);
  fail_all(st);
}

void engine::sent(int, const wire::frame_header& h) {
  auto it = active_.find(h.sequence);
  if (it == active_.end()) return;
  it->second.op->on_sent();
  maybe_complete(h.sequence);
}

void engine::peer_failed(int peer, const status& why) {
  if (why.code() != errc::shutdown) {
    fail_all(why);
    return;
  }
  // A clean goodbye: the peer had everything it needed. Only ops that still need it fail.
  departed_.emplace_back(peer, why);
  if (on_failure_) on_failure_(peer, why);
  std::vector<uint64_t> seqs;
  for (auto& [seq, a] : active_)
    if (needs(*a.op, peer)) seqs.push_back(seq);
  for (auto seq : seqs) {
    auto it = active_.find(seq);
    if (it != active_.end()) fail(seq, it->second, why);
  }
  for (auto seq : seqs) maybe_complete(seq);
}

void engine::fail(uint64_t sequence, active& a, const status& why) {
  if (!a.failure.ok()) return;
  a.failure = why;
  a.op->abandon();
  t_.cancel(sequence);
}

void engine::fail_all(const status& why) {
  if (broken_.ok()) {
    broken_ = why;
    {
      std::lock_guard lk(broken_mu_);
      broken_copy_ = why;
    }
    if (on_failure_) on_failure_(-1, why);
  }
  early_.clear();
  early_bytes_ = 0;
  std::vector<uint64_t> seqs;
  for (auto& [seq, a] : active_) seqs.push_back(seq);
  for (auto seq : seqs) {
    auto it = active_.find(seq);
    if (it != active_.end()) fail(seq, it->second, why);
  }
  for (auto seq : seqs) maybe_complete(seq);
}

void engine::maybe_complete(uint64_t sequence) {
  if (starting_ == sequence) return;
  auto it = active_.find(sequence);
  if (it == active_.end() || !it->second.op->complete()) return;
  auto a = std::move(it->second);
  active_.erase(it);
  if (finished_.insert(sequence).second) {
    finished_order_.push_back(sequence);
    if (finished_order_.size() > finished_memory) {
      finished_.erase(finished_order_.front());
      finished_order_.pop_front();
    }
  }
  if (a.failure.ok()) a.op->finish();
  a.done(a.failure);
}

}  // namespace chorus
