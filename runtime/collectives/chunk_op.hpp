// A collective on one chunk, run as a state machine on the transport's I/O thread: start()
// posts the first frames, each delivered frame may post more, and the op is complete when it
// has received every byte it expects and the transport released every payload it sent.
// No op ever blocks a thread, so a sender actor can drive one chunk at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "runtime/core/status.hpp"
#include "runtime/transport/transport.hpp"

namespace chorus {

/// Whether [offset, offset + length) lies inside [lo, hi), computed without overflow: offset and
/// length come from a peer's frame header, and a sum near 2^64 would wrap and pass a naive check.
inline bool range_inside(uint64_t offset, uint64_t length, uint64_t lo, uint64_t hi) {
  return lo <= hi && offset >= lo && offset <= hi && length <= hi - offset;
}

class chunk_op {
 public:
  chunk_op(uint64_t sequence, int stream) : sequence_(sequence), stream_(stream) {}
  virtual ~chunk_op() = default;
  chunk_op(const chunk_op&) = delete;
  chunk_op& operator=(const chunk_op&) = delete;

  uint64_t sequence() const { return sequence_; }
  int stream() const { return stream_; }
  /// 16 bits summarising the chunk's layout (collective, dtype, op, sizes, root). Frames carry
  /// it in the top half of `step`; the engine refuses frames whose tag differs, so ranks that
  /// run different collectives for one sequence fail at once instead of waiting.
  uint16_t layout_tag() const { return layout_tag_; }

  /// Mixes `spec` (the caller's digest of its call: shapes, dtype, op) into the layout tag, so
  /// that ranks whose calls differ only there fail at the first frame too. 0: nothing to mix.
  /// Before start().
  void add_spec(uint64_t spec) {
    if (spec) set_layout({layout_tag_, spec});
  }

  /// Posts the first frames. Called once.
  virtual void start(transport& t) = 0;
  /// Where the payload of `h` from `peer` goes, or nullptr for scratch (see frame_sink).
  virtual std::byte* destination(int peer, const wire::frame_header& h) = 0;
  /// Consumes a payload; an error means the frame does not fit this op (ranks disagree).
  virtual status delivered(transport& t, int peer, const wire::frame_header& h, const std::byte* data) = 0;
  /// Runs once after the last frame when the op succeeded (e.g. the division of average).
  virtual void finish() {}
  /// Whether the op still needs `peer` (to receive from it, or to send it frames it has not
  /// been given yet). A peer that shut down cleanly fails only the ops that still need it.
  virtual bool needs(int peer) const = 0;

  /// Runs the op among a process set's members only: the op's own ranks (its rank, size, the
  /// peers it posts to and hears from) are member-local, and members[i] is the job rank of
  /// member i. The engine hands the op member-local peers (peer_of) and post() sends to job
  /// ranks. Unset: the op's ranks are the job's.
  void set_members(std::shared_ptr<const std::vector<int>> members) { members_ = std::move(members); }
  /// The op's (member-local) rank of job rank `job_rank`; -1 when it is not a member.
  int peer_of(int job_rank) const {
    if (!members_) return job_rank;
    for (std::size_t i = 0; i < members_->size(); ++i)
      if ((*members_)[i] == job_rank) return static_cast<int>(i);
    return -1;
  }
  /// The job rank of the op's rank `peer`.
  int job_rank_of(int peer) const {
    return members_ && peer >= 0 && static_cast<std::size_t>(peer) < members_->size() ? (*members_)[peer] : peer;
  }

  void on_sent() { --outstanding_sends_; }
  /// The op failed: expect no more frames.
  void abandon() { recv_left_ = 0; }
  bool complete() const { return started_ && recv_left_ == 0 && outstanding_sends_ == 0; }
  uint64_t bytes_sent() const { return bytes_sent_; }

 protected:
  void post(transport& t, int peer, uint32_t step, uint64_t offset, const std::byte* payload, std::size_t len) {
    wire::frame_header h;
    h.kind = wire::frame_kind::data;
    h.job_id = t.job_id();
    h.sequence = sequence_;
    h.step = (static_cast<uint32_t>(layout_tag_) << 16) | step;
    h.offset = offset;
    h.length = static_cast<uint32_t>(len);
    ++outstanding_sends_;
    bytes_sent_ += len;
    t.send(job_rank_of(peer), stream_, h, payload);
  }
  status bad_frame(int peer, const wire::frame_header& h, const std::string& why) const {
    return status{errc::protocol, "rank " + std::to_string(job_rank_of(peer)) + " sent a frame that does not fit chunk " +
                                      std::to_string(sequence_) + " (" + wire::describe(h) + "): " + why +
                                      "; do all ranks run the same collectives with the same sizes?"};
  }

  /// Subclasses describe their layout once, in their constructor.
  void set_layout(std::initializer_list<uint64_t> parts) {
    uint64_t h = 1469598103934665603ull;  // FNV-1a over the parts' bytes
    for (uint64_t p : parts)
      for (int i = 0; i < 8; ++i) h = (h ^ ((p >> (8 * i)) & 0xff)) * 1099511628211ull;
    layout_tag_ = static_cast<uint16_t>(h ^ (h >> 16) ^ (h >> 32) ^ (h >> 48));
  }

  bool started_ = false;
  uint64_t recv_left_ = 0;  ///< payload bytes still expected

 private:
  uint64_t sequence_;
  int stream_;
  uint16_t layout_tag_ = 0;
  std::shared_ptr<const std::vector<int>> members_;
  int outstanding_sends_ = 0;
  uint64_t bytes_sent_ = 0;
};

}  // namespace chorus
