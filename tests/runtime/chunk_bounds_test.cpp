// Hostile frame headers against the chunk ops' bounds checks: offsets and lengths that wrap a
// 64-bit sum, sent through the engine on the live path (op already running) and on the
// early-frame path (frame arrives before its op starts), and a stray frame for a chunk that
// already finished. A frame that does not fit must be refused with a protocol error and must
// never make destination() point outside the buffer, nor be kept without end.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "runtime/collectives/alltoall_op.hpp"
#include "runtime/collectives/engine.hpp"
#include "runtime/collectives/exchange_op.hpp"
#include "runtime/collectives/ring_op.hpp"

namespace chorus {
namespace {

// A transport that records what it is asked to send and delivers nothing by itself; release()
// hands the payloads back, as a real transport does once it wrote or cancelled them.
class null_transport final : public transport {
 public:
  int rank() const override { return 0; }
  int size() const override { return 2; }
  int num_streams() const override { return 1; }
  uint64_t job_id() const override { return 7; }
  void start(frame_sink*) override {}
  void post(std::function<void()> fn) override { fn(); }
  void send(int, int, const wire::frame_header& h, const std::byte*) override { queued.push_back(h); }
  void cancel(uint64_t) override {}
  void abort(const status& why) override { aborted = why; }
  void close(std::chrono::milliseconds) override {}
  void release(frame_sink& sink) {
    auto q = std::move(queued);
    queued.clear();
    for (auto& h : q) sink.sent(1, h);
  }
  std::vector<wire::frame_header> queued;
  status aborted;
};

constexpr uint64_t wrap_offset = std::numeric_limits<uint64_t>::max() - (512u << 10) + 1;  // 2^64 - 512 KiB

TEST(RangeInside, RejectsWrappingSums) {
  EXPECT_TRUE(range_inside(0, 10, 0, 10));
  EXPECT_TRUE(range_inside(10, 0, 0, 10));
  EXPECT_FALSE(range_inside(5, 6, 0, 10));
  EXPECT_FALSE(range_inside(11, 0, 0, 10));
  EXPECT_FALSE(range_inside(3, 1, 4, 10));
  EXPECT_FALSE(range_inside(wrap_offset, 512u << 10, 0, 1u << 20));  // offset + length == 2^64 wraps to 0
  EXPECT_FALSE(range_inside(std::numeric_limits<uint64_t>::max(), 2, 0, 10));
  EXPECT_FALSE(range_inside(1, std::numeric_limits<uint64_t>::max(), 0, 10));
}

// Rank 0 of a 2-rank ring allreduce over 1 MiB of f32 with the default 512 KiB segment.
struct ring_fixture {
  null_transport t;
  engine eng{t};
  std::vector<float> buf = std::vector<float>(1u << 18, 1.0f);  // 1 MiB
  status result{errc::internal, "not done"};
  bool done = false;

