// One rank's CUDA engine for device chunks (CHORUS_WITH_CUDA only). One thread ("chorus-gpu")
// enqueues copies and NCCL collectives on streams of its own and polls a CUDA event per piece
// of work, running its callback once the event fired: no actor ever blocks on the GPU.
//  * copies (host staging) run in any order, after the caller's ready event;
//  * NCCL collectives run strictly in the order number the caller gives (0, 1, 2, ... the
//    negotiated batch order, identical on every rank), whatever order they are posted in, so
//    the ranks' launches always match; the communicator is created at the first one, from a
//    unique id agreed through the job's rendezvous store.
// A collective still running after the peer timeout aborts the communicator and fails with a
// timeout; an asynchronous NCCL error or a CUDA error fails the work with its text. Every
// callback runs exactly once (errc::shutdown for what is pending when the executor goes).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/core/dtype.hpp"
#include "runtime/core/status.hpp"

namespace chorus {

class nccl_communicator;

namespace gpu {

class pinned_pool;

/// One NCCL collective, in place on device memory.
struct nccl_call {
  enum class kind : uint8_t { allreduce, broadcast } what = kind::allreduce;
  void* buffer = nullptr;
  std::size_t count = 0;
  dtype type = dtype::f32;
  reduce_op op = reduce_op::sum;
  int root = 0;
  std::shared_ptr<void> ready;  ///< event to wait for first (gpu::record_ready), may be null
  std::string name;             ///< the tensor, for errors
};

class executor {
 public:
  struct options {
    int rank = 0;
    int size = 1;
    /// How long a collective may run before the job counts its peer as gone (the hardening
    /// the liveness bound, CHORUS_PEER_TIMEOUT_SECONDS).
    std::chrono::milliseconds peer_timeout{30000};
    /// Agrees on the NCCL unique id: rank 0 passes the id it made and gets it back, the other
    /// ranks pass an empty string and get rank 0's (through the rendezvous store).
    std::function<result<std::string>(const std::string& mine)> agree_id;
  };
  using done_fn = std::function<void(const status&)>;

  explicit executor(options o);
  /// stop(), unless it ran already.
  ~executor();
  /// Lets work on the GPU finish (up to 2 s), fails the rest with errc::shutdown, frees the
  /// communicator and joins the thread; later requests fail at once, on the caller's thread.
  /// Call it from a thread other than the executor's (e.g. the pipeline's shutdown).
  void stop();
  executor(const executor&) = delete;
  executor& operator=(const executor&) = delete;

  /// Copies `bytes` from `src` to `dst` (one of them device memory of `device`, the other host
  /// memory) once `ready` fired; `done` runs on the executor's thread when the copy finished.
  void copy(void* dst, const void* src, std::size_t bytes, int device, std::shared_ptr<void> ready, done_fn done);

  /// Runs `call` on `device` as NCCL collective number `order` (see the file comment).
  void collective(uint64_t order, int device, nccl_call call, done_fn done);

  /// Collective number `order` will not come (its tensor took another path): the ones after it
  /// go on without it.
  void skip(uint64_t order);

  /// Pinned (page-locked) host memory of at least `bytes`, reused from a pool once released.
  result<std::shared_ptr<std::byte>> pinned(std::size_t bytes);

 private:
  struct copy_task { void* dst; const void* src; std::size_t bytes; int device; std::shared_ptr<void> ready; done_fn done; };
  struct nccl_task { int device; nccl_call call; done_fn done; bool skipped = false; };
  struct in_flight { void* event; done_fn done; bool nccl; std::chrono::steady_clock::time_point started; std::string what; };

  void loop();
  void start_copy(copy_task& t);
  void start_collective(nccl_task& t);
  void poll();
  /// Records an event on `stream` after the work just enqueued; poll() runs `done` once it fired.
  void track(void* stream, done_fn& done, bool nccl, const std::string& what);
  void fail_all(const status& st);
  status use_device(int device);

  options opt_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::deque<copy_task> copies_;
  std::map<uint64_t, nccl_task> collectives_;  // by order
  uint64_t next_order_ = 0;
  // The thread's own state.
  int device_ = -1;
  void* d2h_ = nullptr;  // cudaStream_t
  void* h2d_ = nullptr;
  std::unique_ptr<nccl_communicator> nccl_;
  status nccl_broken_;
  std::vector<in_flight> running_;
  std::shared_ptr<pinned_pool> pool_;
  std::thread thread_;
};

}  // namespace gpu
}  // namespace chorus
