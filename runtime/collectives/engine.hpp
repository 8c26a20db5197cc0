// Routes frames to the chunk ops in flight, by sequence number, on the I/O thread.
// Frames for a sequence whose op has not started here yet (a peer is ahead) are kept and
// replayed when it starts. When a peer fails, every op in flight ends with that error once the
// transport has released its buffers, and every later op fails at once with the same error.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <deque>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "runtime/collectives/chunk_op.hpp"
#include "runtime/fusion/buffer_pool.hpp"
#include "runtime/transport/frame_sink.hpp"
#include "runtime/transport/transport.hpp"

namespace chorus {

class engine final : public frame_sink {
 public:
  using done_fn = std::function<void(const status&)>;
  explicit engine(transport& t) : t_(t) {}

  /// I/O thread only: starts `op`; `done` runs exactly once, on the I/O thread.
  void run(std::unique_ptr<chunk_op> op, done_fn done);
  /// I/O thread only: fails everything in flight and everything after (e.g. at shutdown).
  void fail_all(const status& why);
  /// `fn` runs on the I/O thread when the engine breaks (peer -1, its first cause) and when a
  /// peer leaves cleanly (that peer): for waits outside the engine (mailbox_allreduce.hpp).
  /// Set before start.
  void on_failure(std::function<void(int peer, const status&)> fn) { on_failure_ = std::move(fn); }
  /// Why the engine refuses new ops (ok while healthy).
  const status& broken() const { return broken_; }
  /// The same, from any thread (a copy taken under a lock).
  status broken_any_thread() const {
    std::lock_guard lk(broken_mu_);
    return broken_copy_;
  }
  std::size_t in_flight() const { return active_.size(); }
  /// Payload bytes of frames kept for ops that have not started here; a peer that sends more
  /// than this ahead is a protocol error (a correct peer stays within the start window).
  static constexpr std::size_t max_early_bytes = std::size_t{1} << 30;
  /// Early frames are copied into buffers of a pool of at most this many bytes (beyond it, into
  /// plain memory): a peer that runs ahead does so step after step, and reused, pre-touched
  /// buffers spare a page fault per page of every copy.
  static constexpr std::size_t early_pool_bytes = std::size_t{64} << 20;
  /// That pool's counters.
  buffer_pool_stats early_buffers() const { return early_pool_.stats(); }
  /// Finished sequences remembered, so a late frame for one is refused instead of kept.
  static constexpr std::size_t finished_memory = 4096;

  std::byte* destination(int peer, const wire::frame_header& h) override;
  void delivered(int peer, const wire::frame_header& h, std::byte* data) override;
  void sent(int peer, const wire::frame_header& h) override;
  void peer_failed(int peer, const status& why) override;

 private:
  struct active {
    std::unique_ptr<chunk_op> op;
    done_fn done;
    status failure;
  };
  struct early_frame {
    int peer;
    wire::frame_header header;
    buffer_lease pooled;          // the payload (header.length bytes), in a pooled buffer ...
    std::vector<std::byte> spill; // ... or here when the pool is full
    const std::byte* data() const { return pooled ? pooled.data() : spill.data(); }
  };
  void fail(uint64_t sequence, active& a, const status& why);
  void maybe_complete(uint64_t sequence);

  transport& t_;
  std::unordered_map<uint64_t, active> active_;
  /// Refuses `h` from `peer` (it does not fit anything here): aborts the job with `why`.
  void refuse(int peer, const wire::frame_header& h, const std::string& why);

  std::unordered_map<uint64_t, std::vector<early_frame>> early_;
  std::size_t early_bytes_ = 0;
  buffer_pool early_pool_{buffer_pool_options{.max_bytes = early_pool_bytes, .fusion_threshold = 0}};
  std::unordered_set<uint64_t> finished_;    // the last finished_memory finished sequences
  std::deque<uint64_t> finished_order_;
  status broken_;
  mutable std::mutex broken_mu_;
  status broken_copy_;  // broken_, for other threads
  std::vector<std::pair<int, status>> departed_;  // peers that shut down cleanly
  std::optional<uint64_t> starting_;
  std::function<void(int, const status&)> on_failure_;
};

}  // namespace chorus
