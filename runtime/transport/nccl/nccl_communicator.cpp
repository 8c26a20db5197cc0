// nccl_communicator: NCCL communicator lifecycle, collectives enqueued on a private stream,
// and the polling wait that turns NCCL's asynchronous errors into statuses.
// Every CUDA/NCCL return code is checked; messages read "<call> failed on rank r of n: ...".
#include "runtime/transport/nccl/nccl_communicator.hpp"

#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "runtime/core/log.hpp"

namespace chorus {
namespace {

static_assert(sizeof(ncclUniqueId) == 128, "ncclUniqueId is no longer 128 bytes");

std::string on_rank(int rank, int size) {
  if (rank < 0) return " (no communicator yet)";
  return " on rank " + std::to_string(rank) + " of " + std::to_string(size);
}

// No device / no driver is the environment, not a bug: errc::config.
bool is_no_gpu(cudaError_t e) {
  return e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver ||
         e == cudaErrorStubLibrary || e == cudaErrorCallRequiresNewerDriver;
}

status cuda_status(const char* call, cudaError_t e, int rank, int size) {
  // Clear the thread's last-error slot so a later, unrelated check does not see this one
  // (sticky errors stay, as CUDA intends).
  (void)cudaGetLastError();
  errc code = errc::internal;
  if (is_no_gpu(e)) {
    code = errc::config;
  } else if (e == cudaErrorInvalidDevice || e == cudaErrorInvalidValue) {
    code = errc::invalid_argument;
  }
  return {code, std::string(call) + " failed" + on_rank(rank, size) + ": " +
                    cudaGetErrorName(e) + ": " + cudaGetErrorString(e)};
}

// A null buffer the caller passed to `method` for `count` elements: `which` names the buffer
// ("" or "send " / "recv "), `per` what the count is per ("" or " per rank").
status null_buffer(const char* method, int rank, int size, const char* which, std::size_t count, dtype t,
                   const char* per) {
  return {errc::invalid_argument, std::string("nccl_communicator::") + method + on_rank(rank, size) + ": null " +
                                      which + "buffer for " + std::to_string(count) + " " + std::string(name_of(t)) +
                                      " elements" + per};
}

status nccl_status(const char* call, ncclResult_t r, int rank, int size, errc peer_code) {
  errc code = errc::internal;
  if (r == ncclInvalidArgument || r == ncclInvalidUsage) {
    code = errc::invalid_argument;
  } else if (r == ncclRemoteError || r == ncclSystemError) {
    code = peer_code;  // connection_lost once running, rendezvous while joining
  }
  std::string msg = std::string(call) + " failed" + on_rank(rank, size) + ": " +
                    ncclGetErrorString(r);
  // ncclGetLastError holds NCCL's own detail for the most recent failure, if it kept one.
  if (const char* last = ncclGetLastError(nullptr); last != nullptr && last[0] != '\0') {
    msg += " (";
    msg += last;
    msg += ")";
  }
  return {code, std::move(msg)};
}

}  // namespace

result<ncclDataType_t> to_nccl(dtype t) {
  switch (t) {
    case dtype::f16: return ncclFloat16;
    case dtype::bf16: return ncclBfloat16;
    case dtype::f32: return ncclFloat32;
    case dtype::f64: return ncclFloat64;
    case dtype::i32: return ncclInt32;
    case dtype::i64: return ncclInt64;
    case dtype::u8: return ncclUint8;
    case dtype::i8: return ncclInt8;
    case dtype::boolean: return ncclUint8;  // 0/1 bytes; the caller maps sum/max to max, min/product to min
    case dtype::i16:
      return status{errc::invalid_argument, "NCCL has no 16-bit integer type (i16); such tensors take host staging"};
  }
  return status{errc::invalid_argument, "dtype value " + std::to_string(static_cast<int>(t)) +
                                            " has no NCCL type (expected 0.." +
                                            std::to_string(dtype_count - 1) + ")"};
}

result<ncclRedOp_t> to_nccl(reduce_op op) {
  switch (op) {
    case reduce_op::sum: return ncclSum;
    case reduce_op::average: return ncclAvg;
    case reduce_op::min: return ncclMin;
    case reduce_op::max: return ncclMax;
    case reduce_op::product: return ncclProd;
    case reduce_op::band:
    case reduce_op::bor:
    case reduce_op::bxor:
      return status{errc::invalid_argument, "NCCL has no bitwise reduction (" + std::string(name_of(op)) + ")"};
  }
  return status{errc::invalid_argument, "reduce_op value " + std::to_string(static_cast<int>(op)) +
                                            " has no NCCL op (expected 0.." +
                                            std::to_string(reduce_op_count - 1) + ")"};
}

int nccl_communicator::visible_devices() {
  int count = 0;  // cudaGetDeviceCount leaves it untouched on failure
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    if (is_no_gpu(e)) {
      CHORUS_LOG(debug, "nccl", "no CUDA device: cudaGetDeviceCount: " << cudaGetErrorName(e));
    } else {
      CHORUS_LOG(warn, "nccl", "cudaGetDeviceCount failed, assuming 0 devices: "
                                   << cudaGetErrorName(e) << ": " << cudaGetErrorString(e));
    }
    return 0;
  }
  return count;
}

