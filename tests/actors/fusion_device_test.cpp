// How fusion plans CUDA tensors (plan_batch, actors/fusion_actor.hpp): each gets an in-place
// bucket of its own (never packed by the host), numbered in plan order (device_order: the
// order NCCL launches them on every rank), one chunk on the NCCL backend and chunk_bytes
// chunks for host staging; CPU tensors beside them fuse as before; their chunks keep priority 0
// (the executor launches in plan order, so they must be handed out in it).
#include <gtest/gtest.h>

#include "actors/fusion_actor.hpp"

namespace chorus {
namespace {

op_ref ref(const std::string& name, int64_t elems, device_kind dev) {
  op_ref o;
  o.spec.name = name;
  o.spec.kind = collective_kind::allreduce;
  o.spec.type = dtype::f32;
  o.spec.shape = {elems};
  o.spec.op = reduce_op::sum;
  o.spec.device = dev;
  return o;
}

fusion_state state(bool device_whole) {
  fusion_state s;
  s.cfg.size = 2;
  s.cfg.chunk_bytes = 1u << 20;
  s.cfg.in_place_bytes = 0;  // fuse every CPU tensor: only the device rule keeps buckets apart
  s.cfg.device_whole = device_whole;
  s.next_sequence = s.cfg.first_sequence;
  return s;
}

TEST(fusion_device, cuda_tensors_get_in_place_buckets_in_order_and_cpu_ones_still_fuse) {
  auto s = state(true);
  batch_agreed b{1, {ref("c1", 10, device_kind::cpu), ref("g1", 3u << 20, device_kind::cuda),
                     ref("c2", 10, device_kind::cpu), ref("g2", 100, device_kind::cuda)}};
  auto planned = plan_batch(s, b);
  ASSERT_EQ(planned.size(), 3u);  // c1+c2 fused, g1, g2
  std::vector<std::string> device_names;
  std::vector<uint64_t> orders;
  for (auto& [job, works] : planned) {
    if (job->on_device()) {
      ASSERT_EQ(job->ops.size(), 1u);
      EXPECT_TRUE(job->plan.in_place);
      EXPECT_FALSE(job->fused());
      EXPECT_EQ(works.size(), 1u) << "NCCL runs a CUDA bucket as one chunk";
      device_names.push_back(job->ops.front().spec.name);
      orders.push_back(job->device_order);
    } else {
      EXPECT_EQ(job->ops.size(), 2u);
    }
  }
  EXPECT_EQ(device_names, (std::vector<std::string>{"g1", "g2"}));
  EXPECT_EQ(orders, (std::vector<uint64_t>{0, 1}));
  auto again = plan_batch(s, batch_agreed{2, {ref("g3", 5, device_kind::cuda)}});
  EXPECT_EQ(again.front().first->device_order, 2u) << "the numbering runs on across batches";
}

TEST(fusion_device, cuda_chunks_keep_priority_zero_since_the_executor_launches_in_plan_order) {
  auto s = state(true);
  auto g = ref("g", 100, device_kind::cuda), c = ref("c", 10, device_kind::cpu);
  g.spec.priority = 9;
  c.spec.priority = 9;
  for (auto& [job, works] : plan_batch(s, batch_agreed{1, {g, c}}))
    for (const auto& w : works) EXPECT_EQ(w.priority, job->on_device() ? 0 : 9) << job->ops.front().spec.name;
}

TEST(fusion_device, host_staging_cuts_cuda_buckets_into_chunks) {
  auto s = state(false);
  auto planned = plan_batch(s, batch_agreed{1, {ref("g", (3u << 20) / 4 + 1, device_kind::cuda)}});
  ASSERT_EQ(planned.size(), 1u);
  EXPECT_EQ(planned.front().second.size(), 4u) << "3 MiB + 4 bytes in 1 MiB chunks";
}

}  // namespace
}  // namespace chorus
