// The pipeline's allreduces on one host, off the I/O thread: a thread owned by the communicator
// runs them through a mailbox set of their own (shm::mailbox_use::pipeline) with a
// mailbox_allreduce, one at a time, in the order the fusion actor handed them out. That order is
// the same on every rank (increasing sequence numbers), whatever order the sender actors then
// start them in, so every rank posts the same chunk to the same mailbox post numbers.
//
//   fusion:  expect(seq)            as it hands a direct chunk to a sender
//   sender:  start(seq, ..., done)  when it starts the chunk (comm_runner)
//   thread:  runs the oldest expected chunk once started; done(status) on that thread
//
// Deadlock freedom, with sender_actor.hpp's argument: take s, the smallest sequence unfinished
// on any rank. If s is a direct chunk, every direct chunk before it has ended on every rank (a
// rank's run ends only after every peer posted all of it), so s is the oldest expected chunk
// of every rank's queue; every rank's sender starts it (sender_actor.hpp (2)), so every
// thread runs it and it ends. If s runs on the I/O thread, this thread does not hold it up.
// Failures: the engine's on_failure reaches interrupt() / peer_left() as for the caller's
// path, so a dead peer ends the running chunk and every later one with its cause.
//
// Completions. Each done wakes the pipeline's actors, and on a host whose cores all run
// ranks that wake-up takes a core from some rank's running chunk (measured: 30-200 us per
// chunk, on the critical path of every rank). So while the next chunk is ready to run and
// small (completion_hold_bytes: a fraction of a millisecond here), the thread runs it first
// and tells the chunks that ended together: before a larger chunk, or once completion_delay
// has passed since the first of them ended, and at once when nothing is ready to run (so a
// sender or the start window waiting for a completion never waits for this thread) or a
// chunk failed. This cannot deadlock: a rank holds completions back only while it has the
// next chunk in hand order to run, and a rank that cannot run it yet (its sender has not
// started it) holds nothing back, so its senders and start window get every completion they
// may be waiting for, and it starts the chunk as the argument above says.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "runtime/collectives/mailbox_allreduce.hpp"

namespace chorus {

class mailbox_queue {
 public:
  /// How long completions are held for the chunks after them, at most (Completions, above:
  /// past it they are told before the next chunk runs, so one small chunk more at worst).
  static constexpr std::chrono::microseconds completion_delay{1000};
  /// Completions are told before a chunk larger than this runs, never held across it.
  static constexpr std::size_t completion_hold_bytes = 1u << 20;
  using callback = std::function<void(const status&)>;
  /// `on_protocol` (any status of errc::protocol a run returns, before its done): the peers
  /// should learn that the job broke (communicator::abort).
  mailbox_queue(std::unique_ptr<mailbox_allreduce> lane, callback on_protocol);
  /// stop() with errc::shutdown.
  ~mailbox_queue();

  /// Whether a chunk of `bytes` may run here (the same answer on every rank).
  bool takes(std::size_t bytes, dtype t, reduce_op op) const { return lane_->takes(bytes, t, op); }
  /// The largest chunk it takes (mailbox_allreduce::max_bytes).
  std::size_t max_bytes() const { return lane_->max_bytes(); }
  /// The fusion actor hands out chunk `sequence`: it runs after every chunk expected before it.
  void expect(uint64_t sequence);
  /// Its sender started it: run it (in place on `data`) when its turn comes; `done` gets the
  /// outcome on this queue's thread, exactly once. A sequence not expected ends at once with
  /// errc::internal.
  void start(uint64_t sequence, void* data, std::size_t count, dtype t, reduce_op op, callback done);
  /// start(), over the concatenation of `regions` (mailbox_allreduce::run's regions).
  /// `check`: the NaN/Inf check's report (mailbox_allreduce::run), alive until `done`; null: none.
  void start(uint64_t sequence, std::vector<std::span<std::byte>> regions, dtype t, reduce_op op, callback done,
             nonfinite_report* check = nullptr);
  /// A pipeline shut down: chunks it handed out and never started leave the order (the ones
  /// started keep running, as the I/O thread's chunks do, until the communicator closes).
  void forget_unstarted();

  /// The job broke: the running chunk and every later one end with `why`.
  void interrupt(const status& why) { lane_->interrupt(why); }
  /// `peer` said goodbye (mailbox_allreduce::peer_left).
  void peer_left(int peer, const status& why) { lane_->peer_left(peer, why); }
  /// Interrupts with `why`, ends every chunk waiting with it, and joins the thread. Idempotent.
  void stop(const status& why);

  /// Chunks run so far (tests, logs).
  uint64_t ran() const;
  /// Payload bytes its mailboxes carried to the peers so far (metrics); any thread.
  uint64_t sent_bytes() const { return lane_->sent_bytes(); }

 private:
  struct chunk {
    std::vector<std::span<std::byte>> regions;
    dtype type = dtype::f32;
    reduce_op op = reduce_op::sum;
    callback done;
    nonfinite_report* check = nullptr;
  };
  void loop();

  std::unique_ptr<mailbox_allreduce> lane_;
  callback on_protocol_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<uint64_t> order_;          // expected, oldest first
  std::map<uint64_t, chunk> started_;   // started, waiting for their turn
  bool stopping_ = false;
  status why_stopped_;
  uint64_t ran_ = 0;
  std::thread thread_;  // last: starts after the members it uses
};

}  // namespace chorus