result<std::array<char, 128>> nccl_communicator::make_unique_id() {
  ncclUniqueId id;
  if (ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess) {
    return nccl_status("ncclGetUniqueId", r, -1, -1, errc::config);
  }
  std::array<char, 128> bytes;
  std::memcpy(bytes.data(), id.internal, bytes.size());
  return bytes;
}

result<std::unique_ptr<nccl_communicator>> nccl_communicator::create(
    int rank, int size, const std::array<char, 128>& unique_id_bytes, int device) {
  // 1. Reject bad arguments before touching CUDA.
  if (size < 1 || rank < 0 || rank >= size) {
    return status{errc::invalid_argument, "nccl_communicator::create: rank " +
                                              std::to_string(rank) + " is outside [0, size=" +
                                              std::to_string(size) + ")"};
  }
  if (device < 0) {
    return status{errc::invalid_argument, "nccl_communicator::create: device " +
                                              std::to_string(device) + on_rank(rank, size) +
                                              " is negative"};
  }
  // 2. The device must exist; say how many there are when it does not.
  int count = 0;
  if (cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess) {
    return cuda_status("cudaGetDeviceCount", e, rank, size);
  }
  if (device >= count) {
    return status{errc::config, "nccl_communicator::create: device " + std::to_string(device) +
                                    " requested" + on_rank(rank, size) + " but CUDA sees " +
                                    std::to_string(count) +
                                    " device(s) (CUDA_VISIBLE_DEVICES selects them)"};
  }
  // 3. Own the stream and communicator as soon as they exist: the destructor frees them on
  //    every later failure.
  std::unique_ptr<nccl_communicator> self(new nccl_communicator(rank, size, device));
  if (cudaError_t e = cudaSetDevice(device); e != cudaSuccess) {
    return cuda_status("cudaSetDevice", e, rank, size);
  }
  if (cudaError_t e = cudaStreamCreateWithFlags(&self->stream_, cudaStreamNonBlocking);
      e != cudaSuccess) {
    self->stream_ = nullptr;
    return cuda_status("cudaStreamCreateWithFlags", e, rank, size);
  }
  // 4. Join: blocks until all `size` ranks called ncclCommInitRank with the same id.
  ncclUniqueId id;
  std::memcpy(id.internal, unique_id_bytes.data(), sizeof(id.internal));
  if (ncclResult_t r = ncclCommInitRank(&self->comm_, size, id, rank); r != ncclSuccess) {
    self->comm_ = nullptr;
    return nccl_status("ncclCommInitRank", r, rank, size, errc::rendezvous);
  }
  CHORUS_LOG(info, "nccl", "communicator ready rank=" << rank << " size=" << size
                                                       << " device=" << device);
  return self;
}

nccl_communicator::~nccl_communicator() {
  if (comm_ != nullptr) {
    // Wait for enqueued work first: destroying a communicator under running kernels is
    // undefined. synchronize() aborts (and clears comm_) on an asynchronous error.
    if (status st = synchronize(); !st.ok()) {
      CHORUS_LOG(warn, "nccl", "rank=" << rank_ << " destroying after failure: " << st.to_string());
    }
  }
  if (comm_ != nullptr) {
    if (ncclResult_t r = ncclCommDestroy(comm_); r != ncclSuccess) {
      CHORUS_LOG(error, "nccl", nccl_status("ncclCommDestroy", r, rank_, size_, errc::internal)
                                    .to_string());
    }
    comm_ = nullptr;
  }
  if (stream_ != nullptr) {
    if (cudaError_t e = cudaStreamDestroy(stream_); e != cudaSuccess) {
      CHORUS_LOG(error, "nccl", cuda_status("cudaStreamDestroy", e, rank_, size_).to_string());
    }
    stream_ = nullptr;
  }
}

status nccl_communicator::ready(const char* what) {
  if (!broken_.ok()) {
    return {broken_.code(), std::string("nccl_communicator::") + what + on_rank(rank_, size_) +
                                ": communicator was aborted after: " + broken_.message()};
  }
  if (cudaError_t e = cudaSetDevice(device_); e != cudaSuccess) {
    return cuda_status("cudaSetDevice", e, rank_, size_);
  }
  return {};
}

