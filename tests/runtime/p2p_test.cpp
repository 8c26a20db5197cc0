// Point-to-point transfers: the matcher's rules (earliest offer that fits, earliest receive that
// fits, any source, tags) and the send/receive chunk ops driven by the real engine over the local
// fabric (sizes from empty to many segments, a receiver that starts first or last, a receiver
// expecting another length).
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "runtime/collectives/engine.hpp"
#include "runtime/collectives/p2p_matcher.hpp"
#include "runtime/collectives/p2p_op.hpp"
#include "runtime/transport/local/local_transport.hpp"

namespace chorus {
namespace {

using namespace std::chrono_literals;

p2p_offer offer(int source, int tag, uint64_t n, uint64_t bytes = 8) {
  return p2p_offer{source, tag, p2p_sequence(source, n), bytes};
}

TEST(p2p_sequence, is_apart_from_the_collectives_and_names_its_sender) {
  const uint64_t s = p2p_sequence(5, 7);
  EXPECT_TRUE(is_p2p_sequence(s));
  EXPECT_EQ(p2p_sender(s), 5);
  EXPECT_NE(s, p2p_sequence(5, 8));
  EXPECT_NE(s, p2p_sequence(6, 7));
  EXPECT_FALSE(is_p2p_sequence(uint64_t{1} << 62));  // the pipeline's base
  EXPECT_FALSE(is_p2p_sequence(12345));
}

TEST(p2p_matcher, a_receive_takes_the_earliest_offer_that_fits) {
  p2p_matcher m;
  EXPECT_FALSE(m.offered(offer(1, 5, 0)));
  EXPECT_FALSE(m.offered(offer(2, 7, 0)));
  EXPECT_FALSE(m.offered(offer(1, 7, 1)));
  auto a = m.posted({10, 1, 7});  // from rank 1, tag 7: not rank 2's earlier one
  ASSERT_TRUE(a);
  EXPECT_EQ(a->offer.sequence, p2p_sequence(1, 1));
  auto b = m.posted({11, -1, 7});  // any source, tag 7: rank 2's
  ASSERT_TRUE(b);
  EXPECT_EQ(b->offer.source, 2);
  auto c = m.posted({12, -1, 5});
  ASSERT_TRUE(c);
  EXPECT_EQ(c->offer.sequence, p2p_sequence(1, 0));
  EXPECT_EQ(m.waiting_offers(), 0u);
  EXPECT_FALSE(m.posted({13, -1, 5}));
  EXPECT_EQ(m.waiting_receives(), 1u);
}

TEST(p2p_matcher, an_offer_goes_to_the_earliest_receive_that_fits) {
  p2p_matcher m;
  EXPECT_FALSE(m.posted({1, 3, 0}));
  EXPECT_FALSE(m.posted({2, -1, 0}));
  EXPECT_FALSE(m.posted({3, 2, 0}));
  auto a = m.offered(offer(2, 0, 0));  // the any-source receive was posted before rank 2's own
  ASSERT_TRUE(a);
  EXPECT_EQ(a->receive.id, 2u);
  auto b = m.offered(offer(2, 0, 1));
  ASSERT_TRUE(b);
  EXPECT_EQ(b->receive.id, 3u);
  EXPECT_FALSE(m.offered(offer(2, 1, 2)));  // another tag waits
  EXPECT_TRUE(m.withdraw(1));
  EXPECT_FALSE(m.withdraw(1));
  EXPECT_EQ(m.take_receives().size(), 0u);
  EXPECT_EQ(m.waiting_offers(), 0u);
}

TEST(p2p_matcher, offers_of_one_sender_and_tag_are_received_in_order) {
  p2p_matcher m;
  for (uint64_t n = 0; n < 5; ++n) EXPECT_FALSE(m.offered(offer(4, 9, n)));
  for (uint64_t n = 0; n < 5; ++n) {
    auto got = m.posted({n, n % 2 ? 4 : -1, 9});
    ASSERT_TRUE(got);
    EXPECT_EQ(got->offer.sequence, p2p_sequence(4, n));
  }
}

struct pair_of_engines {
  pair_of_engines() : fabric(local::fabric_options{2, 2, 0xC0DE, 64u << 20, false, local::random_delay(7, 500ns)}) {
    for (int r = 0; r < 2; ++r) engines.push_back(std::make_unique<engine>(fabric.endpoint(r)));
    for (int r = 0; r < 2; ++r) fabric.endpoint(r).start(engines[r].get());
  }
  ~pair_of_engines() { fabric.stop(); }
  local::local_fabric fabric;
  std::vector<std::unique_ptr<engine>> engines;
};

TEST(p2p_ops, move_every_size_whichever_side_starts_first) {
  for (std::size_t bytes : {std::size_t{0}, std::size_t{1}, std::size_t{63}, std::size_t{64}, std::size_t{1000}}) {
    for (bool receiver_first : {true, false}) {
      SCOPED_TRACE("bytes=" + std::to_string(bytes) + " receiver_first=" + std::to_string(receiver_first));
      pair_of_engines p;
      std::vector<uint8_t> out(bytes), in(bytes, 0xEE);
      for (std::size_t i = 0; i < bytes; ++i) out[i] = static_cast<uint8_t>(i * 7 + 1);
      const uint64_t seq = p2p_sequence(0, bytes);
      status sent{errc::internal, "not run"}, received{errc::internal, "not run"};
      auto send = [&] {
        p.engines[0]->run(std::make_unique<p2p_send_op>(seq, 1, 1, out.data(), bytes, 64),
                          [&](const status& st) { sent = st; });
      };
      auto recv = [&] {
        p.engines[1]->run(std::make_unique<p2p_recv_op>(seq, 1, 0, in.data(), bytes, 64),
                          [&](const status& st) { received = st; });
      };
      if (receiver_first) {
        recv();
        p.fabric.run_until_idle();
        send();
      } else {
        send();
        p.fabric.run_until_idle();  // the frames wait as early frames
        recv();
      }
      p.fabric.run_until_idle();
      EXPECT_TRUE(sent.ok()) << sent.to_string();
      EXPECT_TRUE(received.ok()) << received.to_string();
      EXPECT_EQ(in, out);
    }
  }
}

TEST(p2p_ops, a_receiver_expecting_another_length_fails_instead_of_waiting) {
  pair_of_engines p;
  std::vector<uint8_t> out(100, 1), in(120, 0);
  const uint64_t seq = p2p_sequence(0, 0);
  status received{errc::internal, "not run"};
  p.engines[1]->run(std::make_unique<p2p_recv_op>(seq, 0, 0, in.data(), in.size(), 64),
                    [&](const status& st) { received = st; });
  p.engines[0]->run(std::make_unique<p2p_send_op>(seq, 0, 1, out.data(), out.size(), 64), [](const status&) {});
  p.fabric.run_until_idle();
  EXPECT_EQ(received.code(), errc::protocol) << received.to_string();
  EXPECT_NE(received.message().find("rank 0"), std::string::npos) << received.to_string();
}

}  // namespace
}  // namespace chorus
