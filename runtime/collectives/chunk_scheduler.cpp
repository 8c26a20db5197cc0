// chunk_scheduler: chunks start in sequence order on the stream expected to finish them first.
#include "runtime/collectives/chunk_scheduler.hpp"

#include <chrono>

namespace chorus {

chunk_scheduler::chunk_scheduler(engine& e, std::shared_ptr<stream_board> board, in_flight_window window,
                                 defer_fn defer)
    : e_(e),
      board_(std::move(board)),
      window_(window),
      defer_(std::move(defer)),
      held_on_(static_cast<std::size_t>(board_->streams()), 0) {}

void chunk_scheduler::submit(uint64_t sequence, std::size_t bytes, std::size_t charge, make_fn make,
                             engine::done_fn done) {
  waiting_.emplace(sequence, pending{bytes, charge ? charge : window_.slot_bytes, std::move(make), std::move(done)});
  pump();
}

void chunk_scheduler::pump() {
  if (pumping_) return;  // an op that ended at once, inside run(): the loop below goes on
  pumping_ = true;
  while (!waiting_.empty()) {
    auto it = waiting_.begin();
    const uint64_t seq = it->first;
    const std::size_t bytes = it->second.bytes, charge = it->second.charge;
    const int s = board_->choose(bytes);
    auto& held = held_on_[static_cast<std::size_t>(s)];
    const bool oldest = running_.empty() || seq < *running_.begin();
    if (!window_.admits(held, charge, oldest)) break;
    auto p = std::move(it->second);
    waiting_.erase(it);
    board_->commit(s, bytes);
    board_->started(s, std::chrono::steady_clock::now());
    held += charge;
    running_.insert(seq);
    e_.run(p.make(s), [this, s, seq, bytes, charge, done = std::move(p.done)](const status& st) {
      held_on_[static_cast<std::size_t>(s)] -= charge;
      running_.erase(seq);
      board_->finished(s, bytes, std::chrono::steady_clock::now());
      done(st);
      // Not pump() here: this may run inside a connection's write completion, which must not
      // be re-entered by new sends.
      if (pump_posted_ || waiting_.empty()) return;
      pump_posted_ = true;
      defer_([this] {
        pump_posted_ = false;
        pump();
      });
    });
  }
  pumping_ = false;
}

}  // namespace chorus
