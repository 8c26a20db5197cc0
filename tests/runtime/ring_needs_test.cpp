// ring_op::needs (engine.hpp: a peer that shut down cleanly fails only the ops that still need
// it): the right neighbour is needed only while frames to it remain to be posted, the left one
// while frames from it are due. Before this, a rank whose right neighbour finished the job and
// left failed its own last allreduce with "rank k shut down".
#include <gtest/gtest.h>

#include <vector>

#include "runtime/collectives/ring_op.hpp"

namespace chorus {
namespace {

// Records what the op posts; nothing is delivered anywhere.
class recording_transport final : public transport {
 public:
  int rank() const override { return 0; }
  int size() const override { return 3; }
  int num_streams() const override { return 1; }
  uint64_t job_id() const override { return 1; }
  void start(frame_sink*) override {}
  void post(std::function<void()> fn) override { fn(); }
  void send(int peer, int, const wire::frame_header& h, const std::byte*) override { sent.push_back({peer, h}); }
  void cancel(uint64_t) override {}
  void close(std::chrono::milliseconds) override {}
  std::vector<std::pair<int, wire::frame_header>> sent;
};

TEST(ring_needs, the_right_neighbour_only_until_the_last_frame_to_it_is_posted) {
  // Rank 0 of 3: left 2, right 1; four steps of one 4-byte block each (3 floats, 1 per block).
  std::vector<float> data{1, 2, 3};
  auto op = make_ring_allreduce(5, 0, 0, 3, data.data(), 3, dtype::f32, reduce_op::sum, 4);
  recording_transport t;
  EXPECT_TRUE(op->needs(1));
  EXPECT_TRUE(op->needs(2));
  op->start(t);
  auto steps = ring_allreduce_steps(0, 3);
  for (std::size_t g = 0; g < steps.size(); ++g) {
    wire::frame_header h;
    h.sequence = 5;
    h.step = static_cast<uint32_t>(g);
    h.offset = static_cast<uint64_t>(steps[g].recv_block) * 4;
    h.length = 4;
    float v = 10;
    ASSERT_TRUE(op->delivered(t, 2, h, reinterpret_cast<const std::byte*>(&v)).ok()) << "step " << g;
    const bool last = g + 1 == steps.size();
    // After step g's frame arrives, the frame of step g+1 to the right has been posted; the one
    // of the last step is never forwarded. Every frame to the right is out after step 2.
    EXPECT_EQ(op->needs(1), g + 2 < steps.size()) << "after step " << g;
    EXPECT_EQ(op->needs(2), !last) << "after step " << g;
  }
  EXPECT_EQ(t.sent.size(), steps.size());
  EXPECT_FALSE(op->needs(0));
}

}  // namespace
}  // namespace chorus
