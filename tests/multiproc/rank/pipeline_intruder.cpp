// chorus-testrank modes for an intruder on the control plane (tests/multiproc/pipeline_intruder_test.cpp):
//   pipeline-ctrl-job GOFILE   a rank: allreduces (exact) until GOFILE exists on any rank (agreed
//                              by a max-allreduce each step, so every rank stops at the same
//                              step), then 20 more; prints "ready" once initialised and
//                              "ctrl-job: N ops exact while attacked" at the end
//   pipeline-ctrl-intruder     not a rank, with a wrong CHORUS_JOB_SECRET: refused by rank 0's
//                              store ("intruder refused by the store"); then reads rank 0's
//                              control endpoint with CHORUS_TEST_STORE_SECRET (as a port scan
//                              would find it), connects with its own CAF system and sends what an intruder
//                              without the job secret could: forged seals, unsealed protocol
//                              messages, a stop, a fake peer loss, exit(kill). Prints
//                              "intruder sent N messages", then "gate still up" when rank 0's
//                              control gate did not go down within 1 s (exit 0), else exit 1.
// Exit codes: 0 pass, 1 wrong result or the gate went down, 2 usage, 3 an operation failed.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <sys/stat.h>

#include "actors/control_gate.hpp"
#include "actors/control_plane.hpp"
#include "actors/protocol.hpp"
#include "bindings/cpp/chorus.hpp"
#include "runtime/env/process_env.hpp"
#include "runtime/rendezvous/rendezvous.hpp"

namespace chorus::testrank {

/// In pipeline_modes.cpp: prints "testrank error: <st>", shuts down, returns 3.
int fail(const status& st);

namespace {

using namespace std::chrono_literals;

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

// The sender the intruder's messages claim. A class: CAF 0.17 starts a function actor spawned
// without arguments through a null std::shared_ptr<std::tuple<>> (undefined behaviour).
class decoy_actor final : public caf::event_based_actor {
 public:
  using caf::event_based_actor::event_based_actor;
  caf::behavior make_behavior() override { return {[](int) {}}; }
};

}  // namespace

/// pipeline-ctrl-job GOFILE
int run_ctrl_job(int argc, char** argv) {
  if (argc < 3) return 2;
  const std::string go = argv[2];
  if (auto st = init(); !st.ok()) return fail(st);
  const int rank = chorus::rank(), size = chorus::size();
  std::printf("ready\n");
  std::fflush(stdout);
  int ops = 0, after_go = -1;
  auto deadline = std::chrono::steady_clock::now() + 60s;
  for (int step = 0; after_go < 20; ++step) {
    if (std::chrono::steady_clock::now() > deadline) {
      std::printf("ctrl-job: no go file after 60 s\n");
      return fail({errc::timeout, "no go file"});
    }
    std::vector<float> g(64, static_cast<float>(rank + 1 + step % 5));
    float seen = exists(go) ? 1.0f : 0.0f;
    auto h1 = allreduce_async("ctrl.grad", {g.data(), dtype::f32, {64}}, reduce_op::sum);
    auto h2 = allreduce_async("ctrl.go", {&seen, dtype::f32, {}}, reduce_op::max);
    if (auto st = h1.wait(30s); !st.ok()) return fail(st);
    if (auto st = h2.wait(30s); !st.ok()) return fail(st);
    float want = static_cast<float>(size * (size + 1) / 2 + size * (step % 5));
    for (float x : g)
      if (x != want) {
        std::printf("ctrl-job WRONG at step %d: %g, expected %g\n", step, x, want);
        std::fflush(stdout);
        shutdown();
        return 1;
      }
    ops += 2;
    if (after_go >= 0 || seen > 0) ++after_go;
    std::this_thread::sleep_for(5ms);
  }
  std::printf("ctrl-job: %d ops exact while attacked\n", ops);
  std::fflush(stdout);
  shutdown();
  return 0;
}

/// pipeline-ctrl-intruder
int run_ctrl_intruder() {
  auto env = read_process_env();
  if (!env) return fail(env.error());
  env->rank = env->size - 1;  // a client of rank 0's store, as a rank would be
  {  // Without the secret, the store lets it read nothing.
    process_env wrong = *env;
    wrong.rendezvous_timeout = std::chrono::seconds(5);
    auto refused = rendezvous::open(wrong);
    if (refused) return fail({errc::internal, "intruder was NOT refused by the store"});
    if (refused.error().code() != errc::auth) return fail(refused.error());
    std::printf("intruder refused by the store\n");
  }
  // Rank 0's control endpoint, as a port scan would find it (read here with the real secret).
  auto real = read_process_env([](const char* name) {
    return std::strcmp(name, "CHORUS_JOB_SECRET") == 0 ? std::getenv("CHORUS_TEST_STORE_SECRET") : std::getenv(name);
  });
  if (!real) return fail(real.error());
  real->rank = env->rank;
  auto rdv = rendezvous::open(*real);
  if (!rdv) return fail(rdv.error());
  auto ep = (*rdv)->get("ctrl/0", std::chrono::seconds(20));
  if (!ep) return fail(ep.error());
  std::string host;
  uint16_t port = 0;
  if (!split_host_port(*ep, host, port)) return fail({errc::rendezvous, "bad ctrl/0: " + *ep});

  caf::actor_system_config cfg;
  cfg.load<caf::io::middleman>();
  register_types(cfg);
  cfg.set("logger.console-verbosity", caf::atom("quiet"));
  caf::actor_system sys{cfg};
  auto gate = sys.middleman().remote_actor(host, port);
  if (!gate) return fail({errc::connection_lost, "cannot reach rank 0's control port: " + sys.render(gate.error())});
  auto decoy = sys.spawn<decoy_actor>();
  control_sealer guess(1, env->size, wire::control_key("not-the-job-secret", env->job_id));
  int sent = 0;
  auto send = [&](auto&&... xs) {
    caf::anon_send(*gate, std::forward<decltype(xs)>(xs)...);
    ++sent;
  };
  send(guess.make(0, control_kind::gossip, {1, 2, 3, 4}));
  send(guess.make(0, control_kind::hello, {}), decoy);
  send(guess.make(0, control_kind::gone, {'x'}, 1));
  send(gossip_bytes{{0xde, 0xad, 0xbe, 0xef}});
  send(stop_atom::value);
  send(hello_atom::value, 1, decoy);
  send(gone_atom::value, 1, std::string("rank 1 left (forged)"));
  send(pipeline_wired{});
  caf::anon_send_exit(*gate, caf::exit_reason::kill);
  ++sent;
  std::printf("intruder sent %d messages\n", sent);
  std::fflush(stdout);

  caf::scoped_actor self{sys};
  self->monitor(*gate);
  bool down = false;
  self->receive([&](caf::down_msg&) { down = true; }, caf::after(std::chrono::seconds(1)) >> [] {});
  std::printf(down ? "gate went down\n" : "gate still up\n");
  std::fflush(stdout);
  caf::anon_send_exit(decoy, caf::exit_reason::user_shutdown);
  return down ? 1 : 0;
}

}  // namespace chorus::testrank
