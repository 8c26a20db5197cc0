// Small allreduces that the calling thread runs itself when every rank shares one host: it
// posts its buffer to each peer's mailbox (transport/shm/mailbox.hpp), reads theirs and reduces
// them in rank order, with no I/O thread in between; a buffer larger than a mailbox slot goes in
// slot-sized pieces, one post each. The blocking communicator::allreduce takes this path as
// takes() says (CHORUS_CALLER_ALLREDUCE_BYTES); why, and what it measured, in docs/design.md
// ("Allreduces on one host: the caller's own path").
// Waiting: the caller polls for CHORUS_SHM_SPIN_US, then sleeps on the mailbox's futex. The I/O
// thread keeps watching every peer's TCP connection and calls interrupt() when the job breaks
// (a peer died, an abort) or peer_left() when a peer said goodbye; either wakes the caller, so a
// dead peer is named as fast as on the I/O thread's path.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "runtime/collectives/nonfinite_report.hpp"
#include "runtime/core/dtype.hpp"
#include "runtime/core/status.hpp"
#include "runtime/transport/shm/mailbox.hpp"

namespace chorus {

class mailbox_allreduce {
 public:
  /// `out[p]` / `in[p]`: the mailboxes to / from rank p, present for every p but `rank`.
  mailbox_allreduce(int rank, int size, std::vector<std::unique_ptr<shm::mailbox_writer>> out,
                   std::vector<std::unique_ptr<shm::mailbox_reader>> in, std::size_t limit,
                   std::chrono::microseconds spin);

  /// Whether an allreduce of `bytes` goes through the mailboxes: the same answer on every rank
  /// for the same call. Every rank posts its whole buffer to every peer and folds all of them,
  /// (N - 1) buffers' copying and reduction per rank where a ring has about 2 (N - 1) / N: the
  /// same at two ranks, so two ranks take every size; more take bytes x (N - 2) <= `limit`.
  bool takes(std::size_t bytes, dtype t, reduce_op op) const { return takes(max_bytes(), bytes, t, op); }
  /// The same answer for a lane whose max_bytes() is `most` (planning without a lane: replay).
  static bool takes(std::size_t most, std::size_t bytes, dtype t, reduce_op op);
  /// The largest buffer takes() accepts (SIZE_MAX: every size).
  std::size_t max_bytes() const;
  /// In place; one call at a time (later callers wait for the lock; calls from several threads
  /// must be ordered alike on every rank, as for the communicator). `call` numbers the call
  /// alike on every rank (the communicator's sequence, the pipeline chunk's). Errors:
  /// interrupt()'s status, or errc::protocol when a peer's post is not the allreduce we make
  /// (naming it): another size, dtype, op or call number.
  /// `check` (the NaN/Inf check; null: none): every rank folds every rank's input, so each
  /// marks there the ranks whose input held NaN/+-Inf, alike on every rank with no message.
  /// A float sum or average checks the final sum inside the last addition (add_check_sum:
  /// non-finite wherever an input was) and scans the inputs only when it finds one; other
  /// ops and half types scan each input once more.
  status run(void* data, std::size_t count, dtype t, reduce_op op, uint64_t call = 0,
             nonfinite_report* check = nullptr);
  /// run() over the concatenation of `regions`, each a whole number of elements, in place: the
  /// posts gather from them and the folds write back into them, so tensors that would be
  /// fused need no fusion buffer (the pipeline's fused chunks on the direct path). Every rank
  /// must give regions of the same total size; how each rank splits it does not matter.
  status run(std::span<const std::span<std::byte>> regions, dtype t, reduce_op op, uint64_t call = 0,
             nonfinite_report* check = nullptr);
  /// Any thread: the job broke; the run() waiting now and every later one ends with `why`
  /// (the first cause stands).
  void interrupt(const status& why);
  /// Any thread: `peer` said goodbye. A wait for its post ends with `why` unless the post is
  /// there (it finished that allreduce before leaving); waits for other peers go on, since a
  /// peer may leave as soon as it has every post while a slower one is still posting to us.
  void peer_left(int peer, const status& why);
  /// Posts made so far (for tests and logs).
  uint64_t posts() const { return posts_.load(std::memory_order_relaxed); }
  /// Payload bytes posted so far, to all peers together (for metrics); any thread.
  uint64_t sent_bytes() const { return sent_bytes_.load(std::memory_order_relaxed); }

 private:
  /// Post k from `peer`; waits (spin, then sleep) until it arrives or interrupt() is called.
  status wait_for(int peer, uint64_t k, shm::mail& m);
  /// Post k (one piece of run()'s buffer, made of `parts`, tagged `tag`, the whole call's) to
  /// every peer.
  status post_piece(uint64_t k, std::span<const std::span<std::byte>> parts, uint64_t tag, uint64_t call);
  /// Folds every peer's post k into `parts` (`bytes` together), in rank order; an average is
  /// divided there too, while the piece is in cache.
  /// `bad` (the check; null: none): bit r set where rank r's input in this piece held NaN/Inf.
  status fold_piece(uint64_t k, std::span<const std::span<std::byte>> parts, std::size_t bytes, dtype t,
                    reduce_op op, uint64_t tag, uint64_t call, std::vector<uint64_t>* bad);
  /// Waits until `peer`'s mailbox slot for post k is free (it always is when the peers keep
  /// to the call order: a peer posts k - 1 only after releasing k - 2).
  status wait_for_room(int peer, uint64_t k);
  /// Why waits for `peer` stop: the job's break, else the peer's goodbye.
  status stop_reason(int peer) const;

  int rank_;
  int size_;
  std::vector<std::unique_ptr<shm::mailbox_writer>> out_;
  std::vector<std::unique_ptr<shm::mailbox_reader>> in_;
  std::size_t limit_;
  std::chrono::microseconds spin_;
  std::mutex run_mu_;             // one run() at a time
  uint64_t k_ = 0;                // the last post number (under run_mu_)
  std::vector<std::byte> mine_;   // our contribution while the fold overwrites data (size > 2)
  std::vector<std::span<const std::byte>> gather_;  // post_piece's parts, read-only (under run_mu_)
  std::atomic<uint64_t> posts_{0};
  std::atomic<uint64_t> sent_bytes_{0};
  std::atomic<bool> broken_{false};                  // interrupt() was called
  std::unique_ptr<std::atomic<bool>[]> stop_;        // [peer]: stop waiting for it (broken or left)
  mutable std::mutex why_mu_;
  status why_;                                       // interrupt()'s cause
  std::vector<status> left_;                         // [peer]: its goodbye
};

}  // namespace chorus
