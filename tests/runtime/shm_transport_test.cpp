// The TCP data plane with shared-memory rings, two ranks in threads of this process on
// 127.0.0.1: payloads of every size arrive intact, each once, whether they went through the ring
// (waiting for room) or on TCP (too big for it), and the ring's frames in the order sent; a
// rank with the rings off makes both sides use TCP; a doorbell that names no ring, or one with
// a payload, is a bad frame that fails the peer with a message naming rank and stream, passed on
// to the sender too.
#include <gtest/gtest.h>

#include <condition_variable>
#include <cstring>
#include <future>
#include <mutex>
#include <algorithm>
#include <random>
#include <thread>
#include <string>
#include <vector>

#include <asio.hpp>

#include "runtime/rendezvous/rendezvous.hpp"
#include "runtime/transport/mesh/mesh_transport.hpp"
#include "tests/support/mesh_ranks.hpp"

namespace chorus {
namespace {

using namespace std::chrono_literals;


// Keeps what arrives, per stream, and what failed; waits with a bound.
struct collecting_sink final : frame_sink {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::vector<std::vector<std::byte>>> got = std::vector<std::vector<std::vector<std::byte>>>(4);
  std::vector<std::string> failures;
  std::size_t sent_count = 0;
  std::byte* destination(int, const wire::frame_header&) override { return nullptr; }
  void delivered(int, const wire::frame_header& h, std::byte* data) override {
    std::lock_guard<std::mutex> l(mu);
    got[h.sequence % 4].emplace_back(data, data + h.length);
    cv.notify_all();
  }
  void sent(int, const wire::frame_header&) override {
    std::lock_guard<std::mutex> l(mu);
    ++sent_count;
    cv.notify_all();
  }
  void peer_failed(int peer, const status& why) override {
    std::lock_guard<std::mutex> l(mu);
    failures.push_back("peer " + std::to_string(peer) + ": " + why.to_string());
    cv.notify_all();
  }
  template <class Pred>
  bool wait(Pred pred) {
    std::unique_lock<std::mutex> l(mu);
    return cv.wait_for(l, 20s, pred);
  }
};

struct two_ranks {
  testing::mesh_ranks ranks;
  std::unique_ptr<mesh::mesh_transport>* t;
  collecting_sink sink[2];

  two_ranks(std::size_t shm0, std::size_t shm1, std::chrono::microseconds spin = std::chrono::microseconds(50))
      : ranks(2, "shm-transport-test-secret", 0x5a5a, [&](int r) {
          mesh::mesh_options opts;
          opts.connect_timeout = 10s;
          opts.num_streams = 2;  // the checks below count two streams' rings
          opts.shm_bytes = r == 0 ? shm0 : shm1;
          opts.shm_spin = spin;
          return opts;
        }),
        t(ranks.t.data()) {
    EXPECT_TRUE(ranks.ok()) << ranks.error;
    if (!ok()) return;
    for (int r = 0; r < 2; ++r) t[r]->start(&sink[r]);
  }
  bool ok() const { return t[0] && t[1]; }
  // Sends on rank `from`'s I/O thread.
  void send(int from, int stream, const wire::frame_header& h, const std::byte* payload) {
    t[from]->post([this, from, stream, h, payload] { t[from]->send(1 - from, stream, h, payload); });
  }
  ~two_ranks() { ranks.close(); }  // before the sinks go
};

wire::frame_header frame(uint64_t seq, uint32_t length, wire::frame_kind kind = wire::frame_kind::data) {
  wire::frame_header h;
  h.kind = kind;
  h.job_id = 0x5a5a;
  h.sequence = seq;
  h.length = length;
  return h;
}

TEST(shm_transport, payloads_arrive_intact_through_the_ring_and_on_tcp) {
  two_ranks job(256 << 10, 256 << 10);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job.t[0]->links().shm_streams, 2);
  EXPECT_EQ(job.t[1]->links().shm_streams, 2);
  // 300 frames per stream, 1 byte to 300 KiB: some too big for the 256 KiB ring.
  std::mt19937 rng(77);
  const int per_stream = 300;
  std::vector<std::vector<std::byte>> payloads;
  for (int i = 0; i < 2 * per_stream; ++i) {
    std::vector<std::byte> p(1 + rng() % (300 << 10));
    for (std::size_t k = 0; k < p.size(); ++k) p[k] = static_cast<std::byte>((i * 131 + k * 7) & 0xff);
    payloads.push_back(std::move(p));
  }
  // Frame i goes on stream i % 2 with sequence i % 2 (the sink files by sequence).
  for (int i = 0; i < 2 * per_stream; ++i)
    job.send(0, i % 2, frame(static_cast<uint64_t>(i % 2), static_cast<uint32_t>(payloads[i].size())),
             payloads[i].data());
  ASSERT_TRUE(job.sink[1].wait([&] { return job.sink[1].got[0].size() + job.sink[1].got[1].size() == 2u * per_stream; }))
      << "frames missing";
  ASSERT_TRUE(job.sink[0].wait([&] { return job.sink[0].sent_count == 2u * per_stream; }));
  // Each path keeps its own order; the two interleave as they go (frames are routed by
  // sequence, step and offset, never by arrival order). So: everything arrived once, intact;
  // and unless a frame that fits the ring went on TCP because the ring stayed full (a miss
  // beyond the frames too big for it), the ring's frames arrived in the order sent.
  auto use = job.t[0]->links();
  std::size_t too_big = 0;
  for (auto& p : payloads) too_big += p.size() + wire::frame_header_size > (256u << 10);
  for (int s = 0; s < 2; ++s) {
    std::vector<std::vector<std::byte>> sent_on_s, small;
    for (int i = s; i < 2 * per_stream; i += 2) {
      sent_on_s.push_back(payloads[i]);
      if (payloads[i].size() + wire::frame_header_size <= (256u << 10)) small.push_back(payloads[i]);
    }
    auto& got = job.sink[1].got[s];
    if (use.shm_missed == too_big) {
      std::size_t k = 0;
      for (auto& g : got)
        if (k < small.size() && g == small[k]) ++k;
      EXPECT_EQ(k, small.size()) << "stream " << s << ": the ring's frames came out of order";
    }
    auto a = got, b = sent_on_s;
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    ASSERT_EQ(a, b) << "stream " << s << ": a frame was lost, duplicated or damaged";
  }
  EXPECT_GT(use.shm_frames, 0u);
  EXPECT_GT(use.shm_missed, 0u);  // the frames over 256 KiB
  EXPECT_EQ(use.shm_frames + use.shm_missed, 2u * per_stream);
  EXPECT_TRUE(job.sink[0].failures.empty() && job.sink[1].failures.empty());
}

TEST(shm_transport, a_rank_with_the_rings_off_gets_tcp_both_ways) {
  two_ranks job(256 << 10, 0);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job.t[0]->links().shm_streams, 0);
  EXPECT_EQ(job.t[1]->links().shm_streams, 0);
  std::vector<std::byte> p(100000, std::byte{3});
  job.send(0, 0, frame(0, static_cast<uint32_t>(p.size())), p.data());
  job.send(1, 1, frame(1, static_cast<uint32_t>(p.size())), p.data());
  ASSERT_TRUE(job.sink[1].wait([&] { return job.sink[1].got[0].size() == 1; }));
  ASSERT_TRUE(job.sink[0].wait([&] { return job.sink[0].got[1].size() == 1; }));
  EXPECT_EQ(job.sink[1].got[0][0], p);
  EXPECT_EQ(job.sink[0].got[1][0], p);
  EXPECT_EQ(job.t[0]->links().shm_frames, 0u);
}

