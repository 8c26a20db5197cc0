// The actors' threads under SCHED_BATCH (actors/thread_policy.hpp): the hook on a bare actor
// system, and a real pipeline with CHORUS_SCHEDULER_BATCH on and off, seen from a done callback
// (the producer calls it on an actor thread). The test's own thread keeps the default policy.
#include "actors/thread_policy.hpp"

#include <gtest/gtest.h>

#include <caf/all.hpp>

#include <atomic>
#include <chrono>

#include "tests/support/pipeline_job.hpp"

namespace chorus {
namespace {

using namespace std::chrono_literals;

/// The policy of the thread an actor of a system with (or without) the hook runs on.
bool actor_thread_is_batch(bool hook) {
  caf::actor_system_config cfg;
  cfg.set("scheduler.max-threads", std::size_t{1});
  cfg.set("logger.console-verbosity", caf::atom("quiet"));
  if (hook) cfg.add_thread_hook<batch_scheduling_hook>();
  caf::actor_system sys{cfg};
  auto probe = sys.spawn([]() -> caf::behavior {
    return {[](int) { return runs_batch_scheduled(); }};
  });
  bool out = false;
  caf::scoped_actor self{sys};
  self->request(probe, 10s, 0).receive([&](bool b) { out = b; }, [&](caf::error& e) { ADD_FAILURE() << sys.render(e); });
  self->send_exit(probe, caf::exit_reason::user_shutdown);
  return out;
}

TEST(thread_policy, the_hook_puts_every_actor_thread_under_sched_batch_and_leaves_the_caller_alone) {
  ASSERT_FALSE(runs_batch_scheduled()) << "the test must start under the default policy";
  EXPECT_TRUE(actor_thread_is_batch(true));
  EXPECT_FALSE(actor_thread_is_batch(false));
  EXPECT_FALSE(runs_batch_scheduled());
}

/// Whether a pipeline started with `batch` calls an op back on a SCHED_BATCH thread.
bool callback_thread_is_batch(bool batch) {
  pipeline_options o;
  o.scheduler_batch = batch;
  auto job = testing::start_job(1, o);
  EXPECT_TRUE(job[0].pipe);
  if (!job[0].pipe) return false;
  std::atomic<bool> seen{false};
  testing::waiter w;
  float x = 1;
  op_request r;
  r.spec = testing::make("policy", collective_kind::allreduce, dtype::f32, {1});
  r.input = r.output = &x;
  r.done = [&, cb = w.callback()](const status& st, std::vector<std::byte> g, std::vector<int64_t> d) {
    seen = runs_batch_scheduled();
    cb(st, std::move(g), std::move(d));
  };
  job[0].pipe->enqueue(std::move(r));
  EXPECT_TRUE(w.wait());
  EXPECT_TRUE(w.result.ok()) << w.result.to_string();
  testing::stop_job(job);
  return seen;
}

TEST(thread_policy, a_pipeline_runs_its_actors_under_sched_batch_unless_told_not_to) {
  EXPECT_TRUE(callback_thread_is_batch(true));
  EXPECT_FALSE(callback_thread_is_batch(false));
  EXPECT_FALSE(runs_batch_scheduled());
}

}  // namespace
}  // namespace chorus
