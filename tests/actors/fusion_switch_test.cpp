// An autotuner switch at the fusion actor (actors/fusion_actor.hpp), under CAF's test
// coordinator: batches of the switch's cycle wait for it and are planned with the new chunk
// size and thresholds, while a bucket already in flight keeps its buffer (same lease, same
// bytes, never freed or resized even when the pool runs short) and its chunk plan.
#include "actors/fusion_actor.hpp"
#include "tests/actors/class_actor.hpp"

#include <gtest/gtest.h>

#include <caf/scheduler/test_coordinator.hpp>

#include <cstring>

namespace chorus {
namespace {

struct sink_state {
  std::vector<chunk_work> chunks;  // what the "sender" got, never finished: all in flight
  std::vector<std::shared_ptr<bucket_job>> planned;
};
caf::behavior sink_actor(caf::stateful_actor<sink_state>* self) {
  return {[=](chunk_work& w) { self->state.chunks.push_back(std::move(w)); },
          [=](bucket_planned& p) { self->state.planned.push_back(std::move(p.job)); }};
}

struct fusion_fixture {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  caf::scheduler::test_coordinator* sched = nullptr;
  caf::actor fusion, sink;
  std::vector<std::vector<float>> tensors;  // the ops' buffers

  fusion_fixture() {
    register_types(cfg);
    cfg.set("scheduler.policy", caf::atom("testing"));
    sys = std::make_unique<caf::actor_system>(cfg);
    sched = &dynamic_cast<caf::scheduler::test_coordinator&>(sys->scheduler());
    fusion_config fc;
    fc.size = 2;
    fc.fusion_threshold = 4u << 20;
    fc.chunk_bytes = 1u << 20;
    fc.in_place_bytes = 0;
    fc.pool_bytes = 4u << 20;  // room for one bucket: the next one must not take its buffer
    fc.pre_touch = false;
    fc.start_window = 64;
    fusion = sys->spawn(fusion_actor, fc);
    sink = sys->spawn<::chorus::test::class_actor<sink_state, sink_actor>>();
    caf::anon_send(fusion, fusion_wiring{sink, {sink}, nullptr, nullptr});
    sched->run();
  }
  ~fusion_fixture() {
    caf::anon_send_exit(fusion, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(sink, caf::exit_reason::user_shutdown);
    sched->run();
  }
  sink_state& out() {
    return dynamic_cast<caf::stateful_actor<sink_state>&>(*caf::actor_cast<caf::abstract_actor*>(sink)).state;
  }
  /// A batch of `n` f32 tensors of `bytes` each, agreed in `cycle`.
  batch_agreed batch(uint64_t cycle, int n, std::size_t bytes) {
    batch_agreed b{cycle, {}};
    for (int i = 0; i < n; ++i) {
      tensors.emplace_back(bytes / 4, 1.0f);
      op_ref o;
      o.spec.name = "t" + std::to_string(cycle) + "." + std::to_string(i);
      o.spec.kind = collective_kind::allreduce;
      o.spec.type = dtype::f32;
      o.spec.shape = {static_cast<int64_t>(bytes / 4)};
      o.spec.op = reduce_op::sum;
      o.input = o.output = tensors.back().data();
      b.ops.push_back(std::move(o));
    }
    return b;
  }
};

TEST(fusion_switch, batches_wait_for_the_switch_and_buckets_in_flight_keep_their_buffers) {
  fusion_fixture f;
  // 1. A fused bucket of 3 MiB (three 1 MiB tensors) in 1 MiB chunks, all handed out and in flight.
  caf::anon_send(f.fusion, f.batch(1, 3, 1u << 20));
  f.sched->run();
  ASSERT_EQ(f.out().planned.size(), 1u);
  auto first = f.out().planned.front();
  ASSERT_EQ(f.out().chunks.size(), 3u);
  ASSERT_TRUE(first->lease) << "the bucket runs in a pooled buffer";
  std::byte* buffer = first->lease.data();
  const std::size_t capacity = first->lease.capacity();
  // The data plane is "writing" the in-flight chunks: a pattern in the whole buffer.
  for (std::size_t i = 0; i < first->plan.bytes; ++i) buffer[i] = static_cast<std::byte>(i * 7 + 3);

  // 2. A window was agreed at the end of cycle 1: batches from cycle 2 wait for the switch.
  caf::anon_send(f.fusion, tunables_pending{2});
  caf::anon_send(f.fusion, f.batch(2, 4, 256u << 10));  // four 256 KiB tensors
  f.sched->run();
  EXPECT_EQ(f.out().planned.size(), 1u) << "the batch of cycle 2 was planned before its tunables were known";

  // 3. The switch: 128 KiB chunks, 512 KiB fusion threshold, 2 streams.
  tunables_switch sw{2, 2, 128u << 10, 512u << 10, 0, 500};
  caf::anon_send(f.fusion, sw);
  f.sched->run();
  ASSERT_EQ(f.out().planned.size(), 3u) << "1 MiB in buckets of at most 512 KiB";
  for (std::size_t i = 1; i < 3; ++i) {
    EXPECT_EQ(f.out().planned[i]->plan.bytes, 512u << 10);
    EXPECT_EQ(f.out().planned[i]->chunks, 4u) << "512 KiB in 128 KiB chunks";
  }
  ASSERT_EQ(f.out().chunks.size(), 3u + 8u);
  for (std::size_t i = 3; i < f.out().chunks.size(); ++i) EXPECT_EQ(f.out().chunks[i].bytes, 128u << 10);

  // 4. The bucket in flight: same buffer, same size, its bytes untouched, its chunks as planned.
  EXPECT_EQ(first->lease.data(), buffer);
  EXPECT_EQ(first->lease.capacity(), capacity);
  EXPECT_EQ(first->data, buffer);
  for (std::size_t i = 0; i < first->plan.bytes; ++i)
    ASSERT_EQ(buffer[i], static_cast<std::byte>(i * 7 + 3)) << "byte " << i << " of the in-flight bucket changed";
  for (std::size_t c = 0; c < 3; ++c) {
    EXPECT_EQ(f.out().chunks[c].bytes, 1u << 20);
    EXPECT_EQ(f.out().chunks[c].data, buffer + c * (1u << 20));
  }
  // The pool held one bucket's buffer: the new buckets did not get it (heap instead).
  for (std::size_t i = 1; i < 3; ++i) {
    const auto& job = *f.out().planned[i];
    EXPECT_FALSE(job.lease && job.lease.data() == buffer) << "bucket " << job.id << " took the in-flight buffer";
  }
}

TEST(fusion_switch, a_switch_for_another_cycle_is_refused_and_nothing_is_planned_early) {
  fusion_fixture f;
  caf::anon_send(f.fusion, tunables_pending{5});
  caf::anon_send(f.fusion, f.batch(4, 1, 4096));  // before the hold's cycle: planned at once
  caf::anon_send(f.fusion, f.batch(5, 1, 4096));  // held
  f.sched->run();
  EXPECT_EQ(f.out().planned.size(), 1u);
  caf::anon_send(f.fusion, tunables_switch{6, 1, 64u << 10, 1u << 20, 0, 1000});  // not the pending one
  f.sched->run();
  EXPECT_EQ(f.out().planned.size(), 1u);
  caf::anon_send(f.fusion, tunables_switch{5, 1, 64u << 10, 1u << 20, 0, 1000});
  f.sched->run();
  EXPECT_EQ(f.out().planned.size(), 2u);
}

}  // namespace
}  // namespace chorus
