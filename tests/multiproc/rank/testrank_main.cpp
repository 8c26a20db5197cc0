// chorus-testrank: the rank program of the multi-process tests. One mode per scenario:
//   collectives            every collective, exact results; prints "testrank: collectives exact"
//   few                    a few collectives up to 1 MiB, exact (for many ranks); prints "testrank: few exact"
//   allreduce-loop SECS    16 MiB allreduces until SECS pass; prints "iteration N"; on error
//                          prints "testrank error: <status>" and exits 3
//   accept-intruder        rank 0 waits until its acceptor refused a connection, then all ranks
//                          allreduce; prints "refused=N"
//   mismatch               rank r allreduces 100000 + r floats: every rank must fail
//   deaf-data SECS         rank 1's data plane stops reading for SECS, then a 64 MiB allreduce
//   intruder               not a rank, with a wrong CHORUS_JOB_SECRET: rank 0's store must refuse
//                          it ("intruder refused by the store"); then, with rank 0's data endpoint
//                          read using CHORUS_TEST_STORE_SECRET (as a port scan would find it), the
//                          data plane must refuse it too ("intruder refused: ...")
//   hier                   hierarchical allreduce and allgather checks (hier_checks.hpp,
//                          hier_gather_checks.hpp); prints "testrank: hier exact"
//   wire-shm EXPECT        fp16 through communicator::allreduce: exact or rounded (wire_shm.cpp)
//   hier-loop SECS         forced-hierarchical 4 MiB allreduces until SECS pass; prints "iteration N";
//                          CHORUS_TEST_KILL="R:I": rank R kills itself (SIGKILL) in iteration I's allreduce
//   hier-gather-loop SECS  the same with forced-hierarchical allgathers of 4 MiB per rank
//   small-loop SECS        4 KiB allreduces on the calling thread (small_checks.hpp); prints "iteration N";
//                          CHORUS_TEST_KILL="R:I": rank R kills itself instead of starting iteration I
//   small-mismatch         rank r allreduces 1024 + 256 r floats on the calling thread: every rank must fail
// CHORUS_TEST_HOSTS="2,1" fakes hosts for any mode (hier_checks.hpp: apply_test_hosts).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "runtime/collectives/communicator.hpp"
#include "runtime/env/process_env.hpp"
#include "runtime/transport/tcp/socket_util.hpp"
#include "runtime/wire/handshake.hpp"
#include "tests/multiproc/rank/collective_checks.hpp"
#include "tests/multiproc/rank/small_checks.hpp"
#include "tests/multiproc/rank/hier_checks.hpp"
#include "tests/multiproc/rank/hier_gather_checks.hpp"

using namespace chorus;

#ifdef CHORUS_WITH_PIPELINE
namespace chorus::testrank {
// The actor pipeline's scenarios (tests/multiproc/rank/pipeline_modes.cpp): "pipeline-*".
int run_pipeline_mode(const std::string& mode, int argc, char** argv);
// pipeline-scatter SEED: reducescatter and alltoall (tests/multiproc/rank/pipeline_scatter.cpp).
int run_pipeline_scatter(int argc, char** argv);
// pipeline-priority: a late tensor of larger priority overtakes a big one (pipeline_priority.cpp).
int run_pipeline_priority(int argc, char** argv);
// pipeline-wire SEED: compression and the NaN/Inf check (tests/multiproc/rank/pipeline_wire.cpp).
int run_pipeline_wire(int argc, char** argv);
// pipeline-wire-shm EXPECT: fp16 among ranks on shared memory (tests/multiproc/rank/pipeline_wire_shm.cpp).
int run_pipeline_wire_shm(int argc, char** argv);
// pipeline-join: Horovod's join with uneven steps (tests/multiproc/rank/pipeline_join.cpp).
int run_pipeline_join(int argc, char** argv);
// pipeline-kill-loop SECS: ops in flight until a rank is killed (tests/multiproc/rank/pipeline_failure.cpp).
int run_pipeline_kill_loop(int argc, char** argv);
// pipeline-psets SEED, pipeline-psets-dynamic: process sets (tests/multiproc/rank/pipeline_psets.cpp).
int run_pipeline_psets(int argc, char** argv);
int run_pipeline_psets_dynamic(int argc, char** argv);
// pipeline-psets-c: process sets through the C API (tests/multiproc/rank/pipeline_psets_c.cpp).
int run_pipeline_psets_c(int argc, char** argv);
}  // namespace chorus::testrank
#endif
namespace chorus::testrank {
// wire-shm EXPECT: fp16 through communicator::allreduce (tests/multiproc/rank/wire_shm.cpp).
int run_wire_shm(communicator& c, int argc, char** argv);
}  // namespace chorus::testrank

