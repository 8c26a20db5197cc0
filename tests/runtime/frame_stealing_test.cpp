// Frame stealing in the mesh transport (mesh_transport.hpp): frames sent to one busy TCP
// connection move to idle connections to the same peer, each arrives exactly once with its
// payload, only among the streams in use, and nothing moves when it is off.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <vector>

#include "tests/support/mesh_ranks.hpp"

namespace chorus {
namespace {

using namespace std::chrono_literals;

constexpr uint64_t job = 0x5eed;
constexpr int frames = 96;
constexpr std::size_t frame_bytes = 256 * 1024;

// Counts what arrives and what the transport releases; checks each payload against its offset.
class counting_sink final : public frame_sink {
 public:
  std::byte* destination(int, const wire::frame_header&) override { return nullptr; }
  void delivered(int peer, const wire::frame_header& h, std::byte* data) override {
    std::lock_guard lk(mu_);
    const auto index = static_cast<std::size_t>(h.offset / frame_bytes);
    bool right = peer == 0 && h.length == frame_bytes && index < seen_.size();
    for (std::size_t i = 0; right && i < h.length; i += 4096)
      right = data[i] == static_cast<std::byte>((index * 7 + i / 4096) & 0xff);
    if (!right) ++wrong_;
    else ++seen_[index];
    ++received_;
    cv_.notify_all();
  }
  void sent(int, const wire::frame_header&) override {
    std::lock_guard lk(mu_);
    ++released_;
    cv_.notify_all();
  }
  void peer_failed(int peer, const status& why) override {
    std::lock_guard lk(mu_);
    failure_ = "rank " + std::to_string(peer) + ": " + why.to_string();
    cv_.notify_all();
  }
  /// Waits until `n` frames arrived (receiver) or were released (sender), at most 20 s.
  bool wait_received(int n) { return wait([&] { return received_ >= n; }); }
  bool wait_released(int n) { return wait([&] { return released_ >= n; }); }
  int wrong() const { return wrong_; }
  std::vector<int> seen() const {
    std::lock_guard lk(mu_);
    return seen_;
  }
  std::string failure() const {
    std::lock_guard lk(mu_);
    return failure_;
  }

 private:
  template <class F>
  bool wait(F done) {
    std::unique_lock lk(mu_);
    return cv_.wait_for(lk, 20s, [&] { return done() || !failure_.empty(); }) && failure_.empty();
  }
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<int> seen_ = std::vector<int>(frames, 0);
  int received_ = 0, released_ = 0, wrong_ = 0;
  std::string failure_;
};

struct outcome {
  std::vector<uint64_t> sent_by_stream;  // rank 0's bytes to rank 1, per stream
  uint64_t moved = 0;
  std::vector<int> seen;
  int wrong = 0;
};

// Rank 0 sends every frame on stream 0 at once (one posted burst on its I/O thread).
outcome burst_on_stream_zero(bool stealing, int active) {
  testing::mesh_ranks m(2, "steal-secret", job, [&](int) {
    mesh::mesh_options o;
    o.connect_timeout = 10s;
    o.num_streams = 4;
    o.shm_bytes = 0;
    o.frame_stealing = stealing;
    return o;
  });
  EXPECT_TRUE(m.ok()) << m.error;
  if (!m.ok()) return {};
  counting_sink tx, rx;
  m.t[0]->start(&tx);
  m.t[1]->start(&rx);
  m.t[0]->set_active_streams(active);
  std::vector<std::byte> data(frames * frame_bytes);
  for (std::size_t f = 0; f < frames; ++f)
    for (std::size_t i = 0; i < frame_bytes; i += 4096) data[f * frame_bytes + i] = static_cast<std::byte>((f * 7 + i / 4096) & 0xff);
  auto* t0 = m.t[0].get();
  t0->post([&] {
    for (std::size_t f = 0; f < frames; ++f) {
      wire::frame_header h;
      h.kind = wire::frame_kind::data;
      h.job_id = job;
      h.sequence = 1;
      h.step = 0;
      h.offset = f * frame_bytes;
      h.length = static_cast<uint32_t>(frame_bytes);
      t0->send(1, 0, h, data.data() + f * frame_bytes);
    }
  });
  EXPECT_TRUE(rx.wait_received(frames)) << rx.failure();
  EXPECT_TRUE(tx.wait_released(frames)) << tx.failure();
  outcome out;
  for (int s = 0; s < 4; ++s) out.sent_by_stream.push_back(t0->peer_traffic(s, 1).sent);
  out.moved = t0->links().frames_moved;
  out.seen = rx.seen();
  out.wrong = rx.wrong();
  m.close();
  return out;
}

TEST(frame_stealing, a_burst_on_one_stream_spreads_over_the_idle_ones_and_arrives_once) {
  auto o = burst_on_stream_zero(true, 0);
  ASSERT_EQ(o.sent_by_stream.size(), 4u);
  EXPECT_EQ(o.wrong, 0);
  EXPECT_EQ(o.seen, std::vector<int>(frames, 1));
  EXPECT_GT(o.moved, 0u);
  for (int s = 1; s < 4; ++s) EXPECT_GT(o.sent_by_stream[s], frame_bytes) << "stream " << s << " took no frame";
  uint64_t total = 0;
  for (auto b : o.sent_by_stream) total += b;
  EXPECT_GE(total, frames * frame_bytes);
  EXPECT_LT(o.sent_by_stream[0], total) << "stream 0 carried everything";
}

TEST(frame_stealing, frames_move_only_among_the_streams_in_use) {
  auto o = burst_on_stream_zero(true, 2);
  ASSERT_EQ(o.sent_by_stream.size(), 4u);
  EXPECT_EQ(o.seen, std::vector<int>(frames, 1));
  EXPECT_GT(o.sent_by_stream[1], frame_bytes);
  EXPECT_EQ(o.sent_by_stream[2], 0u);
  EXPECT_EQ(o.sent_by_stream[3], 0u);
}

TEST(frame_stealing, off_keeps_every_frame_on_the_stream_it_was_sent_to) {
  auto o = burst_on_stream_zero(false, 0);
  ASSERT_EQ(o.sent_by_stream.size(), 4u);
  EXPECT_EQ(o.seen, std::vector<int>(frames, 1));
  EXPECT_EQ(o.moved, 0u);
  for (int s = 1; s < 4; ++s) EXPECT_EQ(o.sent_by_stream[s], 0u);
}

}  // namespace
}  // namespace chorus
