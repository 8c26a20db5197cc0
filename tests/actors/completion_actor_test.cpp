// The completion actor under CAF's test coordinator: a bucket ends when its last chunk ends,
// fused buckets are unpacked into the ops' outputs chunk by chunk, every op ends exactly once (with the
// bucket's first error, naming tensor and rank, when a chunk failed), and the start window
// moves only when the oldest unfinished chunk ends.
#include "actors/completion_actor.hpp"
#include "tests/actors/class_actor.hpp"

#include <gtest/gtest.h>

#include <caf/scheduler/test_coordinator.hpp>

#include <cstring>

namespace chorus {
namespace {

struct sink_state {
  std::vector<op_finished> finished;
  std::vector<uint64_t> ended;
};
caf::behavior sink_actor(caf::stateful_actor<sink_state>* self) {
  return {[=](op_finished& f) { self->state.finished.push_back(std::move(f)); },
          [=](ops_finished& fs) {
            for (auto& f : fs.ops) self->state.finished.push_back(std::move(f));
          },
          [=](const chunk_ended& w) { self->state.ended.push_back(w.sequence); }};
}

struct completion_fixture {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  caf::scheduler::test_coordinator* sched = nullptr;
  caf::actor completion, sink;

  completion_fixture() {
    register_types(cfg);
    cfg.set("scheduler.policy", caf::atom("testing"));
    sys = std::make_unique<caf::actor_system>(cfg);
    sched = &dynamic_cast<caf::scheduler::test_coordinator&>(sys->scheduler());
    completion = sys->spawn(completion_actor, completion_config{2, 3});
    sink = sys->spawn<::chorus::test::class_actor<sink_state, sink_actor>>();
    caf::anon_send(completion, completion_wiring{sink, sink, {}, nullptr});
    sched->run();
  }
  ~completion_fixture() {
    caf::anon_send_exit(completion, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(sink, caf::exit_reason::user_shutdown);
    sched->run();
  }
  sink_state& out() {
    return dynamic_cast<caf::stateful_actor<sink_state>&>(*caf::actor_cast<caf::abstract_actor*>(sink)).state;
  }
  void done(uint64_t seq, uint64_t bucket, status st = {}) {
    caf::anon_send(completion, chunk_done{seq, bucket, 0, std::move(st)});
    sched->run();
  }
};

/// A fused bucket of two f32 tensors at offsets 0 and 64, cut into `chunks` chunks.
std::shared_ptr<bucket_job> fused_job(uint64_t id, uint64_t first, uint32_t chunks, std::vector<float>& a,
                                      std::vector<float>& b) {
  auto job = std::make_shared<bucket_job>();
  job->id = id;
  job->plan.kind = fusable_kind::allreduce;
  job->plan.members = {{0, 0, a.size() * 4}, {1, 64, b.size() * 4}};
  job->plan.bytes = 64 + b.size() * 4;
  for (auto* v : {&a, &b}) {
    op_ref o;
    o.handle = job->ops.size() + 10 * id;
    o.spec = tensor_spec{"t" + std::to_string(o.handle), collective_kind::allreduce, dtype::f32,
                         {static_cast<int64_t>(v->size())}, reduce_op::sum, -1, device_kind::cpu, 0};
    o.input = o.output = v->data();
    job->ops.push_back(o);
  }
  job->heap.assign(job->plan.bytes, std::byte{0});
  job->data = job->heap.data();
  job->first_sequence = first;
  job->chunks = chunks;
  std::size_t cut = (job->plan.bytes / chunks + 3) / 4 * 4;
  for (std::size_t at = 0; job->chunk_ranges.size() < chunks; at += cut)
    job->chunk_ranges.emplace_back(at, std::min(cut, job->plan.bytes - std::min(at, job->plan.bytes)));
  return job;
}

TEST(completion_actor, unpacks_each_chunk_and_ends_ops_after_the_last) {
  completion_fixture f;
  std::vector<float> a(10, 0.0f), b(5, 0.0f);
  auto job = fused_job(1, 100, 3, a, b);
  std::vector<float> result{1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  std::memcpy(job->data, result.data(), 40);
  std::memcpy(job->data + 64, result.data(), 20);
  caf::anon_send(f.completion, bucket_planned{job});
  f.done(102, 1);  // bytes [56, 84): all of b, at once
  EXPECT_EQ(b, std::vector<float>(result.begin(), result.begin() + 5));
  f.done(100, 1);
  EXPECT_TRUE(f.out().finished.empty());
  f.done(101, 1);
  ASSERT_EQ(f.out().finished.size(), 2u);
  for (auto& o : f.out().finished) EXPECT_TRUE(o.result.ok()) << o.result.to_string();
  EXPECT_EQ(a, result);
  EXPECT_EQ(b, std::vector<float>(result.begin(), result.begin() + 5));
  // Fusion hears of every end, in the order the chunks ended (its start window).
  EXPECT_EQ(f.out().ended, (std::vector<uint64_t>{102, 100, 101}));
}

TEST(completion_actor, a_failed_chunk_ends_every_op_of_its_bucket_once_with_the_error) {
  completion_fixture f;
  std::vector<float> a(10, 0.0f), b(5, 0.0f), c(3, 0.0f), d(3, 0.0f);
  caf::anon_send(f.completion, bucket_planned{fused_job(1, 0, 2, a, b)});
  caf::anon_send(f.completion, bucket_planned{fused_job(2, 2, 1, c, d)});
  f.done(0, 1, {errc::connection_lost, "rank 0 closed the connection"});
  f.done(1, 1, {errc::protocol, "a second, later error"});
  f.done(2, 2);
  auto& fin = f.out().finished;
  ASSERT_EQ(fin.size(), 4u);
  std::map<uint64_t, int> per_handle;
  for (auto& o : fin) ++per_handle[o.handle];
  for (auto& [h, n] : per_handle) EXPECT_EQ(n, 1) << "handle " << h;
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(fin[i].result.code(), errc::connection_lost);
    EXPECT_EQ(fin[i].result.message(), "allreduce('t1" + std::to_string(i) + "') on rank 2: rank 0 closed the connection");
  }
  EXPECT_TRUE(fin[2].result.ok());
  EXPECT_TRUE(fin[3].result.ok());
  EXPECT_EQ(b, std::vector<float>(5, 0.0f)) << "chunks after the first error are not unpacked";
}

TEST(completion_actor, a_duplicate_chunk_end_is_ignored) {
  completion_fixture f;
  std::vector<float> a(1), b(1);
  caf::anon_send(f.completion, bucket_planned{fused_job(1, 0, 2, a, b)});
  f.done(0, 1);
  f.done(0, 1);
  EXPECT_TRUE(f.out().finished.empty());
  f.done(1, 1);
  EXPECT_EQ(f.out().finished.size(), 2u);
}

}  // namespace
}  // namespace chorus