void nccl_communicator::abort_after(const status& cause) {
  if (broken_.ok()) broken_ = cause;
  if (comm_ == nullptr) return;
  if (ncclResult_t r = ncclCommAbort(comm_); r != ncclSuccess) {
    CHORUS_LOG(error, "nccl", nccl_status("ncclCommAbort", r, rank_, size_, errc::internal)
                                  .to_string());
  }
  comm_ = nullptr;
  CHORUS_LOG(error, "nccl", "rank=" << rank_ << " communicator aborted: " << cause.to_string());
}

status nccl_communicator::nccl_failed(const char* call, ncclResult_t r) {
  status st = nccl_status(call, r, rank_, size_, errc::connection_lost);
  if (st.code() != errc::invalid_argument) abort_after(st);
  return st;
}

status nccl_communicator::allreduce(void* device_buf, std::size_t count, dtype t, reduce_op op) {
  auto nt = to_nccl(t);
  if (!nt) return nt.error();
  auto nop = to_nccl(op);
  if (!nop) return nop.error();
  if (count == 0) return {};
  if (device_buf == nullptr) return null_buffer("allreduce", rank_, size_, "", count, t, "");
  if (status st = ready("allreduce"); !st.ok()) return st;
  ncclResult_t r = ncclAllReduce(device_buf, device_buf, count, *nt, *nop, comm_, stream_);
  return r == ncclSuccess ? status{} : nccl_failed("ncclAllReduce", r);
}

status nccl_communicator::broadcast(void* buf, std::size_t count, dtype t, int root) {
  auto nt = to_nccl(t);
  if (!nt) return nt.error();
  if (root < 0 || root >= size_) {
    return {errc::invalid_argument, "nccl_communicator::broadcast" + on_rank(rank_, size_) +
                                        ": root " + std::to_string(root) +
                                        " is outside [0, size=" + std::to_string(size_) + ")"};
  }
  if (count == 0) return {};
  if (buf == nullptr) return null_buffer("broadcast", rank_, size_, "", count, t, "");
  if (status st = ready("broadcast"); !st.ok()) return st;
  ncclResult_t r = ncclBroadcast(buf, buf, count, *nt, root, comm_, stream_);
  return r == ncclSuccess ? status{} : nccl_failed("ncclBroadcast", r);
}

status nccl_communicator::allgather(const void* send, void* recv, std::size_t count, dtype t) {
  auto nt = to_nccl(t);
  if (!nt) return nt.error();
  if (count == 0) return {};
  if (send == nullptr || recv == nullptr)
    return null_buffer("allgather", rank_, size_, send == nullptr ? "send " : "recv ", count, t, " per rank");
  if (status st = ready("allgather"); !st.ok()) return st;
  ncclResult_t r = ncclAllGather(send, recv, count, *nt, comm_, stream_);
  return r == ncclSuccess ? status{} : nccl_failed("ncclAllGather", r);
}

status nccl_communicator::check_async() {
  if (!broken_.ok()) return broken_;
  ncclResult_t async = ncclSuccess;
  if (ncclResult_t r = ncclCommGetAsyncError(comm_, &async); r != ncclSuccess)
    return nccl_failed("ncclCommGetAsyncError", r);
  if (async != ncclSuccess && async != ncclInProgress) {
    status st = nccl_status("asynchronous NCCL error (ncclCommGetAsyncError)", async, rank_, size_,
                            errc::connection_lost);
    abort_after(st);
    return st;
  }
  return {};
}

status nccl_communicator::synchronize() {
  if (status st = ready("synchronize"); !st.ok()) return st;
  // Spin briefly (short collectives finish in microseconds), then poll every 50 us so a long
  // wait does not burn a core. Between polls, ask NCCL whether a peer or the network failed.
  using clock = std::chrono::steady_clock;
  const auto spin_until = clock::now() + std::chrono::milliseconds(2);
  for (;;) {
    cudaError_t q = cudaStreamQuery(stream_);
    ncclResult_t async = ncclSuccess;
    if (ncclResult_t r = ncclCommGetAsyncError(comm_, &async); r != ncclSuccess) {
      return nccl_failed("ncclCommGetAsyncError", r);
    }
    if (async != ncclSuccess && async != ncclInProgress) {
      status st = nccl_status("asynchronous NCCL error (ncclCommGetAsyncError)", async, rank_,
                              size_, errc::connection_lost);
      abort_after(st);
      return st;
    }
    if (q == cudaSuccess) return {};
    if (q != cudaErrorNotReady) {
      status st = cuda_status("cudaStreamQuery", q, rank_, size_);
      abort_after(st);  // a failed kernel leaves the stream, and the communicator, unusable
      return st;
    }
    if (clock::now() < spin_until) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
}

}  // namespace chorus