TEST(shm_transport, a_doorbell_without_a_ring_is_a_bad_frame) {
  two_ranks job(0, 0);
  ASSERT_TRUE(job.ok());
  job.send(0, 1, frame(0, 0, wire::frame_kind::shm_wake), nullptr);
  ASSERT_TRUE(job.sink[1].wait([&] { return !job.sink[1].failures.empty(); }));
  EXPECT_EQ(job.sink[1].failures[0],
            "peer 0: protocol: rank 0 stream 1 sent a bad frame: kind=5 seq=0 step=0 offset=0 length=0 rings a "
            "shared-memory ring that was never set up");
  // The sender learns what was wrong with its frame, not just that rank 1 hung up.
  ASSERT_TRUE(job.sink[0].wait([&] { return !job.sink[0].failures.empty(); }));
  EXPECT_EQ(job.sink[0].failures[0],
            "peer 1: protocol: rank 0 stream 1 sent a bad frame: kind=5 seq=0 step=0 offset=0 length=0 rings a "
            "shared-memory ring that was never set up (passed on by a peer)");
}

TEST(shm_transport, a_doorbell_with_a_payload_is_a_bad_frame) {
  two_ranks job(64 << 10, 64 << 10);
  ASSERT_TRUE(job.ok());
  ASSERT_EQ(job.t[0]->links().shm_streams, 2);
  std::byte p[16] = {};
  job.send(0, 0, frame(0, 16, wire::frame_kind::shm_wake), p);
  ASSERT_TRUE(job.sink[1].wait([&] { return !job.sink[1].failures.empty(); }));
  EXPECT_EQ(job.sink[1].failures[0],
            "peer 0: protocol: rank 0 stream 0 sent a bad frame: kind=5 seq=0 step=0 offset=0 length=16 is a "
            "doorbell with a payload");
}

TEST(shm_transport, a_receiver_that_sleeps_is_woken_by_the_doorbell) {
  // With no spinning the receiver sleeps whenever it is idle: every frame after a pause must
  // reach it through the doorbell, never wait for some later event.
  two_ranks job(256 << 10, 256 << 10, std::chrono::microseconds(0));
  ASSERT_TRUE(job.ok());
  std::vector<std::byte> p(1000, std::byte{5});
  for (std::size_t i = 0; i < 50; ++i) {
    job.send(0, static_cast<int>(i % 2), frame(i % 2, static_cast<uint32_t>(p.size())), p.data());
    ASSERT_TRUE(job.sink[1].wait([&] { return job.sink[1].got[0].size() + job.sink[1].got[1].size() == i + 1; }))
        << "frame " << i << " was not delivered";
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // let the receiver fall asleep
  }
  EXPECT_EQ(job.t[0]->links().shm_frames, 50u);
}

}  // namespace
}  // namespace chorus