namespace {

int fail(const status& st) {
  std::printf("testrank error: %s\n", st.to_string().c_str());
  std::fflush(stdout);
  return 3;
}

// hier-loop and hier-gather-loop: `once` for `seconds`, printing each iteration; the rank that
// CHORUS_TEST_KILL names calls `die` (which never returns) at its iteration instead.
int hier_loop(communicator& c, int seconds, status (*once)(communicator&, std::size_t, int),
              void (*die)(communicator&, int)) {
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  const int kill_at = testrank::self_kill_iteration(c.rank());
  for (int i = 0; std::chrono::steady_clock::now() < end; ++i) {
    if (i == kill_at) die(c, i);
    auto st = once(c, 1u << 20, i);
    if (!st.ok()) return fail(st);
    std::printf("iteration %d\n", i);
    std::fflush(stdout);
  }
  return 0;
}

int run_intruder(process_env env) {
  env.rank = env.size - 1;
  // 1. Without the secret, rank 0's store lets it read nothing.
  {
    process_env wrong = env;
    wrong.rendezvous_timeout = std::chrono::seconds(5);
    auto rdv = rendezvous::open(wrong);
    if (rdv) {
      std::printf("intruder was NOT refused by the store\n");
      return 1;
    }
    if (rdv.error().code() != errc::auth) return fail(rdv.error());
    std::printf("intruder refused by the store: %s\n", rdv.error().message().c_str());
  }
  // 2. Rank 0's data endpoint, as a port scan would find it (read here with the real secret),
  //    then a handshake with a wrong secret.
  auto real = read_process_env([](const char* name) {
    return std::strcmp(name, "CHORUS_JOB_SECRET") == 0 ? std::getenv("CHORUS_TEST_STORE_SECRET") : std::getenv(name);
  });
  if (!real) return fail(real.error());
  real->rank = env.rank;
  auto rdv = rendezvous::open(*real);
  if (!rdv) return fail(rdv.error());
  auto ep_text = (*rdv)->get("data/0", std::chrono::seconds(20));
  if (!ep_text) return fail(ep_text.error());
  auto ep = tcp::parse_endpoint(*ep_text);
  if (!ep) return fail(ep.error());
  auto deadline = tcp::clock::now() + std::chrono::seconds(10);
  // It even knows this attempt's session id (frames with the job id alone are dropped before
  // any handshake), so what stops it is the MAC.
  env.job_id = (*rdv)->session_id();
  auto fd = tcp::connect_to(*ep, deadline);
  if (!fd) return fail(fd.error());
  // A client that does not know the secret: it ignores the server's proof and sends its own,
  // made with the wrong secret, as an attacker would.
  wire::hello_msg hello{1, 0, wire::random_nonce()};
  wire::frame_header h;
  h.job_id = env.job_id;
  h.kind = wire::frame_kind::hello;
  if (auto st = tcp::send_frame(fd->get(), h, wire::encode(hello), deadline); !st.ok()) return fail(st);
  auto ch_frame = tcp::recv_frame(fd->get(), {env.job_id, 4096}, deadline);
  if (!ch_frame) return fail(ch_frame.error());
  auto ch = wire::decode_challenge(ch_frame->payload);
  if (!ch) return fail(ch.error());
  wire::transcript t{env.job_id, 1, ch->server_rank, 0, hello.client_nonce, ch->server_nonce};
  h.kind = wire::frame_kind::proof;
  auto bogus = wire::encode(wire::proof_msg{wire::client_mac("not-the-job-secret", t)});
  if (auto st = tcp::send_frame(fd->get(), h, bogus, deadline); !st.ok()) return fail(st);
  auto verdict = tcp::recv_frame(fd->get(), {env.job_id, 4096}, deadline);
  if (verdict && verdict->header.kind == wire::frame_kind::reject) {
    std::string reason(reinterpret_cast<const char*>(verdict->payload.data()), verdict->payload.size());
    std::printf("intruder refused: %s\n", reason.c_str());
    return 0;
  }
  std::printf("intruder was NOT refused\n");
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: chorus-testrank collectives|allreduce-loop SECS|accept-intruder|intruder\n");
    return 2;
  }
  std::string mode = argv[1];
  auto env = read_process_env();
  if (!env) return fail(env.error());
  if (mode == "intruder") return run_intruder(*env);
  testrank::apply_test_hosts(env->rank);
#ifdef CHORUS_WITH_PIPELINE
  // These modes call chorus::init(), which builds its own communicator.
  if (mode == "pipeline-scatter") return testrank::run_pipeline_scatter(argc, argv);
  if (mode == "pipeline-wire") return testrank::run_pipeline_wire(argc, argv);
  if (mode == "pipeline-priority") return testrank::run_pipeline_priority(argc, argv);
  if (mode == "pipeline-wire-shm") return testrank::run_pipeline_wire_shm(argc, argv);
  if (mode == "pipeline-join") return testrank::run_pipeline_join(argc, argv);
  if (mode == "pipeline-kill-loop") return testrank::run_pipeline_kill_loop(argc, argv);
  if (mode == "pipeline-psets") return testrank::run_pipeline_psets(argc, argv);
  if (mode == "pipeline-psets-dynamic") return testrank::run_pipeline_psets_dynamic(argc, argv);
  if (mode == "pipeline-psets-c") return testrank::run_pipeline_psets_c(argc, argv);
  if (mode.rfind("pipeline-", 0) == 0) return testrank::run_pipeline_mode(mode, argc, argv);
#endif

