// chunk_scheduler: chunks start in sequence order on the stream expected to finish them first.
#include "runtime/collectives/chunk_scheduler.hpp"

#include <chrono>

namespace chorus {

chunk_scheduler::chunk_scheduler(engine& e, std::shared_ptr<stream_board> board, std::size_t per_stream,
                                 defer_fn defer)
    : e_(e),
      board_(std::move(board)),
      per_stream_(per_stream < 1 ? 1 : per_stream),
      defer_(std::move(defer)),
      running_on_(static_cast<std::size_t>(board_->streams()), 0) {}

void chunk_scheduler::submit(uint64_t sequence, std::size_t bytes, make_fn make, engine::done_fn done) {
  waiting_.emplace(sequence, pending{bytes, std::move(make), std::move(done)});
  pump();
}

void chunk_scheduler::pump() {
  if (pumping_) return;  // an op that ended at once, inside run(): the loop below goes on
  pumping_ = true;
  while (!waiting_.empty()) {
    auto it = waiting_.begin();
    const uint64_t seq = it->first;
    const std::size_t bytes = it->second.bytes;
    const int s = board_->choose(bytes);
    auto& on = running_on_[static_cast<std::size_t>(s)];
    const bool oldest = running_.empty() || seq < *running_.begin();
    if (on >= per_stream_ && !oldest) break;
    auto p = std::move(it->second);
    waiting_.erase(it);
    board_->commit(s, bytes);
    board_->started(s, std::chrono::steady_clock::now());
    ++on;
    running_.insert(seq);
    e_.run(p.make(s), [this, s, seq, bytes, done = std::move(p.done)](const status& st) {
      --running_on_[static_cast<std::size_t>(s)];
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
