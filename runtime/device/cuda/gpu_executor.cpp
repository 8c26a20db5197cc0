// The CUDA engine's thread: copies, ordered NCCL collectives, event polling (gpu_executor.hpp).
#include "runtime/device/cuda/gpu_executor.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

#include "runtime/core/log.hpp"
#if CHORUS_WITH_NCCL
#include "runtime/transport/nccl/nccl_communicator.hpp"
#else
namespace chorus {
class nccl_communicator {};  // never made without NCCL; complete for unique_ptr's destructor
}  // namespace chorus
#endif

namespace chorus::gpu {

namespace {
status cuda_error(const std::string& call, cudaError_t e) {
  return {errc::internal, call + ": " + cudaGetErrorString(e) + " (CUDA error " + std::to_string(static_cast<int>(e)) + ")"};
}
constexpr std::size_t pool_keep_bytes = std::size_t{2} << 30;  // pinned memory kept for reuse
}  // namespace

/// Pinned host blocks, reused by size: a released block goes back to the free list (up to
/// pool_keep_bytes), the rest are freed. Outlives the executor while blocks are out.
class pinned_pool : public std::enable_shared_from_this<pinned_pool> {
 public:
  ~pinned_pool() {
    for (auto& [bytes, p] : free_) cudaFreeHost(p);
  }
  result<std::shared_ptr<std::byte>> take(std::size_t bytes) {
    void* p = nullptr;
    std::size_t got = bytes;
    {
      std::lock_guard lk(mu_);
      auto it = free_.lower_bound(bytes);
      if (it != free_.end() && it->first <= 2 * bytes + (1u << 20)) {
        got = it->first;
        p = it->second;
        kept_ -= got;
        free_.erase(it);
      }
    }
    if (!p) {
      if (auto e = cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocPortable); e != cudaSuccess)
        return cuda_error("cudaHostAlloc(" + std::to_string(bytes) + " bytes of pinned staging memory)", e);
    }
    auto self = shared_from_this();
    return std::shared_ptr<std::byte>(static_cast<std::byte*>(p), [self, got](std::byte* b) { self->give(b, got); });
  }

 private:
  void give(std::byte* b, std::size_t bytes) {
    {
      std::lock_guard lk(mu_);
      if (kept_ + bytes <= pool_keep_bytes) {
        kept_ += bytes;
        free_.emplace(bytes, b);
        return;
      }
    }
    cudaFreeHost(b);
  }
  std::mutex mu_;
  std::multimap<std::size_t, void*> free_;
  std::size_t kept_ = 0;
};

executor::executor(options o) : opt_(std::move(o)), pool_(std::make_shared<pinned_pool>()) {
  thread_ = std::thread([this] { loop(); });
}

executor::~executor() { stop(); }

void executor::stop() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (!thread_.joinable()) return;
  if (thread_.get_id() == std::this_thread::get_id()) {
    thread_.detach();  // misuse (see the header); never terminate the process for it
    return;
  }
  thread_.join();
}

void executor::copy(void* dst, const void* src, std::size_t bytes, int device, std::shared_ptr<void> ready,
                    done_fn done) {
  {
    std::lock_guard lk(mu_);
    if (!stop_) {
      copies_.push_back({dst, src, bytes, device, std::move(ready), std::move(done)});
      cv_.notify_all();
      return;
    }
  }
  done({errc::shutdown, "the GPU executor has stopped"});
}

void executor::collective(uint64_t order, int device, nccl_call call, done_fn done) {
  {
    std::lock_guard lk(mu_);
    if (!stop_) {
      collectives_.emplace(order, nccl_task{device, std::move(call), std::move(done)});
      cv_.notify_all();
      return;
    }
  }
  done({errc::shutdown, "the GPU executor has stopped"});
}

void executor::skip(uint64_t order) {
  std::lock_guard lk(mu_);
  collectives_.emplace(order, nccl_task{-1, {}, {}, true});
  cv_.notify_all();
}

result<std::shared_ptr<std::byte>> executor::pinned(std::size_t bytes) { return pool_->take(bytes); }

