// What the kernel tests share: a fixture that skips, with CUDA's reason, where no CUDA device
// is usable and gives each case its own stream; device buffers that free themselves; copies
// to and from element offsets of a buffer (to place data at chosen misalignments).
#pragma once

#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

namespace chorus::testing {

/// Why no CUDA device can be used, or "" when device 0 works (a context is created on it).
inline std::string no_cuda_device_reason() {
  int n = 0;  // cudaGetDeviceCount leaves it untouched on failure
  if (cudaError_t e = cudaGetDeviceCount(&n); e != cudaSuccess) {
    (void)cudaGetLastError();
    return std::string("cudaGetDeviceCount: ") + cudaGetErrorName(e) + ": " + cudaGetErrorString(e);
  }
  if (n <= 0) return "cudaGetDeviceCount reports no device";
  if (cudaError_t e = cudaSetDevice(0); e != cudaSuccess) {
    (void)cudaGetLastError();
    return std::string("cudaSetDevice(0): ") + cudaGetErrorName(e) + ": " + cudaGetErrorString(e);
  }
  if (cudaError_t e = cudaFree(nullptr); e != cudaSuccess) {  // creates the context
    (void)cudaGetLastError();
    return std::string("cudaFree(nullptr): ") + cudaGetErrorName(e) + ": " + cudaGetErrorString(e);
  }
  return "";
}

/// Cases that need a GPU: skipped with the reason where none is usable.
class gpu_test : public ::testing::Test {
 protected:
  void SetUp() override {
    static const std::string reason = no_cuda_device_reason();
    if (!reason.empty()) GTEST_SKIP() << "no usable CUDA device: " << reason;
    // A blocking stream: it orders itself after the buffers' memset and memcpy calls, which
    // run on the legacy default stream.
    ASSERT_EQ(cudaStreamCreate(&stream_), cudaSuccess);
  }
  void TearDown() override {
    if (stream_ != nullptr) {
      EXPECT_EQ(cudaStreamDestroy(stream_), cudaSuccess);
    }
  }
  /// Waits for the stream; a kernel fault shows up here.
  ::testing::AssertionResult synced() {
    cudaError_t e = cudaStreamSynchronize(stream_);
    if (e == cudaSuccess) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure()
           << "cudaStreamSynchronize: " << cudaGetErrorName(e) << ": " << cudaGetErrorString(e);
  }
  cudaStream_t stream_ = nullptr;
};

/// Device memory of `bytes` bytes (cudaMalloc: 256-byte aligned), filled with `fill` bytes.
class device_buffer {
 public:
  explicit device_buffer(std::size_t bytes, unsigned char fill = 0) : bytes_(bytes) {
    error_ = cudaMalloc(&p_, bytes == 0 ? 1 : bytes);
    if (error_ == cudaSuccess) error_ = cudaMemset(p_, fill, bytes);
    if (error_ == cudaSuccess) error_ = cudaDeviceSynchronize();
  }
  ~device_buffer() {
    if (p_ != nullptr) (void)cudaFree(p_);
  }
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;

  bool ok() const { return error_ == cudaSuccess; }
  std::string error() const { return cudaGetErrorString(error_); }
  template <class T>
  T* at(std::size_t element) {
    return static_cast<T*>(p_) + element;
  }

  /// Copies `host` to elements [offset, offset + host.size()) of this buffer, as T, and waits.
  template <class T>
  bool put(const std::vector<T>& host, std::size_t offset) {
    // cudaMemcpy from pageable memory may return before its DMA lands: wait for it.
    return cudaMemcpy(at<T>(offset), host.data(), host.size() * sizeof(T),
                      cudaMemcpyHostToDevice) == cudaSuccess &&
           cudaDeviceSynchronize() == cudaSuccess;
  }
  /// The whole buffer as elements of T.
  template <class T>
  std::vector<T> all() const {
    std::vector<T> out(bytes_ / sizeof(T));
    if (cudaMemcpy(out.data(), p_, out.size() * sizeof(T), cudaMemcpyDeviceToHost) !=
        cudaSuccess) {
      ADD_FAILURE() << "cudaMemcpy device -> host failed";
    }
    return out;
  }

 private:
  void* p_ = nullptr;
  std::size_t bytes_;
  cudaError_t error_;
};

}  // namespace chorus::testing