  auto comm = communicator::create(*env);
  if (!comm) return fail(comm.error());
  auto& c = **comm;

  if (mode == "collectives") {
    auto st = testrank::check_all_collectives(c);
    if (!st.ok()) return fail(st);
    auto shm = c.plane().wire().links();
    std::printf("testrank: collectives exact on rank %d of %d, %d streams, %d through shared memory "
                "(frames %llu, on TCP %llu)\n",
                c.rank(), c.size(), c.num_streams(), shm.shm_streams,
                static_cast<unsigned long long>(shm.shm_frames), static_cast<unsigned long long>(shm.shm_missed));
    return 0;
  }
  if (mode == "few") {
    auto st = testrank::check_few_collectives(c);
    if (!st.ok()) return fail(st);
    auto shm = c.plane().wire().links();
    std::printf("testrank: few exact on rank %d of %d, %d streams, %d through shared memory\n", c.rank(), c.size(),
                c.num_streams(), shm.shm_streams);
    return 0;
  }
  if (mode == "deaf-data" && argc >= 3) {
    // Rank 1's data plane stops reading for SECS (its I/O thread is kept busy) while its
    // control link keeps answering heartbeats; every rank then allreduces 64 MiB. The others
    // must fail naming rank 1 within CHORUS_PEER_TIMEOUT_SECONDS, not wait for it.
    const int secs = std::atoi(argv[2]);
    if (c.rank() == 1) c.plane().post([secs] { std::this_thread::sleep_for(std::chrono::seconds(secs)); });
    std::vector<float> buf(std::size_t{16} << 20, 1.0f);
    auto st = c.allreduce(buf.data(), buf.size(), dtype::f32, reduce_op::sum, allreduce_algorithm::ring);
    if (!st.ok()) return fail(st);
    std::printf("deaf-data: allreduce finished on rank %d\n", c.rank());
    return 0;
  }
  if (mode == "wire-shm") return testrank::run_wire_shm(c, argc, argv);
  if (mode == "hier") {
    auto st = testrank::check_hierarchical(c);
    if (st.ok()) st = testrank::check_hier_allgather(c);
    if (!st.ok()) return fail(st);
    std::printf("testrank: hier exact on rank %d of %d\n", c.rank(), c.size());
    return 0;
  }
  if (mode == "hier-loop" && argc >= 3)
    return hier_loop(c, std::atoi(argv[2]), testrank::hier_allreduce_once, testrank::die_during_allreduce);
  if (mode == "hier-gather-loop" && argc >= 3)
    return hier_loop(c, std::atoi(argv[2]), testrank::hier_allgather_once, testrank::die_during_allgather);
  if (mode == "allreduce-loop" && argc >= 3) {
    auto end = std::chrono::steady_clock::now() + std::chrono::seconds(std::atoi(argv[2]));
    for (int i = 0; std::chrono::steady_clock::now() < end; ++i) {
      auto st = testrank::allreduce_16mib_once(c, i);
      if (!st.ok()) return fail(st);
      std::printf("iteration %d\n", i);
      std::fflush(stdout);
    }
    return 0;
  }
  if (mode == "small-loop" && argc >= 3) {
    auto st = testrank::run_small_loop(c, std::atoi(argv[2]));
    if (!st.ok()) return fail(st);
    return 0;
  }
  if (mode == "small-mismatch") {
    auto st = testrank::run_small_mismatch(c);
    if (!st.ok()) return fail(st);
    std::printf("mismatch went unnoticed\n");
    return 0;
  }
  if (mode == "mismatch") {
    std::vector<float> buf(100000 + static_cast<std::size_t>(c.rank()), 1.0f);
    auto st = c.allreduce(buf.data(), buf.size(), dtype::f32, reduce_op::sum, allreduce_algorithm::ring);
    if (!st.ok()) return fail(st);
    std::printf("mismatch went unnoticed\n");
    return 0;
  }
  if (mode == "accept-intruder") {
    std::printf("ready\n");
    std::fflush(stdout);
    if (c.rank() == 0) {
      auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
      while (c.plane().wire().links().refused_connections == 0 && std::chrono::steady_clock::now() < end)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    auto st = testrank::allreduce_16mib_once(c, 1);
    if (!st.ok()) return fail(st);
    std::printf("refused=%d\n", c.plane().wire().links().refused_connections);
    return 0;
  }
  std::fprintf(stderr, "unknown mode '%s'\n", mode.c_str());
  return 2;
}
