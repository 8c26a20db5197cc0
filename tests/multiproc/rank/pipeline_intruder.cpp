// chorus-testrank modes for an intruder on the control link (tests/multiproc/pipeline_intruder_test.cpp):
//   pipeline-ctrl-job GOFILE   a rank: allreduces (exact) until GOFILE exists on any rank (agreed
//                              by a max-allreduce each step, so every rank stops at the same
//                              step), then 20 more; prints "ready" once initialised and
//                              "ctrl-job: N ops exact while attacked" at the end
//   pipeline-ctrl-intruder     not a rank, with a wrong CHORUS_JOB_SECRET: refused by rank 0's
//                              store ("intruder refused by the store"); then reads rank 0's
//                              endpoint with CHORUS_TEST_STORE_SECRET (as a port scan would find
//                              it), where the control link's connections arrive with the data
//                              plane's, and claims rank 1's control connection there with a
//                              proof made without the secret. Prints "intruder refused on the
//                              control link: <reason>" (exit 0), else exit 1.
// Exit codes: 0 pass, 1 wrong result or the intruder was let in, 2 usage, 3 an operation failed.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <sys/stat.h>

#include "chorus/chorus.hpp"
#include "runtime/config/config.hpp"
#include "runtime/env/process_env.hpp"
#include "runtime/rendezvous/rendezvous.hpp"
#include "runtime/transport/tcp/socket_util.hpp"
#include "runtime/wire/handshake.hpp"

namespace chorus::testrank {

/// In pipeline_modes.cpp: prints "testrank error: <st>", shuts down, returns 3.
int fail(const status& st);

namespace {

using namespace std::chrono_literals;

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

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
  // Rank 0's endpoint, as a port scan would find it (read here with the real secret). The
  // control link's connections arrive there too, each one stream past the data streams.
  auto real = read_process_env([](const char* name) {
    return std::strcmp(name, "CHORUS_JOB_SECRET") == 0 ? std::getenv("CHORUS_TEST_STORE_SECRET") : std::getenv(name);
  });
  if (!real) return fail(real.error());
  real->rank = env->rank;
  auto rdv = rendezvous::open(*real);
  if (!rdv) return fail(rdv.error());
  auto ep_text = (*rdv)->get("data/0", std::chrono::seconds(20));
  if (!ep_text) return fail(ep_text.error());
  auto ep = tcp::parse_endpoint(*ep_text);
  if (!ep) return fail(ep.error());
  auto cfg = read_config();
  if (!cfg) return fail(cfg.error());
  const auto control_stream = static_cast<uint32_t>(cfg->transport.num_streams);
  // It even knows this attempt's session id (frames with the job id alone are dropped before
  // any handshake), so what stops it is the MAC.
  const uint64_t job_id = (*rdv)->session_id();
  auto deadline = tcp::clock::now() + std::chrono::seconds(10);
  auto fd = tcp::connect_to(*ep, deadline);
  if (!fd) return fail(fd.error());
  // A client that does not know the secret: it ignores the server's proof and sends its own,
  // made with the wrong secret, as an attacker would.
  wire::hello_msg hello{1, control_stream, wire::random_nonce()};
  wire::frame_header h;
  h.job_id = job_id;
  h.kind = wire::frame_kind::hello;
  if (auto st = tcp::send_frame(fd->get(), h, wire::encode(hello), deadline); !st.ok()) return fail(st);
  auto ch_frame = tcp::recv_frame(fd->get(), {job_id, 4096}, deadline);
  if (!ch_frame) return fail(ch_frame.error());
  auto ch = wire::decode_challenge(ch_frame->payload);
  if (!ch) return fail(ch.error());
  wire::transcript t{job_id, 1, ch->server_rank, control_stream, hello.client_nonce, ch->server_nonce};
  h.kind = wire::frame_kind::proof;
  auto bogus = wire::encode(wire::proof_msg{wire::client_mac("not-the-job-secret", t)});
  if (auto st = tcp::send_frame(fd->get(), h, bogus, deadline); !st.ok()) return fail(st);
  auto verdict = tcp::recv_frame(fd->get(), {job_id, 4096}, deadline);
  if (verdict && verdict->header.kind == wire::frame_kind::reject) {
    std::string reason(reinterpret_cast<const char*>(verdict->payload.data()), verdict->payload.size());
    std::printf("intruder refused on the control link: %s\n", reason.c_str());
    std::fflush(stdout);
    return 0;
  }
  std::printf("intruder was NOT refused on the control link\n");
  std::fflush(stdout);
  return 1;
}

}  // namespace chorus::testrank