status executor::use_device(int device) {
  if (device_ == device) return {};
  if (device_ >= 0)
    return {errc::invalid_argument, "every CUDA tensor of a rank must be on one device: got cuda:" +
                                        std::to_string(device) + " after cuda:" + std::to_string(device_)};
  if (auto e = cudaSetDevice(device); e != cudaSuccess) return cuda_error("cudaSetDevice(" + std::to_string(device) + ")", e);
  cudaStream_t a = nullptr, b = nullptr;
  if (auto e = cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking); e != cudaSuccess)
    return cuda_error("cudaStreamCreate", e);
  if (auto e = cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking); e != cudaSuccess) {
    cudaStreamDestroy(a);
    return cuda_error("cudaStreamCreate", e);
  }
  d2h_ = a;
  h2d_ = b;
  device_ = device;
  return {};
}

void executor::track(void* stream, done_fn& done, bool nccl, const std::string& what) {
  cudaEvent_t ev = nullptr;
  if (auto e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming); e != cudaSuccess)
    return done(cuda_error("cudaEventCreate", e));
  if (auto e = cudaEventRecord(ev, static_cast<cudaStream_t>(stream)); e != cudaSuccess) {
    cudaEventDestroy(ev);
    return done(cuda_error("cudaEventRecord", e));
  }
  running_.push_back({ev, std::move(done), nccl, std::chrono::steady_clock::now(), what});
}

void executor::start_copy(copy_task& t) {
  auto fail = [&](status st) { t.done(st); };
  if (auto st = use_device(t.device); !st.ok()) return fail(st);
  cudaPointerAttributes a{};
  bool to_host = cudaPointerGetAttributes(&a, t.dst) == cudaSuccess && a.type != cudaMemoryTypeDevice;
  (void)cudaGetLastError();
  auto stream = static_cast<cudaStream_t>(to_host ? d2h_ : h2d_);
  if (t.ready) {
    if (auto e = cudaStreamWaitEvent(stream, static_cast<cudaEvent_t>(t.ready.get()), 0); e != cudaSuccess)
      return fail(cuda_error("cudaStreamWaitEvent (the tensor's ready event)", e));
  }
  if (t.bytes) {
    if (auto e = cudaMemcpyAsync(t.dst, t.src, t.bytes, cudaMemcpyDefault, stream); e != cudaSuccess)
      return fail(cuda_error(std::string("cudaMemcpyAsync ") + (to_host ? "device to host" : "host to device") +
                                 " of " + std::to_string(t.bytes) + " bytes",
                             e));
  }
  track(stream, t.done, false, "copy");
}

void executor::start_collective(nccl_task& t) {
  auto fail = [&](status st) { t.done(st); };
#if CHORUS_WITH_NCCL
  if (auto st = use_device(t.device); !st.ok()) return fail(st);
  if (!nccl_broken_.ok()) return fail(nccl_broken_);
  if (!nccl_) {
    std::string mine;
    if (opt_.rank == 0) {
      auto id = nccl_communicator::make_unique_id();
      if (!id) return fail(nccl_broken_ = id.error());
      mine.assign(id->data(), id->size());
    }
    auto agreed = opt_.agree_id ? opt_.agree_id(mine) : result<std::string>(status{errc::internal, "no agree_id"});
    if (!agreed) return fail(nccl_broken_ = agreed.error());
    std::array<char, 128> id{};
    if (agreed->size() != id.size())
      return fail(nccl_broken_ = {errc::protocol, "the NCCL unique id from rank 0 has " + std::to_string(agreed->size()) +
                                                      " bytes, expected " + std::to_string(id.size())});
    std::memcpy(id.data(), agreed->data(), id.size());
    auto comm = nccl_communicator::create(opt_.rank, opt_.size, id, t.device);
    if (!comm) return fail(nccl_broken_ = comm.error());
    nccl_ = std::move(*comm);
  }
  auto stream = nccl_->stream();
  if (t.call.ready) {
    if (auto e = cudaStreamWaitEvent(stream, static_cast<cudaEvent_t>(t.call.ready.get()), 0); e != cudaSuccess)
      return fail(cuda_error("cudaStreamWaitEvent (the tensor's ready event)", e));
  }
  status st = t.call.what == nccl_call::kind::allreduce
                  ? nccl_->allreduce(t.call.buffer, t.call.count, t.call.type, t.call.op)
                  : nccl_->broadcast(t.call.buffer, t.call.count, t.call.type, t.call.root);
  if (!st.ok()) return fail(st);
  track(stream, t.done, true, t.call.name);
#else
  fail({errc::config, "this build of Chorus has no NCCL (CHORUS_WITH_NCCL is off); set CHORUS_GPU_OPERATIONS=host"});
#endif
}

