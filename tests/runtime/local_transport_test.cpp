// The local fabric's own contract (runtime/transport/local/): FIFO links under random delays,
// delivery then sent(), cancel, codec refusals, kill, frames before start, the link model.
// Randomised: each test prints its seed; CHORUS_TEST_SEED=<n> re-runs with another base seed.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "runtime/transport/local/local_transport.hpp"
#include "tests/support/test_seed.hpp"

namespace chorus {
namespace {

using namespace std::chrono_literals;

uint64_t seed_for(uint64_t salt) { return testing::seed_for("local_transport_test", salt); }
// ---- the fabric's own contract ----------------------------------------------------------------

// Records every sink call as text.
struct recording_sink final : frame_sink {
  std::vector<std::string> events;
  std::vector<std::byte> landing = std::vector<std::byte>(64);
  bool land_in_place = false;
  std::byte* destination(int, const wire::frame_header&) override { return land_in_place ? landing.data() : nullptr; }
  void delivered(int peer, const wire::frame_header& h, std::byte* data) override {
    events.push_back("delivered from=" + std::to_string(peer) + " seq=" + std::to_string(h.sequence) +
                     " step=" + std::to_string(h.step) + " first=" + std::to_string(h.length ? int(data[0]) : -1));
  }
  void sent(int peer, const wire::frame_header& h) override {
    events.push_back("sent to=" + std::to_string(peer) + " seq=" + std::to_string(h.sequence) + " step=" +
                     std::to_string(h.step));
  }
  void peer_failed(int peer, const status& why) override {
    events.push_back("failed peer=" + std::to_string(peer) + " " + why.to_string());
  }
};

wire::frame_header data_frame(uint64_t job, uint64_t seq, uint32_t step, uint32_t length) {
  wire::frame_header h;
  h.job_id = job;
  h.sequence = seq;
  h.step = step;
  h.length = length;
  return h;
}

struct sink_fabric {
  explicit sink_fabric(int n, local::delay_fn delay = {}, bool start = true)
      : fabric(local::fabric_options{n, 2, 9, 1024, false, std::move(delay)}), sinks(n) {
    if (start)
      for (int r = 0; r < n; ++r) fabric.endpoint(r).start(&sinks[r]);
  }
  void send(int from, int to, int stream, uint64_t seq, uint32_t step, const std::byte* p, uint32_t len = 1) {
    fabric.endpoint(from).send(to, stream, data_frame(9, seq, step, len), p);
  }
  local::local_fabric fabric;
  std::vector<recording_sink> sinks;
};

TEST(local_fabric, each_link_is_fifo_under_random_delays) {
  const uint64_t seed = seed_for(900);
  sink_fabric f(3, local::random_delay(seed, 10us));
  std::byte payload[1] = {std::byte{1}};
  for (uint32_t i = 0; i < 300; ++i) f.send(0, 1 + i % 2, (i / 2) % 2, i % 2 + 10 * ((i / 2) % 2), i, payload);
  f.fabric.run_until_idle();
  for (int dst : {1, 2}) {
    std::vector<int> last(2, -1);
    int n = 0;
    for (auto& e : f.sinks[dst].events) {
      unsigned seq = 0, step = 0;
      ASSERT_EQ(std::sscanf(e.c_str(), "delivered from=0 seq=%u step=%u", &seq, &step), 2) << e;
      int stream = seq >= 10 ? 1 : 0;
      EXPECT_GT(static_cast<int>(step), last[stream]) << "rank " << dst << " stream " << stream;
      last[stream] = static_cast<int>(step);
      ++n;
    }
    EXPECT_EQ(n, 150);
  }
  EXPECT_EQ(f.sinks[0].events.size(), 300u);  // one sent() per frame
  EXPECT_EQ(f.fabric.frames_delivered(), 300u);
}

TEST(local_fabric, delivery_then_sent_and_the_payload_is_read_at_delivery) {
  sink_fabric f(2);
  f.sinks[1].land_in_place = true;
  std::byte payload[1] = {std::byte{5}};
  f.send(0, 1, 0, 3, 0, payload);
  payload[0] = std::byte{6};  // still referenced until sent()
  f.fabric.run_until_idle();
  EXPECT_EQ(f.sinks[1].events, std::vector<std::string>{"delivered from=0 seq=3 step=0 first=6"});
  EXPECT_EQ(f.sinks[0].events, std::vector<std::string>{"sent to=1 seq=3 step=0"});
  EXPECT_EQ(f.sinks[1].landing[0], std::byte{6});
}

TEST(local_fabric, cancel_releases_only_that_sequence_of_that_sender) {
  sink_fabric f(3);
  std::byte p[1] = {};
  for (uint32_t i = 0; i < 3; ++i) {
    f.send(0, 1, 0, 1, i, p);
    f.send(0, 2, 1, 2, i, p);
    f.send(2, 1, 0, 1, i, p);
  }
  f.fabric.endpoint(0).cancel(1);
  EXPECT_EQ(f.sinks[0].events,
            (std::vector<std::string>{"sent to=1 seq=1 step=0", "sent to=1 seq=1 step=1", "sent to=1 seq=1 step=2"}));
  f.fabric.run_until_idle();
  EXPECT_EQ(f.sinks[1].events.size(), 3u);  // rank 2's frames of sequence 1 still arrive
  for (auto& e : f.sinks[1].events) EXPECT_EQ(e.rfind("delivered from=2 seq=1", 0), 0u) << e;
  EXPECT_EQ(f.sinks[2].events.size(), 6u);  // 3 delivered (seq 2) + 3 sent
}

TEST(local_fabric, a_frame_the_codec_refuses_fails_the_peer_and_is_released) {
  sink_fabric f(2);
  std::byte p[1] = {};
  f.fabric.endpoint(0).send(1, 0, data_frame(10, 1, 0, 1), p);  // another job
  f.send(0, 1, 1, 2, 0, p, 2048);                                // over max_payload = 1024
  f.fabric.run_until_idle();
  ASSERT_EQ(f.sinks[1].events.size(), 2u);
  EXPECT_EQ(f.sinks[1].events[0], "failed peer=0 protocol: rank 0 stream 0 sent a bad frame: frame of job 0xa, expected job 0x9");
  EXPECT_EQ(f.sinks[1].events[1], "failed peer=0 protocol: rank 0 stream 1 sent a bad frame: payload length 2048 over the limit 1024");
  EXPECT_EQ(f.sinks[0].events.size(), 2u);
}

TEST(local_fabric, kill_releases_the_victims_frames_and_tells_everyone) {
  sink_fabric f(3);
  std::byte p[1] = {};
  f.send(1, 0, 0, 4, 0, p);  // from the victim: released, never delivered
  f.send(0, 1, 0, 5, 0, p);  // to the victim: released, never delivered
  f.send(0, 2, 0, 6, 0, p);  // unrelated: delivered
  f.fabric.kill(1);
  f.fabric.run_until_idle();
  const std::string lost = "connection_lost: rank 1 was killed (local fabric): connection to rank ";
  EXPECT_EQ(f.sinks[1].events, (std::vector<std::string>{"failed peer=0 " + lost + "0 lost",
                                                          "failed peer=2 " + lost + "2 lost", "sent to=0 seq=4 step=0"}));
  EXPECT_EQ(f.sinks[0].events,
            (std::vector<std::string>{"failed peer=1 " + lost + "0 lost", "sent to=1 seq=5 step=0", "sent to=2 seq=6 step=0"}));
  EXPECT_EQ(f.sinks[2].events,
            (std::vector<std::string>{"failed peer=1 " + lost + "2 lost", "delivered from=0 seq=6 step=0 first=0"}));
  f.fabric.kill(1);  // idempotent
  EXPECT_EQ(f.fabric.run_until_idle(), 1u);
  EXPECT_EQ(f.sinks[0].events.size(), 3u);
}

TEST(local_fabric, frames_before_start_wait_in_order_and_closed_endpoints_hear_nothing) {
  sink_fabric f(3, {}, /*start=*/false);
  f.fabric.endpoint(0).start(&f.sinks[0]);
  f.fabric.endpoint(2).start(&f.sinks[2]);
  std::byte p[1] = {};
  for (uint32_t i = 0; i < 3; ++i) f.send(0, 1, 0, 1, i, p);
  f.fabric.run_until_idle();
  EXPECT_TRUE(f.sinks[1].events.empty());
  f.fabric.endpoint(1).start(&f.sinks[1]);
  f.fabric.run_until_idle();
  EXPECT_EQ(f.sinks[1].events, (std::vector<std::string>{"delivered from=0 seq=1 step=0 first=0",
                                                          "delivered from=0 seq=1 step=1 first=0",
                                                          "delivered from=0 seq=1 step=2 first=0"}));
  f.fabric.endpoint(2).close(0ms);
  f.send(0, 2, 0, 9, 0, p);
  f.fabric.run_until_idle();
  EXPECT_TRUE(f.sinks[2].events.empty());
  EXPECT_EQ(f.sinks[0].events.back(), "sent to=2 seq=9 step=0");
}

TEST(local_fabric, link_model_serialises_frames_in_virtual_time) {
  sink_fabric f(2, local::link_model(1us, 1e9));  // 1 us latency, 1 GB/s: 1000 bytes take 1 us
  f.fabric.run_until_idle();  // the start tasks
  std::vector<std::byte> p(1000);
  f.send(0, 1, 0, 1, 0, p.data(), 1000);
  f.send(0, 1, 0, 1, 1, p.data(), 1000);
  f.send(0, 1, 1, 1, 2, p.data(), 1000);  // another stream: a link of its own
  std::vector<std::chrono::nanoseconds> at;
  while (f.fabric.run_one()) at.push_back(f.fabric.now());
  EXPECT_EQ(at, (std::vector<std::chrono::nanoseconds>{2us, 2us, 3us}));
}

}  // namespace
}  // namespace chorus
