// Which allreduce chunks fusion plans for the communicator's direct path (plan_batch,
// actors/fusion_actor.hpp; runtime/collectives/mailbox_queue.hpp): with a lane, the plain
// allreduces of the job's own set whose chunks the lane takes, and those asking for the NaN/Inf
// check alone (the mailboxes check in their fold); never a compressed or prescaled one, a
// process set's, a broadcast; nothing without a lane. The names metrics and the
// trace give each bucket say the same ("" for a broadcast, as before).
#include <gtest/gtest.h>

#include "actors/fusion_actor.hpp"

namespace chorus {
namespace {

op_ref allreduce(const std::string& name, int64_t elements, int set = 0) {
  op_ref o;
  o.spec.name = negotiated_name(name, set);
  o.spec.process_set = set;
  o.spec.kind = collective_kind::allreduce;
  o.spec.type = dtype::f32;
  o.spec.op = reduce_op::sum;
  o.spec.shape = {elements};
  return o;
}

// A lane of `size` ranks whose mailboxes are absent: fusion only asks what it takes.
std::unique_ptr<mailbox_queue> lane(int size, std::size_t limit) {
  std::vector<std::unique_ptr<shm::mailbox_writer>> out(static_cast<std::size_t>(size));
  std::vector<std::unique_ptr<shm::mailbox_reader>> in(static_cast<std::size_t>(size));
  return std::make_unique<mailbox_queue>(
      std::make_unique<mailbox_allreduce>(0, size, std::move(out), std::move(in), limit, std::chrono::microseconds(0)),
      nullptr);
}

fusion_state state(int size, mailbox_queue* direct) {
  fusion_state s;
  s.cfg.rank = 0;
  s.cfg.size = size;
  s.cfg.chunk_bytes = 4096;
  s.cfg.small_bytes = 1024;
  s.cfg.in_place_bytes = 1;  // every tensor a bucket of its own
  s.cfg.direct = direct;
  s.cfg.direct_max_bytes = direct ? direct->max_bytes() : 0;
  auto sets = std::make_shared<process_set_table>(size);
  auto added = sets->add({0});  // rank 0 alone: a set of its own, not the job's
  EXPECT_TRUE(added && *added == 1);
  s.cfg.process_sets = sets;
  s.next_sequence = s.cfg.first_sequence;
  return s;
}

// Each bucket's algorithm name, in plan order.
std::vector<std::string> planned(fusion_state&& s, const std::vector<op_ref>& ops) {
  std::vector<std::string> out;
  for (auto& [job, works] : plan_batch(s, batch_agreed{1, ops})) out.push_back(algorithm_of(works));
  return out;
}

std::vector<op_ref> mixed() {
  auto fp16 = allreduce("fp16", 2048);
  fp16.spec.wire = compression::fp16;
  auto checked = allreduce("checked", 2048);
  checked.spec.check = nan_check::error;
  auto scaled = allreduce("scaled", 2048);
  scaled.spec.prescale = 0.5f;
  auto bcast = allreduce("bcast", 2048);
  bcast.spec.kind = collective_kind::broadcast;
  return {allreduce("plain", 2048), allreduce("small", 16), fp16, checked, scaled, bcast, allreduce("set", 2048, 1)};
}

TEST(fusion_direct, plain_and_checked_allreduces_of_the_job_set_take_the_lane_and_nothing_else_does) {
  // Two ranks: the lane takes every size, so "plain" and "small" fuse into one bucket although
  // in_place_bytes would keep each apart (fusing them copies nothing there).
  auto l = lane(2, 4u << 20);
  EXPECT_EQ(planned(state(2, l.get()), mixed()),
            (std::vector<std::string>{"direct", "ring", "direct", "ring", "", "ring"}));
  // Three ranks, the same limit: each is a bucket of its own again, as in_place_bytes says.
  auto three = lane(3, 4u << 20);
  EXPECT_EQ(planned(state(3, three.get()), mixed()),
            (std::vector<std::string>{"direct", "direct", "ring", "direct", "ring", "", "ring"}));
}

TEST(fusion_direct, a_checked_bucket_on_the_lane_is_one_chunk_that_carries_the_report) {
  auto l = lane(2, 4u << 20);
  auto checked = allreduce("checked", 2048);
  checked.spec.check = nan_check::skip;
  auto s = state(2, l.get());
  auto plan = plan_batch(s, batch_agreed{1, {checked}});
  ASSERT_EQ(plan.size(), 1u);
  ASSERT_EQ(plan[0].second.size(), 1u);  // 8 KiB with 4 KiB chunks: whole, as a plain one
  EXPECT_EQ(plan[0].second[0].algo, chunk_algo::mailbox_allreduce);
  EXPECT_NE(plan[0].first->nonfinite, nullptr);
}

// In place (input == output): a fused bucket on the lane runs on the tensors themselves.
op_ref in_place(const std::string& name, int64_t elements, std::vector<float>& storage) {
  auto o = allreduce(name, elements);
  storage.assign(static_cast<std::size_t>(elements), 1.0f);
  o.input = o.output = storage.data();
  return o;
}

TEST(fusion_direct, on_two_ranks_a_bucket_the_lane_takes_is_one_chunk_and_is_never_packed) {
  auto l = lane(2, 4u << 20);
  std::vector<float> a, b, c, d;
  // 8 KiB + 8 KiB with 4 KiB chunks: one bucket (the lane fuses past in_place_bytes), uncut.
  auto s = state(2, l.get());
  auto plan = plan_batch(s, batch_agreed{1, {in_place("a", 2048, a), in_place("b", 2048, b)}});
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(plan[0].second.size(), 1u);
  EXPECT_EQ(plan[0].second[0].algo, chunk_algo::mailbox_allreduce);
  EXPECT_TRUE(plan[0].first->fused());
  EXPECT_TRUE(plan[0].first->scattered);
  // One op out of place: still scattered (its input is copied to its output first).
  auto out_of_place = in_place("d", 2048, d);
  std::vector<float> result(2048);
  out_of_place.output = result.data();
  auto t = state(2, l.get());
  auto mixed_ops = plan_batch(t, batch_agreed{1, {in_place("c", 2048, c), out_of_place}});
  ASSERT_EQ(mixed_ops.size(), 1u);
  EXPECT_EQ(mixed_ops[0].second.size(), 1u);
  EXPECT_TRUE(mixed_ops[0].first->scattered);
  // An op without an input: the same plan (it is every rank's), but this rank packs, which
  // then fails naming the tensor.
  auto no_input = in_place("e", 2048, d);
  no_input.input = nullptr;
  auto v = state(2, l.get());
  auto packed = plan_batch(v, batch_agreed{1, {in_place("c", 2048, c), no_input}});
  ASSERT_EQ(packed.size(), 1u);
  EXPECT_EQ(packed[0].second.size(), 1u);
  EXPECT_FALSE(packed[0].first->scattered);
  // Without a lane the same tensors are two buckets of two chunks each, as in_place_bytes says.
  auto u = state(2, nullptr);
  auto ring = plan_batch(u, batch_agreed{1, {in_place("a", 2048, a), in_place("b", 2048, b)}});
  ASSERT_EQ(ring.size(), 2u);
  EXPECT_EQ(ring[0].second.size(), 2u);
  EXPECT_FALSE(ring[0].first->scattered);
}

TEST(fusion_direct, without_a_lane_the_ring_and_recursive_doubling_run_as_before) {
  EXPECT_EQ(planned(state(2, nullptr), mixed()),
            (std::vector<std::string>{"ring", "recursive_doubling", "ring", "ring", "ring", "", "ring"}));
}

TEST(fusion_direct, with_more_ranks_chunks_past_the_lanes_limit_take_the_ring) {
  // Three ranks, limit 4 KiB: chunks up to 4 KiB / (3 - 2) go direct. An 8 KiB tensor is two
  // 4 KiB chunks (direct); with 8 KiB chunks it is one, too large for the lane.
  auto l = lane(3, 4096);
  EXPECT_EQ(planned(state(3, l.get()), {allreduce("a", 2048)}), (std::vector<std::string>{"direct"}));
  auto s = state(3, l.get());
  s.cfg.chunk_bytes = 8192;
  EXPECT_EQ(planned(std::move(s), {allreduce("a", 2048)}), (std::vector<std::string>{"ring"}));
}

}  // namespace
}  // namespace chorus