void executor::poll() {
  const auto now = std::chrono::steady_clock::now();
  status nccl_error;
#if CHORUS_WITH_NCCL
  if (nccl_ && std::any_of(running_.begin(), running_.end(), [](const in_flight& f) { return f.nccl; }))
    nccl_error = nccl_->check_async();
#endif
  for (std::size_t i = 0; i < running_.size();) {
    auto& f = running_[i];
    auto ev = static_cast<cudaEvent_t>(f.event);
    cudaError_t q = cudaEventQuery(ev);
    status st;
    bool ended = true;
    if (q == cudaSuccess) {
    } else if (q != cudaErrorNotReady) {
      st = cuda_error("CUDA work of '" + f.what + "'", q);
    } else if (f.nccl && !nccl_error.ok()) {
      st = nccl_error;
    } else if (f.nccl && now - f.started > opt_.peer_timeout) {
      st = {errc::timeout, "the NCCL collective of '" + f.what + "' on rank " + std::to_string(opt_.rank) +
                               " ran longer than the peer timeout (" +
                               std::to_string(opt_.peer_timeout.count() / 1000) +
                               " s, CHORUS_PEER_TIMEOUT_SECONDS): a peer stopped taking part"};
#if CHORUS_WITH_NCCL
      nccl_->abort(st);
      nccl_error = st;
#endif
    } else {
      ended = false;
    }
    if (!ended) {
      ++i;
      continue;
    }
    if (f.nccl && !st.ok()) nccl_broken_ = st;
    auto done = std::move(f.done);
    cudaEventDestroy(ev);
    running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(i));
    done(st);
  }
}

void executor::fail_all(const status& st) {
  std::deque<copy_task> copies;
  std::map<uint64_t, nccl_task> colls;
  {
    std::lock_guard lk(mu_);
    copies.swap(copies_);
    colls.swap(collectives_);
  }
  for (auto& c : copies) c.done(st);
  for (auto& [o, c] : colls)
    if (c.done) c.done(st);
  for (auto& f : running_) f.done(st);
  running_.clear();
}

void executor::loop() {
  for (;;) {
    std::deque<copy_task> copies;
    std::vector<nccl_task> colls;
    {
      std::unique_lock lk(mu_);
      if (running_.empty())
        cv_.wait(lk, [&] {
          return stop_ || !copies_.empty() ||
                 (!collectives_.empty() && collectives_.begin()->first == next_order_);
        });
      if (stop_) break;
      copies.swap(copies_);
      while (!collectives_.empty() && collectives_.begin()->first == next_order_) {
        colls.push_back(std::move(collectives_.begin()->second));
        collectives_.erase(collectives_.begin());
        ++next_order_;
      }
    }
    for (auto& c : copies) start_copy(c);
    for (auto& c : colls)
      if (!c.skipped) start_collective(c);
    poll();
    if (!running_.empty()) {
      std::unique_lock lk(mu_);
      cv_.wait_for(lk, std::chrono::microseconds(20), [&] { return stop_ || !copies_.empty(); });
    }
  }
  // Stopping: wait a moment for work on the GPU (its buffers belong to the caller), then fail the rest.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (!running_.empty() && std::chrono::steady_clock::now() < until) {
    poll();
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  fail_all({errc::shutdown, "Chorus shut down while the GPU work was pending"});
#if CHORUS_WITH_NCCL
  nccl_.reset();
#endif
  if (d2h_) cudaStreamDestroy(static_cast<cudaStream_t>(d2h_));
  if (h2d_) cudaStreamDestroy(static_cast<cudaStream_t>(h2d_));
}

}  // namespace chorus::gpu
