// The producer under CAF's test coordinator, with a sink standing in for the negotiator:
// refusals at the boundary, the allgather spec the negotiator sees, exactly-once done calls,
// and the shutdown drain.
#include "actors/producer_actor.hpp"
#include "tests/actors/class_actor.hpp"

#include <gtest/gtest.h>

#include <caf/scheduler/test_coordinator.hpp>

#include <map>

namespace chorus {
namespace {

using namespace std::chrono_literals;

struct sink_state {
  std::vector<tensor_ready> ready;
};
caf::behavior sink_actor(caf::stateful_actor<sink_state>* self) {
  return {[=](const tensor_ready& t) { self->state.ready.push_back(t); }};
}

struct producer_fixture {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  caf::scheduler::test_coordinator* sched = nullptr;
  caf::actor producer, sink;
  std::map<std::string, std::vector<status>> calls;  // every done call, by name
  std::vector<float> buf = std::vector<float>(64, 1.0f);

  producer_fixture() {
    register_types(cfg);
    cfg.set("scheduler.policy", caf::atom("testing"));
    sys = std::make_unique<caf::actor_system>(cfg);
    sched = &dynamic_cast<caf::scheduler::test_coordinator&>(sys->scheduler());
    producer = sys->spawn(producer_actor, producer_config{1, 4});
    sink = sys->spawn<::chorus::test::class_actor<sink_state, sink_actor>>();
    caf::anon_send(producer, producer_wiring{sink, nullptr});
    sched->run();
  }
  ~producer_fixture() {
    caf::anon_send_exit(producer, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(sink, caf::exit_reason::user_shutdown);
    sched->run();
  }
  void enqueue_all(std::vector<tensor_spec> specs) {
    ops_enqueued e;
    for (auto& s : specs) e.requests.push_back(std::make_shared<op_request>(request(std::move(s))));
    caf::anon_send(producer, std::move(e));
    sched->run();
  }
  op_request request(tensor_spec s) {
    op_request r;
    r.spec = s;
    r.input = buf.data();
    r.output = s.kind == collective_kind::allgather ? nullptr : buf.data();
    r.done = [this, name = s.name](const status& st, std::vector<std::byte>, std::vector<int64_t>) {
      calls[name].push_back(st);
    };
    return r;
  }
  void enqueue(tensor_spec s) {
    caf::anon_send(producer, op_enqueued{std::make_shared<op_request>(request(std::move(s))), {}});
    sched->run();
  }
  std::vector<tensor_ready>& ready() {
    return dynamic_cast<caf::stateful_actor<sink_state>&>(*caf::actor_cast<caf::abstract_actor*>(sink)).state.ready;
  }
};

tensor_spec make(std::string name, collective_kind k, std::vector<int64_t> shape, device_kind d = device_kind::cpu) {
  return tensor_spec{std::move(name), k, dtype::f32, std::move(shape), reduce_op::sum, -1, d, 0};
}

TEST(producer_actor, ops_enqueued_together_are_admitted_in_order_and_refused_one_by_one) {
  producer_fixture f;
  f.enqueue(make("held", collective_kind::allreduce, {4}));
  f.enqueue_all({make("l.weight", collective_kind::allreduce, {4}), make("held", collective_kind::allreduce, {4}),
                 make("l.bias", collective_kind::allreduce, {2})});
  // The pending name is refused alone; its neighbours reach the negotiator, in order.
  ASSERT_EQ(f.calls["held"].size(), 1u);
  EXPECT_EQ(f.calls["held"][0].code(), errc::invalid_argument);
  ASSERT_EQ(f.ready().size(), 3u);
  EXPECT_EQ(f.ready()[0].op.spec.name, "held");
  EXPECT_EQ(f.ready()[1].op.spec.name, "l.weight");
  EXPECT_EQ(f.ready()[2].op.spec.name, "l.bias");
  EXPECT_EQ(f.calls.count("l.weight"), 0u);  // pending, not ended
}

TEST(producer_actor, refuses_what_the_pipeline_cannot_run_naming_tensor_and_rank) {
  producer_fixture f;
  f.enqueue(make("a2a", collective_kind::alltoall, {4}));
  f.enqueue(make("gpu", collective_kind::allgather, {4}, device_kind::cuda));  // no device path
  f.enqueue(make("dup", collective_kind::allreduce, {4}));
  f.enqueue(make("dup", collective_kind::allreduce, {4}));
  ASSERT_EQ(f.calls["a2a"].size(), 1u);
  EXPECT_EQ(f.calls["a2a"][0].code(), errc::invalid_argument);
  EXPECT_NE(f.calls["a2a"][0].message().find("alltoall('a2a') on rank 1"), std::string::npos);
  ASSERT_EQ(f.calls["gpu"].size(), 1u);
  EXPECT_NE(f.calls["gpu"][0].message().find("CUDA"), std::string::npos);
  ASSERT_EQ(f.calls["dup"].size(), 1u);  // the second is refused; the first is pending
  EXPECT_NE(f.calls["dup"][0].message().find("already pending on rank 1"), std::string::npos);
  ASSERT_EQ(f.ready().size(), 1u);
  EXPECT_EQ(f.ready()[0].op.spec.name, "dup");
}

TEST(producer_actor, allgather_is_negotiated_without_its_first_dimension) {
  producer_fixture f;
  f.enqueue(make("rows", collective_kind::allgather, {5, 3}));
  f.enqueue(make("scalar", collective_kind::allgather, {}));
  ASSERT_EQ(f.ready().size(), 2u);
  EXPECT_EQ(f.ready()[0].op.spec.shape, (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(f.ready()[0].op.first_dim, 5);
  EXPECT_EQ(f.ready()[1].op.spec.shape, (std::vector<int64_t>{0}));
  EXPECT_EQ(f.ready()[1].op.first_dim, 1);
}

TEST(producer_actor, done_runs_exactly_once_per_op) {
  producer_fixture f;
  f.enqueue(make("x", collective_kind::allreduce, {4}));
  auto h = f.ready().at(0).op.handle;
  caf::anon_send(f.producer, op_finished{h, {}, {}, {}});
  caf::anon_send(f.producer, op_finished{h, {errc::internal, "late duplicate"}, {}, {}});
  f.sched->run();
  ASSERT_EQ(f.calls["x"].size(), 1u);
  EXPECT_TRUE(f.calls["x"][0].ok());
  f.enqueue(make("x", collective_kind::allreduce, {4}));  // the name is free again
  EXPECT_EQ(f.ready().size(), 2u);
}

TEST(producer_actor, drain_ends_what_is_left_after_the_grace) {
  producer_fixture f;
  f.enqueue(make("stuck", collective_kind::allreduce, {4}));
  bool replied = false;
  f.sys->spawn(
      [&replied](caf::event_based_actor* self, caf::actor p) {
        self->request(p, caf::infinite, drain_atom::value, int64_t{500}).then([&replied](drain_atom) { replied = true; });
      },
      f.producer);
  f.sched->run();
  f.enqueue(make("late", collective_kind::allreduce, {4}));
  ASSERT_EQ(f.calls["late"].size(), 1u);
  EXPECT_EQ(f.calls["late"][0].code(), errc::shutdown);
  EXPECT_TRUE(f.calls["stuck"].empty());
  f.sched->advance_time(500ms);
  f.sched->run();
  ASSERT_EQ(f.calls["stuck"].size(), 1u);
  EXPECT_EQ(f.calls["stuck"][0].code(), errc::shutdown);
  EXPECT_NE(f.calls["stuck"][0].message().find("shut down with 'stuck' pending"), std::string::npos);
  EXPECT_TRUE(replied);
}

}  // namespace
}  // namespace chorus
