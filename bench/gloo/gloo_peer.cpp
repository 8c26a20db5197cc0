// Gloo peer for chorus-bench: FileStore rendezvous, a full mesh of TCP pairs on 127.0.0.1,
// and Gloo's ring allreduce through the options API (gloo/allreduce.h).
//
// Which ring: this Gloo (0.0~git20220518, GLOO_VERSION 0.5.0) offers both the old
// gloo::AllreduceRing<T> class and the gloo::allreduce(AllreduceOptions) API. We use the
// options API with Algorithm::RING, the entry point PyTorch's ProcessGroupGloo calls: it is Gloo's
// bandwidth-optimal ring (reduce-scatter + allgather, 2(N-1)/N of the bytes per rank), while
// the old AllreduceRing passes the whole buffer around the ring N-1 times. The options API
// binds the user pointer with an UnboundBuffer per call (a pointer wrapper, no pair setup,
// no allocation of size count), so there is nothing per (pointer, count) worth caching.
#include "bench/gloo/gloo_peer.hpp"

#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <system_error>

#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include "runtime/core/log.hpp"

namespace chorus::bench {
namespace {

using reduce_fn = void (*)(void*, const void*, const void*, std::size_t);

// Runs one Gloo collective; a Gloo failure becomes one std::runtime_error with a breadcrumb.
template <class F>
void run_collective(const char* what, std::size_t count, int rank, int size, F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string("gloo ") + what + "(count=" + std::to_string(count) +
                             ") failed on rank " + std::to_string(rank) + " of " +
                             std::to_string(size) + ": " + e.what());
  }
}

// In-place float sum for Gloo's ring, which calls it as reduce(out, out, in, n): c == a, b apart.
// Gloo's own gloo::sum<float> is a plain loop that GCC at -O2 leaves scalar (vectorising it
// would need a run-time alias check), while Chorus' reductions compile at -O3. So that the
// bench measures Gloo's transport and ring rather than a compiler flag, the same element-wise
// sum is written here in 4-wide vectors; each block is loaded before it is stored, so c == a
// is safe.
void sum_f32(void* c_, const void* a_, const void* b_, std::size_t n) {
  using v4 = float __attribute__((vector_size(16)));
  auto* c = static_cast<float*>(c_);
  const auto* a = static_cast<const float*>(a_);
  const auto* b = static_cast<const float*>(b_);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    v4 a0, a1, b0, b1;
    std::memcpy(&a0, a + i, sizeof(v4));
    std::memcpy(&a1, a + i + 4, sizeof(v4));
    std::memcpy(&b0, b + i, sizeof(v4));
    std::memcpy(&b1, b + i + 4, sizeof(v4));
    a0 += b0;
    a1 += b1;
    std::memcpy(c + i, &a0, sizeof(v4));
    std::memcpy(c + i + 4, &a1, sizeof(v4));
  }
  for (; i < n; ++i) c[i] = a[i] + b[i];
}

template <class T>
void ring_allreduce(const std::shared_ptr<gloo::Context>& ctx, T* data, std::size_t count,
                    reduce_fn fn) {
  gloo::AllreduceOptions opts(ctx);
  opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
  opts.setOutput(data, count);  // no input set: the output is reduced in place
  opts.setReduceFunction(fn);
  gloo::allreduce(opts);
}

}  // namespace

std::unique_ptr<gloo_peer> gloo_peer::connect(int rank, int size, const std::string& store_dir,
                                              const std::string& host) {
  if (size < 1 || rank < 0 || rank >= size || store_dir.empty()) {
    CHORUS_LOG(error, "gloo_peer",
               "connect: bad arguments rank=" << rank << " size=" << size << " store_dir='"
                                              << store_dir
                                              << "' (expected 0 <= rank < size, non-empty dir)");
    return nullptr;
  }
  std::error_code ec;
  std::filesystem::create_directories(store_dir, ec);
  if (ec) {
    CHORUS_LOG(error, "gloo_peer", "connect: cannot create store_dir='" << store_dir << "' rank="
                                       << rank << ": " << ec.message());
    return nullptr;
  }
  try {
    gloo::rendezvous::FileStore store(store_dir);
    gloo::transport::tcp::attr attr(host.c_str());
    auto device = gloo::transport::tcp::CreateDevice(attr);
    auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
    context->connectFullMesh(store, device);
    CHORUS_LOG(info, "gloo_peer",
               "connected rank=" << rank << " size=" << size << " store_dir=" << store_dir);
    return std::unique_ptr<gloo_peer>(new gloo_peer(rank, size, std::move(context)));
  } catch (const std::exception& e) {
    CHORUS_LOG(error, "gloo_peer", "connect: rendezvous failed rank=" << rank << " size=" << size
                                       << " store_dir=" << store_dir << ": " << e.what());
    return nullptr;
  }
}

gloo_peer::gloo_peer(int rank, int size, std::shared_ptr<gloo::Context> context)
    : rank_(rank), size_(size), context_(std::move(context)) {}

gloo_peer::~gloo_peer() = default;

void gloo_peer::allreduce_sum(float* data, std::size_t count) {
  if (count == 0) return;
  run_collective("allreduce_sum", count, rank_, size_, [&] {
    ring_allreduce(context_, data, count, &sum_f32);
  });
}

void gloo_peer::allreduce_max(double* data, std::size_t count) {
  if (count == 0) return;
  run_collective("allreduce_max", count, rank_, size_, [&] {
    ring_allreduce(context_, data, count, static_cast<reduce_fn>(&gloo::max<double>));
  });
}

void gloo_peer::barrier() {
  run_collective("barrier", 0, rank_, size_, [&] {
    gloo::BarrierOptions opts(context_);
    gloo::barrier(opts);
  });
}

}  // namespace chorus::bench
