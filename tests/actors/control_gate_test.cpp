// The control gate and its seal checks: only messages sealed with the job's key, addressed to
// this rank, from another rank of the job and not seen before reach the negotiator; everything
// else (forged, altered, replayed, misaddressed, unsealed, and exit or down messages that would
// stop an ordinary actor) is refused and counted. Under CAF's test coordinator, with a sink
// standing in for the negotiator.
#include "actors/control_gate.hpp"
#include "tests/actors/class_actor.hpp"

#include <gtest/gtest.h>

#include <caf/scheduler/test_coordinator.hpp>

#include <string>
#include <vector>

namespace chorus {
namespace {

wire::mac key_of(const std::string& secret) { return wire::control_key(secret, 0x1234); }

std::vector<uint8_t> bytes(const std::string& s) { return {s.begin(), s.end()}; }

// ---- control_verifier ----------------------------------------------------------------------

TEST(control_verifier, accepts_what_the_sealer_of_a_peer_made) {
  auto key = key_of("secret");
  control_sealer from1(1, 3, key), from2(2, 3, key);
  control_verifier at0(0, 3, key);
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(at0.check(from1.make(0, control_kind::gossip, bytes("g" + std::to_string(i)))).ok());
    EXPECT_TRUE(at0.check(from2.make(0, control_kind::gone, bytes("why"), 1)).ok());
  }
}

TEST(control_verifier, refuses_a_seal_made_with_another_secret_or_job) {
  control_verifier at0(0, 2, key_of("secret"));
  control_sealer wrong_secret(1, 2, key_of("secret2")), wrong_job(1, 2, wire::control_key("secret", 0x1235));
  auto st = at0.check(wrong_secret.make(0, control_kind::gossip, bytes("x")));
  EXPECT_EQ(st.code(), errc::auth);
  EXPECT_NE(st.message().find("rank 1"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("wrong seal"), std::string::npos) << st.message();
  EXPECT_FALSE(at0.check(wrong_job.make(0, control_kind::gossip, bytes("x"))).ok());
}

TEST(control_verifier, refuses_any_altered_field) {
  auto key = key_of("secret");
  control_sealer from1(1, 3, key);
  auto good = from1.make(0, control_kind::gone, bytes("rank 2 left"), 2);
  std::vector<sealed_control> altered(6, good);
  altered[0].data[0] ^= 1;
  altered[1].kind = control_kind::gossip;
  altered[2].origin = 1;
  altered[3].counter += 1;
  altered[4].from = 2;
  altered[5].tag[31] ^= 1;
  for (std::size_t i = 0; i < altered.size(); ++i) {
    control_verifier at0(0, 3, key);
    EXPECT_EQ(at0.check(altered[i]).code(), errc::auth) << "alteration " << i;
  }
  control_verifier at0(0, 3, key);
  EXPECT_TRUE(at0.check(good).ok());
}

TEST(control_verifier, refuses_replays_and_reordering) {
  auto key = key_of("secret");
  control_sealer from1(1, 2, key);
  control_verifier at0(0, 2, key);
  auto first = from1.make(0, control_kind::gossip, bytes("a"));
  auto second = from1.make(0, control_kind::gossip, bytes("b"));
  EXPECT_TRUE(at0.check(first).ok());
  EXPECT_TRUE(at0.check(second).ok());
  auto replay = at0.check(second);
  EXPECT_EQ(replay.code(), errc::auth);
  EXPECT_NE(replay.message().find("replay"), std::string::npos) << replay.message();
  EXPECT_FALSE(at0.check(first).ok());
}

TEST(control_verifier, refuses_misaddressed_and_impossible_senders) {
  auto key = key_of("secret");
  control_verifier at0(0, 3, key);
  // Sealed for rank 2, delivered to rank 0.
  auto to2 = control_sealer(1, 3, key).make(2, control_kind::gossip, bytes("x"));
  EXPECT_NE(at0.check(to2).message().find("addressed to rank 2"), std::string::npos);
  // A sealer claiming to be rank 0 itself, or a rank the job does not have.
  EXPECT_FALSE(at0.check(control_sealer(0, 3, key).make(0, control_kind::gossip, bytes("x"))).ok());
  auto m = control_sealer(1, 3, key).make(0, control_kind::gossip, bytes("x"));
  m.from = 7;
  EXPECT_NE(at0.check(m).message().find("no such peer"), std::string::npos);
  m.from = -1;
  EXPECT_FALSE(at0.check(m).ok());
  auto short_tag = control_sealer(1, 3, key).make(0, control_kind::gossip, bytes("x"));
  short_tag.tag.resize(16);
  EXPECT_NE(at0.check(short_tag).message().find("16 bytes"), std::string::npos);
  auto unknown = control_sealer(1, 3, key).make(0, static_cast<control_kind>(9), bytes("x"));
  EXPECT_NE(at0.check(unknown).message().find("unknown kind"), std::string::npos);
}

// ---- control_gate --------------------------------------------------------------------------

struct sink_state {
  std::vector<std::string> got;  ///< what reached the "negotiator", in order
  std::vector<caf::exit_reason> downs;
};
caf::behavior sink_actor(caf::stateful_actor<sink_state>* self) {
  self->set_down_handler([=](caf::down_msg& dm) {
    self->state.downs.push_back(static_cast<caf::exit_reason>(dm.reason.code()));
  });
  self->set_default_handler([=](caf::scheduled_actor*, caf::message_view& x) -> caf::result<caf::message> {
    self->state.got.push_back("other:" + x.content().stringify());
    return caf::message{};
  });
  return {
      [=](const gossip_bytes& g) { self->state.got.push_back("gossip:" + std::string(g.data.begin(), g.data.end())); },
      [=](hello_atom, int rank, const caf::actor& who) {
        self->state.got.push_back("hello:" + std::to_string(rank) + (who ? ":gate" : ":none"));
      },
      [=](gone_atom, int origin, const std::string& why) {
        self->state.got.push_back("gone:" + std::to_string(origin) + ":" + why);
      },
      [=](caf::actor watch) { self->monitor(watch); },
  };
}

struct error_recorder : telemetry::observer {
  std::vector<std::string> kinds;  // the test coordinator runs everything on this thread
  void on_error(std::string_view kind, const status& e, telemetry::time_point) override {
    kinds.push_back(std::string(kind) + ":" + e.message());
  }
};

struct gate_fixture {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  caf::scheduler::test_coordinator* sched = nullptr;
  caf::actor sink;
  wire::mac key = key_of("the job secret");
  std::shared_ptr<control_gate> gate;
  std::shared_ptr<error_recorder> errors = std::make_shared<error_recorder>();

  gate_fixture() {
    register_types(cfg);
    cfg.set("scheduler.policy", caf::atom("testing"));
    sys = std::make_unique<caf::actor_system>(cfg);
    sched = &dynamic_cast<caf::scheduler::test_coordinator&>(sys->scheduler());
    sink = sys->spawn<::chorus::test::class_actor<sink_state, sink_actor>>();
    gate = control_gate::spawn(*sys, 0, 3, key, sink, errors);
    caf::anon_send(sink, gate->handle());  // the sink watches the gate
    sched->run();
  }
  ~gate_fixture() {
    gate->close();
    caf::anon_send_exit(sink, caf::exit_reason::user_shutdown);
    sched->run();
  }
  sink_state& state() {
    return dynamic_cast<caf::stateful_actor<sink_state>&>(*caf::actor_cast<caf::abstract_actor*>(sink)).state;
  }
};

TEST(control_gate, hands_sealed_messages_to_the_negotiator_in_order) {
  gate_fixture f;
  control_sealer from1(1, 3, f.key), from2(2, 3, f.key);
  // A peer's gate that exists and ends at once (a class: see tests/actors/class_actor.hpp).
  struct ended_peer final : caf::event_based_actor {
    using caf::event_based_actor::event_based_actor;
    caf::behavior make_behavior() override { return {}; }
  };
  auto peer_gate = f.sys->spawn<ended_peer>();
  caf::anon_send(f.gate->handle(), from2.make(0, control_kind::hello, {}), peer_gate);
  caf::anon_send(f.gate->handle(), from1.make(0, control_kind::gossip, bytes("c1")));
  caf::anon_send(f.gate->handle(), from2.make(0, control_kind::gossip, bytes("c2")));
  caf::anon_send(f.gate->handle(), from1.make(0, control_kind::gone, bytes("rank 2 left"), 2));
  f.sched->run();
  EXPECT_EQ(f.state().got, (std::vector<std::string>{"hello:2:gate", "gossip:c1", "gossip:c2", "gone:2:rank 2 left"}));
  EXPECT_EQ(f.gate->refused(), 0u);
  EXPECT_TRUE(f.errors->kinds.empty());
  caf::anon_send_exit(peer_gate, caf::exit_reason::user_shutdown);
  f.sched->run();
}

TEST(control_gate, refuses_everything_else_and_survives_a_forged_kill) {
  gate_fixture f;
  control_sealer from1(1, 3, f.key), intruder(1, 3, key_of("a guess"));
  const auto& g = f.gate->handle();
  // What an intruder that reached the control port could send.
  caf::anon_send(g, intruder.make(0, control_kind::gossip, bytes("forged")));
  caf::anon_send(g, gossip_bytes{bytes("unsealed")});
  caf::anon_send(g, stop_atom::value);
  caf::anon_send(g, hello_atom::value, 1, f.sink);
  caf::anon_send(g, gone_atom::value, 1, std::string("fake loss"));
  caf::anon_send(g, caf::down_msg{f.sink.address(), caf::exit_reason::kill});
  caf::anon_send_exit(g, caf::exit_reason::kill);
  auto replayed = from1.make(0, control_kind::gossip, bytes("once"));
  caf::anon_send(g, replayed);
  caf::anon_send(g, replayed);
  f.sched->run();
  EXPECT_EQ(f.state().got, (std::vector<std::string>{"gossip:once"}));
  EXPECT_EQ(f.gate->refused(), 8u);
  ASSERT_EQ(f.errors->kinds.size(), 8u) << "every refusal is an error event (chorus_errors_total{kind=\"auth\"})";
  for (auto& k : f.errors->kinds) EXPECT_EQ(k.rfind("auth:control plane: refused", 0), 0u) << k;
  EXPECT_TRUE(f.state().downs.empty()) << "a forged exit(kill) stopped the gate";
  // The gate still works, and close() is what stops it: watchers see a clean shutdown.
  caf::anon_send(g, from1.make(0, control_kind::gossip, bytes("after")));
  f.sched->run();
  EXPECT_EQ(f.state().got.back(), "gossip:after");
  f.gate->close();
  f.sched->run();
  ASSERT_EQ(f.state().downs.size(), 1u);
  EXPECT_EQ(f.state().downs[0], caf::exit_reason::user_shutdown);
  caf::anon_send(g, from1.make(0, control_kind::gossip, bytes("closed")));
  f.sched->run();
  EXPECT_EQ(f.state().got.back(), "gossip:after") << "a closed gate delivered";
}

}  // namespace
}  // namespace chorus
