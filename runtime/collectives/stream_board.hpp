// The stream board: what the fusion actor needs to place a chunk by speed, kept by the senders.
// Per stream: bytes handed to it and not finished, chunks in flight, and a rate estimate: over
// TCP, the kernel's bytes acknowledged per second busy sending (transport::meter), which a
// collective waiting on another connection does not spoil; elsewhere (shared memory only, tests)
// the bytes the stream moved per second while it had a chunk in flight.
// Shared by one rank's fusion and sender actors like chunk_runner::queued_anywhere: a hint,
// never state that decides correctness. Frames are routed by (sequence, step), so any stream a
// rank picks for a chunk is right; a stale estimate only costs speed. Thread-safe (one mutex).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/collectives/stream_placement.hpp"

namespace chorus {

class stream_board {
 public:
  using clock = std::chrono::steady_clock;
  struct options {
    double weight = 0.5;             ///< of each new rate sample in the moving average
    uint32_t probe_after = 64;       ///< see age_idle_streams
    uint32_t max_backoff = 5;        ///< a stream that stays slow waits up to probe_after << this
    clock::duration min_span = std::chrono::milliseconds(2);  ///< shortest span a sample covers
    /// Fewest bytes a sample covers: small chunks wait on latency and on the peers, and would
    /// make a stream look slow; their spans add up until a busy stretch moved this much.
    uint64_t min_sample_bytes = 256 * 1024;
    uint64_t min_busy_us = 4000;     ///< shortest kernel busy time a sample covers (HZ ticks)
    double seed_rate = 1e9;          ///< bytes/s every stream starts with (all equal)
  };
  /// Monotonic counters of one stream, read when a chunk ends.
  struct reading {
    uint64_t moved = 0;    ///< bytes its connections carried (transport::traffic().sent)
    uint64_t acked = 0;    ///< TCP bytes acknowledged (transport::meter); 0: no TCP meter
    uint64_t busy_us = 0;  ///< TCP time busy sending (transport::meter)
  };
  /// `read(stream)`; empty: the bytes of finished chunks stand in for `moved` (tests).
  stream_board(int streams, options opts, std::function<reading(int)> read = {});

  int streams() const { return static_cast<int>(views_.size()); }
  /// The autotuner: place() and choose() pick among streams [0, n) only (1 <= n <= streams();
  /// anything else means all). Chunks already counted elsewhere finish as before.
  void set_active(int n);
  /// Fusion: the stream for a chunk of `bytes` (earliest expected finish), counted there:
  /// choose() then commit().
  int place(std::size_t bytes);
  /// The stream place() would pick, not counted yet (a scheduler that waits for its free slot).
  int choose(std::size_t bytes);
  /// Counts a chunk of `bytes` on `stream` (the one choose() gave).
  void commit(int stream, std::size_t bytes);
  /// A sender took a chunk of `bytes` from another's deque.
  void moved_chunk(int from, int to, std::size_t bytes);
  /// A sender started a chunk on `stream`.
  void started(int stream, clock::time_point now);
  /// A chunk of `bytes` ended on `stream` (ok or not): uncounts it and refreshes the rate.
  void finished(int stream, std::size_t bytes, clock::time_point now);
  /// A copy of every stream's view (tests, logs).
  std::vector<stream_view> snapshot() const;
  /// "stream 0: 118.2 MB/s 0 B held, stream 1: ..." (logs).
  std::string describe() const;

 private:
  struct busy {
    int in_flight = 0;
    clock::time_point mark{};   ///< start of the span the next sample covers
    uint64_t moved_at_mark = 0;
    uint64_t done_bytes = 0;    ///< finished chunk bytes (the stand-in for read_)
    uint64_t acked_at_mark = 0; ///< kernel counters at the last kernel sample
    uint64_t busy_at_mark = 0;
  };
  reading read_now(int stream) const;
  void take_sample(std::size_t i, double sample);
  bool valid(int stream) const { return stream >= 0 && stream < streams(); }

  options opts_;
  std::function<reading(int)> read_;
  mutable std::mutex mu_;
  std::vector<stream_view> views_;
  std::vector<busy> busy_;
  int active_ = 0;             ///< set_active(): streams place() picks among; 0 = all
};

}  // namespace chorus
