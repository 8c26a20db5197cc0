// The chunk scheduler's in-flight window (runtime/collectives/chunk_scheduler.hpp) counts bytes:
// each chunk holds the share of a slot it is charged, so a stream runs CHORUS_CHUNKS_IN_FLIGHT
// whole chunks, short tails included, or L times as many hierarchical chunks charged 1/L of a
// slot each. Ops here never end (their peer never sends), so what runs is exactly what the
// window admitted.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "runtime/collectives/chunk_scheduler.hpp"
#include "runtime/collectives/engine.hpp"
#include "runtime/collectives/ring_op.hpp"
#include "runtime/collectives/stream_board.hpp"

namespace chorus {
namespace {

constexpr std::size_t MiB = std::size_t{1} << 20;

// Rank 0 of 2 on one stream; sends go nowhere and nothing is ever delivered.
class silent_transport final : public transport {
 public:
  int rank() const override { return 0; }
  int size() const override { return 2; }
  int num_streams() const override { return 1; }
  uint64_t job_id() const override { return 7; }
  void start(frame_sink*) override {}
  void post(std::function<void()> fn) override { fn(); }
  void send(int, int, const wire::frame_header&, const std::byte*) override {}
  void cancel(uint64_t) override {}
  void close(std::chrono::milliseconds) override {}
};

struct scheduler_fixture {
  explicit scheduler_fixture(in_flight_window w)
      : board(std::make_shared<stream_board>(1, stream_board::options{})),
        sched(e, board, w, [this](std::function<void()> fn) { deferred.push_back(std::move(fn)); }) {}
  ~scheduler_fixture() { e.fail_all(status{errc::shutdown, "test over"}); }
  // Submits `n` chunks of `bytes`, charged `charge`, each a ring allreduce that waits for rank 1.
  void submit(int n, std::size_t bytes, std::size_t charge) {
    for (int i = 0; i < n; ++i) {
      const uint64_t seq = next++;
      sched.submit(seq, bytes, charge,
                   [this, seq](int stream) {
                     return make_ring_allreduce(seq, stream, 0, 2, data.data(), data.size(), dtype::f32,
                                                reduce_op::sum, 512u << 10);
                   },
                   [](const status&) {});
    }
  }
  silent_transport t;
  engine e{t};
  std::shared_ptr<stream_board> board;
  std::vector<std::function<void()>> deferred;
  chunk_scheduler sched;
  std::vector<float> data = std::vector<float>(1024, 1.0f);
  uint64_t next = 1;
};

TEST(in_flight_window, admits_by_bytes) {
  const in_flight_window w{2, 4 * MiB};
  EXPECT_EQ(w.bytes(), 8 * MiB);
  EXPECT_TRUE(w.admits(4 * MiB, 4 * MiB, false));
  EXPECT_FALSE(w.admits(8 * MiB, 4 * MiB, false));
  EXPECT_TRUE(w.admits(7 * MiB, 1 * MiB, false));
  EXPECT_FALSE(w.admits(7 * MiB + 1, 1 * MiB, false));
  EXPECT_TRUE(w.admits(0, 64 * MiB, false));        // an idle stream takes a chunk larger than its window
  EXPECT_TRUE(w.admits(8 * MiB, 4 * MiB, true));    // the oldest chunk always starts
}

TEST(chunk_scheduler, runs_chunks_in_flight_whole_chunks_per_stream) {
  scheduler_fixture f({2, 4 * MiB});
  f.submit(6, 4 * MiB, 0);
  EXPECT_EQ(f.sched.running(), 2u);
  EXPECT_EQ(f.sched.waiting(), 4u);
}

TEST(chunk_scheduler, a_short_chunk_still_holds_a_whole_slot) {
  // Flat collectives keep exactly CHORUS_CHUNKS_IN_FLIGHT chunks per stream, however small.
  scheduler_fixture f({2, 4 * MiB});
  f.submit(6, 4096, 0);
  EXPECT_EQ(f.sched.running(), 2u);
}

TEST(chunk_scheduler, chunks_charged_part_of_a_slot_run_more_per_stream) {
  // Hierarchical chunks on 4 ranks per host (hier_chunks): 256 KiB, charged 1 MiB of a 4 MiB
  // slot each, so 8 run in a 2-slot window.
  scheduler_fixture f({2, 4 * MiB});
  f.submit(12, 256u << 10, 1 * MiB);
  EXPECT_EQ(f.sched.running(), 8u);
  EXPECT_EQ(f.sched.waiting(), 4u);
}

TEST(chunk_scheduler, a_whole_chunk_waits_for_room_behind_small_ones) {
  scheduler_fixture f({2, 4 * MiB});
  f.submit(5, 1 * MiB, 1 * MiB);  // 5 MiB held
  f.submit(1, 4 * MiB, 0);        // 9 MiB would not fit, and it is not the oldest
  EXPECT_EQ(f.sched.running(), 5u);
  EXPECT_EQ(f.sched.waiting(), 1u);
}

}  // namespace
}  // namespace chorus