  std::unique_ptr<chunk_op> make(uint64_t seq) {
    return make_ring_allreduce(seq, 0, 0, 2, buf.data(), buf.size(), dtype::f32, reduce_op::sum, 512u << 10);
  }
  void run(uint64_t seq) {
    eng.run(make(seq), [this](const status& st) {
      result = st;
      done = true;
    });
  }
  // A header that matches the op's layout tag, so only the bounds check can refuse it.
  wire::frame_header header(uint64_t seq, uint32_t step, uint64_t offset, uint32_t length) {
    auto probe = make(seq);
    wire::frame_header h;
    h.kind = wire::frame_kind::data;
    h.job_id = t.job_id();
    h.sequence = seq;
    h.step = (static_cast<uint32_t>(probe->layout_tag()) << 16) | step;
    h.offset = offset;
    h.length = length;
    return h;
  }
};

TEST(ChunkBounds, RingRefusesWrappedOffsetOnTheLivePath) {
  ring_fixture f;
  f.run(1);
  // Rank 0 receives block 1 ([512 KiB, 1 MiB)) in step 0. offset = 2^64 - 512 KiB: offset +
  // length wraps to 0, (offset - 512 KiB) is a multiple of the segment.
  auto h = f.header(1, 0, wrap_offset, 512u << 10);
  EXPECT_EQ(f.eng.destination(1, h), nullptr);
  std::vector<std::byte> payload(h.length, std::byte{0x7f});
  f.eng.delivered(1, h, payload.data());
  f.t.release(f.eng);
  ASSERT_TRUE(f.done);
  EXPECT_EQ(f.result.code(), errc::protocol) << f.result.message();
  EXPECT_NE(f.result.message().find("outside block"), std::string::npos) << f.result.message();
  EXPECT_EQ(f.t.aborted.code(), errc::protocol);
  for (float v : f.buf) ASSERT_EQ(v, 1.0f);  // nothing was reduced into the buffer
}

TEST(ChunkBounds, RingRefusesWrappedOffsetOnTheEarlyFramePath) {
  ring_fixture f;
  auto h = f.header(2, 0, wrap_offset, 512u << 10);
  std::vector<std::byte> payload(h.length, std::byte{0x7f});
  EXPECT_EQ(f.eng.destination(1, h), nullptr);  // no op yet: scratch
  f.eng.delivered(1, h, payload.data());        // kept as an early frame
  EXPECT_FALSE(f.done);
  f.run(2);  // replayed against the op: refused, not copied 512 KiB before the buffer
  f.t.release(f.eng);
  ASSERT_TRUE(f.done);
  EXPECT_EQ(f.result.code(), errc::protocol) << f.result.message();
  EXPECT_EQ(f.t.aborted.code(), errc::protocol);
}

TEST(ChunkBounds, RingRefusesLengthPastTheBlock) {
  ring_fixture f;
  f.run(3);
  auto h = f.header(3, 0, 512u << 10, std::numeric_limits<uint32_t>::max());
  EXPECT_EQ(f.eng.destination(1, h), nullptr);
}

TEST(ChunkBounds, RingAcceptsTheHonestFrame) {
  ring_fixture f;
  f.run(4);
  auto h = f.header(4, 0, 512u << 10, 512u << 10);
  std::byte* dest = f.eng.destination(1, h);
  EXPECT_EQ(dest, nullptr);  // step 0 reduces: the payload goes to scratch, not into the buffer
  std::vector<float> payload(1u << 17, 2.0f);
  f.eng.delivered(1, h, reinterpret_cast<std::byte*>(payload.data()));
  EXPECT_FALSE(f.done);  // the allgather step is still to come
  EXPECT_EQ(f.buf[(1u << 17) + 5], 3.0f);
  EXPECT_TRUE(f.t.aborted.ok());
}

TEST(ChunkBounds, AFrameForAFinishedChunkIsRefusedNotKeptForever) {
  null_transport t;
  engine eng{t};
  // A one-rank broadcast finishes at once; a frame for its sequence can only be a stray.
  std::vector<std::byte> data(64);
  bool done = false;
  eng.run(std::make_unique<broadcast_op>(9, 0, 0, 1, data.data(), data.size(), 0, 64), [&](const status& st) {
    EXPECT_TRUE(st.ok()) << st.message();
    done = true;
  });
  ASSERT_TRUE(done);
  wire::frame_header h;
  h.kind = wire::frame_kind::data;
  h.sequence = 9;
  h.length = 64;
  std::vector<std::byte> payload(64);
  eng.delivered(1, h, payload.data());
  EXPECT_EQ(t.aborted.code(), errc::protocol) << t.aborted.message();
  EXPECT_NE(t.aborted.message().find("already finished"), std::string::npos) << t.aborted.message();
  EXPECT_EQ(eng.broken().code(), errc::protocol);
}

TEST(ChunkBounds, AlltoallRefusesWrappedOffset) {
  null_transport t;
  engine eng{t};
  std::vector<std::byte> in(1024), out(1024);
  // Rank 0 of 2: sends [512, 1024) to rank 1, receives 512 bytes from it into [512, 1024).
  auto make = [&] {
    return std::make_unique<alltoall_op>(5, 0, 0, 2, in.data(), std::vector<byte_range>{{0, 512}, {512, 512}},
                                         out.data(), std::vector<byte_range>{{0, 512}, {512, 512}}, 4, 256);
  };
  status result{errc::internal, "not done"};
  bool done = false;
  auto tag = make()->layout_tag();
  eng.run(make(), [&](const status& st) {
    result = st;
    done = true;
  });
  wire::frame_header h;
  h.kind = wire::frame_kind::data;
  h.job_id = t.job_id();
  h.sequence = 5;
  h.step = (static_cast<uint32_t>(tag) << 16) | 1;  // a block's last frame
  // A multiple of 256 whose sum with the length wraps to exactly the block's 512 bytes.
  h.offset = std::numeric_limits<uint64_t>::max() - 255;
  h.length = 768;
  EXPECT_EQ(eng.destination(1, h), nullptr);
  std::vector<std::byte> payload(768);
  eng.delivered(1, h, payload.data());
  t.release(eng);
  ASSERT_TRUE(done);
  EXPECT_EQ(result.code(), errc::protocol) << result.message();
}

TEST(ChunkBounds, BroadcastRefusesOffsetPastTheBuffer) {
  null_transport t;
  std::vector<std::byte> data(1000);
  broadcast_op op(6, 0, 1, 2, data.data(), data.size(), 0, 256);
  op.start(t);
  wire::frame_header h;
  h.kind = wire::frame_kind::data;
  h.sequence = 6;
  h.step = 0;
  h.offset = std::numeric_limits<uint64_t>::max() - 255;
  h.length = 256;
  EXPECT_EQ(op.destination(0, h), nullptr);
  EXPECT_EQ(op.delivered(t, 0, h, data.data()).code(), errc::protocol);
}

}  // namespace
}  // namespace chorus
