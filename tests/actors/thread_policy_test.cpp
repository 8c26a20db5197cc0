// The actors' threads under SCHED_BATCH (actors/thread_policy.hpp): the hook on a bare actor
// system (its worker and its timer thread), and a real pipeline with CHORUS_SCHEDULER_BATCH on
// and off, seen from a done callback (the producer calls it on an actor thread). The test's own
// thread keeps the default policy. Skipped where the kernel or a sandbox refuses SCHED_BATCH.
#include "actors/thread_policy.hpp"

#include <gtest/gtest.h>

#include <caf/all.hpp>

#include <sched.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "tests/support/pipeline_job.hpp"

namespace chorus {
namespace {

using namespace std::chrono_literals;

/// Why SCHED_BATCH cannot be tested here, or empty: the hook cannot set it on a scratch thread
/// (a sandbox refuses it), or the test already runs under it (so "left alone" could not be
/// told from "changed").
std::string why_untestable() {
  if (runs_batch_scheduled()) return "the test itself runs under SCHED_BATCH (chrt -b?)";
  bool took = false;
  std::thread([&took] {
    batch_scheduling_hook{}.thread_started();
    took = runs_batch_scheduled();
  }).join();
  return took ? std::string() : "SCHED_BATCH is refused here (sched_setscheduler)";
}

/// The policy of the first thread of this process named `comm` (-1: none).
int policy_of_thread_named(const std::string& comm) {
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream f(task.path() / "comm");
    std::string name;
    std::getline(f, name);
    if (name == comm) return sched_getscheduler(std::stoi(task.path().filename().string()));
  }
  return -1;
}

/// The policy of the thread named `comm` once it is `want`, else after 2 s the last one seen
/// (-1: no such thread). The timer thread names itself and runs the hook as it starts, which
/// may be a moment after the system is up.
int settled_policy_of_thread_named(const std::string& comm, int want) {
  const auto until = std::chrono::steady_clock::now() + 2s;
  int got = policy_of_thread_named(comm);
  while (got != want && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(1ms);
    got = policy_of_thread_named(comm);
  }
  return got;
}

struct policies {
  bool worker = false;
  int clock = -1;  ///< the timer thread's policy
};

/// The policies of an actor system's worker (seen from an actor) and timer thread, with or
/// without the hook.
policies of_actor_system(bool hook) {
  caf::actor_system_config cfg;
  cfg.set("scheduler.max-threads", std::size_t{1});
  cfg.set("logger.console-verbosity", caf::atom("quiet"));
  if (hook) cfg.add_thread_hook<batch_scheduling_hook>();
  caf::actor_system sys{cfg};
  auto probe = sys.spawn([]() -> caf::behavior {
    return {[](int) { return runs_batch_scheduled(); }};
  });
  policies out;
  caf::scoped_actor self{sys};
  self->request(probe, 10s, 0).receive([&](bool b) { out.worker = b; },
                                       [&](caf::error& e) { ADD_FAILURE() << sys.render(e); });
  out.clock = settled_policy_of_thread_named("caf.clock", hook ? SCHED_BATCH : SCHED_OTHER);
  self->send_exit(probe, caf::exit_reason::user_shutdown);
  return out;
}

TEST(thread_policy, the_hook_puts_the_workers_and_the_timer_under_sched_batch_and_leaves_the_caller_alone) {
  if (auto why = why_untestable(); !why.empty()) GTEST_SKIP() << why;
  auto with = of_actor_system(true);
  EXPECT_TRUE(with.worker);
  EXPECT_EQ(with.clock, SCHED_BATCH) << "no caf.clock thread found, or not under SCHED_BATCH";
  auto without = of_actor_system(false);
  EXPECT_FALSE(without.worker);
  EXPECT_EQ(without.clock, SCHED_OTHER);
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
  if (auto why = why_untestable(); !why.empty()) GTEST_SKIP() << why;
  EXPECT_TRUE(callback_thread_is_batch(true));
  EXPECT_FALSE(callback_thread_is_batch(false));
  EXPECT_FALSE(runs_batch_scheduled());
}

}  // namespace
}  // namespace chorus
