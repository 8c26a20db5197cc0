// arrival_queue (runtime/core/arrival_queue.hpp): the oldest connection still waiting comes out
// first, ended or finished ones are skipped, and the queue stays bounded by the waiting ones
// however many pass through.
#include "runtime/core/arrival_queue.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace chorus {
namespace {

struct conn {
  int id = 0;
  bool waiting = true;
};
bool still_waiting(const conn& c) { return c.waiting; }

TEST(ArrivalQueue, OldestWaitingFirstSkippingFinishedAndEnded) {
  arrival_queue<conn> q;
  std::vector<std::shared_ptr<conn>> held;
  for (int i = 0; i < 5; ++i) {
    held.push_back(std::make_shared<conn>(conn{i}));
    q.push(held.back(), still_waiting);
  }
  held[0]->waiting = false;  // finished its handshake
  held[1].reset();           // closed
  auto a = q.pop_oldest(still_waiting);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->id, 2);
  EXPECT_EQ(q.pop_oldest(still_waiting)->id, 3);
  EXPECT_EQ(q.pop_oldest(still_waiting)->id, 4);
  EXPECT_EQ(q.pop_oldest(still_waiting), nullptr);
  EXPECT_EQ(q.size(), 0u);
}

TEST(ArrivalQueue, StaysBoundedWhenTheFrontWaitsAndMillionsPassBehindIt) {
  arrival_queue<conn> q;
  auto stuck = std::make_shared<conn>(conn{-1});  // a silent connection at the front
  q.push(stuck, still_waiting);
  std::size_t most = 0;
  for (int i = 0; i < 1'000'000; ++i) {
    auto c = std::make_shared<conn>(conn{i});
    q.push(c, still_waiting);
    most = std::max(most, q.size());
  }  // each one finished (destroyed) right after it arrived
  // At most two wait at once (the stuck one and the newest, alive while pushed): 2 x 2 + 16.
  EXPECT_LE(most, 2u * 2 + 16) << "the queue grew with the arrivals, not with the waiting connections";
  EXPECT_EQ(q.pop_oldest(still_waiting), stuck);
}

}  // namespace
}  // namespace chorus
