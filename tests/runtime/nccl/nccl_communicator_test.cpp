// Tests of nccl_communicator: dtype/op mapping and argument checks run everywhere; the
// collectives run on a single-rank communicator and skip, saying why, when no GPU is visible.
#include "runtime/transport/nccl/nccl_communicator.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <cstring>
#include <set>
#include <string>
#include <vector>

namespace chorus {
namespace {

constexpr const char* no_gpu_reason =
    "no CUDA device visible (cudaGetDeviceCount reports no device or no driver); "
    "the NCCL collective tests need at least one GPU";

// Every dtype but i16 (NCCL has no 16-bit integer: those tensors are staged) has its NCCL
// type; bool travels as ncclUint8 (0/1 bytes, reduced with max/min).
TEST(nccl_mapping, every_dtype_has_its_nccl_type) {
  const std::pair<dtype, ncclDataType_t> expected[] = {
      {dtype::f16, ncclFloat16}, {dtype::bf16, ncclBfloat16}, {dtype::f32, ncclFloat32},
      {dtype::f64, ncclFloat64}, {dtype::i32, ncclInt32},     {dtype::i64, ncclInt64},
      {dtype::u8, ncclUint8},    {dtype::i8, ncclInt8},       {dtype::boolean, ncclUint8}};
  static_assert(std::size(expected) == dtype_count - 1);
  std::set<int> seen;
  for (auto [t, want] : expected) {
    auto nt = to_nccl(t);
    ASSERT_TRUE(nt.ok()) << name_of(t) << ": " << nt.error().to_string();
    EXPECT_EQ(*nt, want) << name_of(t);
    if (t != dtype::boolean) seen.insert(static_cast<int>(*nt));
  }
  EXPECT_EQ(seen.size(), std::size(expected) - 1) << "two dtypes share an NCCL type";
  auto i16 = to_nccl(dtype::i16);
  ASSERT_FALSE(i16.ok());
  EXPECT_NE(i16.error().message().find("i16"), std::string::npos) << i16.error().to_string();
}

TEST(nccl_mapping, every_arithmetic_reduce_op_has_its_nccl_op) {
  const ncclRedOp_t expected[] = {ncclSum, ncclAvg, ncclMin, ncclMax, ncclProd};
  for (int i = 0; i < static_cast<int>(std::size(expected)); ++i) {
    auto op = static_cast<reduce_op>(i);
    auto nop = to_nccl(op);
    ASSERT_TRUE(nop.ok()) << name_of(op) << ": " << nop.error().to_string();
    EXPECT_EQ(*nop, expected[i]) << name_of(op);
  }
  for (auto op : {reduce_op::band, reduce_op::bor, reduce_op::bxor}) {  // NCCL has no bitwise reductions
    auto nop = to_nccl(op);
    ASSERT_FALSE(nop.ok()) << name_of(op);
    EXPECT_NE(nop.error().message().find(std::string(name_of(op))), std::string::npos) << nop.error().to_string();
  }
}

TEST(nccl_mapping, values_outside_the_enums_are_rejected) {
  auto nt = to_nccl(static_cast<dtype>(dtype_count));
  ASSERT_FALSE(nt.ok());
  EXPECT_EQ(nt.error().code(), errc::invalid_argument);
  EXPECT_NE(nt.error().message().find(std::to_string(dtype_count)), std::string::npos)
      << nt.error().message();
  auto nop = to_nccl(static_cast<reduce_op>(200));
  ASSERT_FALSE(nop.ok());
  EXPECT_EQ(nop.error().code(), errc::invalid_argument);
  EXPECT_NE(nop.error().message().find("200"), std::string::npos) << nop.error().message();
}

TEST(nccl_communicator, visible_devices_agrees_with_cuda) {
  const int n = nccl_communicator::visible_devices();
  EXPECT_GE(n, 0);
  int count = -1;
  if (cudaGetDeviceCount(&count) == cudaSuccess) {
    EXPECT_EQ(n, count);
  } else {
    (void)cudaGetLastError();
    EXPECT_EQ(n, 0) << "CUDA failed to count devices, so none is usable";
  }
}

TEST(nccl_communicator, create_rejects_bad_arguments_before_touching_cuda) {
  const std::array<char, 128> id{};
  struct bad {
    int rank, size, device;
    const char* mentions;
  };
  for (const bad& b : {bad{1, 1, 0, "rank 1"}, bad{-1, 2, 0, "rank -1"},
                       bad{0, 0, 0, "size=0"}, bad{0, 1, -1, "device -1"}}) {
    auto comm = nccl_communicator::create(b.rank, b.size, id, b.device);
    ASSERT_FALSE(comm.ok()) << "rank=" << b.rank << " size=" << b.size << " device=" << b.device;
    EXPECT_EQ(comm.error().code(), errc::invalid_argument) << comm.error().to_string();
    EXPECT_NE(comm.error().message().find(b.mentions), std::string::npos)
        << comm.error().message();
  }
}

TEST(nccl_communicator, create_without_a_device_is_a_config_error) {
  if (nccl_communicator::visible_devices() > 0) GTEST_SKIP() << "a GPU is visible";
  auto comm = nccl_communicator::create(0, 1, std::array<char, 128>{}, 0);
  ASSERT_FALSE(comm.ok());
  EXPECT_EQ(comm.error().code(), errc::config) << comm.error().to_string();
  EXPECT_NE(comm.error().message().find("rank 0 of 1"), std::string::npos)
      << comm.error().message();
}

TEST(nccl_communicator, make_unique_id_succeeds_or_names_the_call) {
  auto id = nccl_communicator::make_unique_id();
  if (!id.ok()) {
    EXPECT_NE(id.error().message().find("ncclGetUniqueId"), std::string::npos)
        << id.error().message();
  }
}

// Small positive integers 1..n encoded in dtype `t`, exactly representable in every dtype.
std::vector<unsigned char> ramp(dtype t, int n) {
  std::vector<unsigned char> out(size_of(t) * n);
  for (int i = 0; i < n; ++i) {
    const int k = i + 1;
    unsigned char* p = out.data() + size_of(t) * i;
    auto put = [p](auto v) { std::memcpy(p, &v, sizeof(v)); };
    switch (t) {
      case dtype::f16: {  // k < 2048: exponent e = floor(log2 k), mantissa left-aligned
        const int e = std::bit_width(static_cast<unsigned>(k)) - 1;
        put(static_cast<uint16_t>(((e + 15) << 10) | ((k - (1 << e)) << (10 - e))));
        break;
      }
      case dtype::bf16: put(static_cast<uint16_t>(std::bit_cast<uint32_t>(float(k)) >> 16)); break;
      case dtype::f32: put(float(k)); break;
      case dtype::f64: put(double(k)); break;
      case dtype::i32: put(int32_t(k)); break;
      case dtype::i64: put(int64_t(k)); break;
      case dtype::u8: put(uint8_t(k)); break;
    }
  }
  return out;
}

// Device memory freed on scope exit; allocation failures fail the test.
struct device_buffer {
  void* ptr = nullptr;
  explicit device_buffer(std::size_t bytes) {
    cudaError_t e = cudaMalloc(&ptr, bytes);
    EXPECT_EQ(e, cudaSuccess) << "cudaMalloc(" << bytes << "): " << cudaGetErrorString(e);
    if (e != cudaSuccess) ptr = nullptr;
  }
  ~device_buffer() {
    if (ptr != nullptr) {
      EXPECT_EQ(cudaFree(ptr), cudaSuccess);
    }
  }
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
};

class nccl_single_rank : public ::testing::Test {
 protected:
  void SetUp() override {
    if (nccl_communicator::visible_devices() == 0) GTEST_SKIP() << no_gpu_reason;
    auto id = nccl_communicator::make_unique_id();
    ASSERT_TRUE(id.ok()) << id.error().to_string();
    auto comm = nccl_communicator::create(0, 1, *id, 0);
    ASSERT_TRUE(comm.ok()) << comm.error().to_string();
    comm_ = std::move(*comm);
    ASSERT_EQ(comm_->rank(), 0);
    ASSERT_EQ(comm_->size(), 1);
    ASSERT_NE(comm_->stream(), nullptr);
  }

  void upload(void* dst, const std::vector<unsigned char>& src) {
    ASSERT_EQ(cudaMemcpy(dst, src.data(), src.size(), cudaMemcpyHostToDevice), cudaSuccess);
  }
  std::vector<unsigned char> download(const void* src, std::size_t bytes) {
    std::vector<unsigned char> out(bytes);
    EXPECT_EQ(cudaMemcpy(out.data(), src, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
    return out;
  }

  std::unique_ptr<nccl_communicator> comm_;
};

// With one rank every reduction is the identity, so the values must come back unchanged; i16, which
// NCCL lacks, is refused with a clear error.
TEST_F(nccl_single_rank, allreduce_round_trips_every_dtype_and_op) {
  constexpr int n = 16;
  for (int ti = 0; ti < dtype_count; ++ti) {
    const auto t = static_cast<dtype>(ti);
    const auto host = ramp(t, n);
    device_buffer buf(host.size());
    ASSERT_NE(buf.ptr, nullptr);
    for (int oi = 0; oi < reduce_op_count; ++oi) {
      const auto op = static_cast<reduce_op>(oi);
      upload(buf.ptr, host);
      status st = comm_->allreduce(buf.ptr, n, t, op);
      if (t == dtype::i16) {  // NCCL has no int16; device_runner stages such tensors through the host
        EXPECT_EQ(st.code(), errc::invalid_argument) << st.to_string();
        EXPECT_NE(st.to_string().find("i16"), std::string::npos) << st.to_string();
        continue;
      }
      ASSERT_TRUE(st.ok()) << name_of(t) << "/" << name_of(op) << ": " << st.to_string();
      st = comm_->synchronize();
      ASSERT_TRUE(st.ok()) << name_of(t) << "/" << name_of(op) << ": " << st.to_string();
      EXPECT_EQ(download(buf.ptr, host.size()), host) << name_of(t) << "/" << name_of(op);
    }
  }
}

TEST_F(nccl_single_rank, broadcast_round_trips) {
  constexpr int n = 33;
  const auto host = ramp(dtype::f32, n);
  device_buffer buf(host.size());
  ASSERT_NE(buf.ptr, nullptr);
  upload(buf.ptr, host);
  status st = comm_->broadcast(buf.ptr, n, dtype::f32, 0);
  ASSERT_TRUE(st.ok()) << st.to_string();
  ASSERT_TRUE((st = comm_->synchronize()).ok()) << st.to_string();
  EXPECT_EQ(download(buf.ptr, host.size()), host);
}

TEST_F(nccl_single_rank, allgather_round_trips) {
  constexpr int n = 21;
  const auto host = ramp(dtype::i64, n);
  device_buffer send(host.size()), recv(host.size());
  ASSERT_NE(send.ptr, nullptr);
  ASSERT_NE(recv.ptr, nullptr);
  upload(send.ptr, host);
  ASSERT_EQ(cudaMemset(recv.ptr, 0, host.size()), cudaSuccess);
  status st = comm_->allgather(send.ptr, recv.ptr, n, dtype::i64);
  ASSERT_TRUE(st.ok()) << st.to_string();
  ASSERT_TRUE((st = comm_->synchronize()).ok()) << st.to_string();
  EXPECT_EQ(download(recv.ptr, host.size()), host);
}

TEST_F(nccl_single_rank, bad_arguments_are_rejected_and_the_communicator_stays_usable) {
  device_buffer buf(64);
  ASSERT_NE(buf.ptr, nullptr);
  status st = comm_->broadcast(buf.ptr, 4, dtype::f32, 1);
  EXPECT_EQ(st.code(), errc::invalid_argument) << st.to_string();
  EXPECT_NE(st.message().find("root 1"), std::string::npos) << st.message();
  st = comm_->allreduce(nullptr, 4, dtype::f32, reduce_op::sum);
  EXPECT_EQ(st.code(), errc::invalid_argument) << st.to_string();
  st = comm_->allgather(buf.ptr, nullptr, 4, dtype::f32);
  EXPECT_EQ(st.code(), errc::invalid_argument) << st.to_string();
  st = comm_->allreduce(buf.ptr, 4, static_cast<dtype>(99), reduce_op::sum);
  EXPECT_EQ(st.code(), errc::invalid_argument) << st.to_string();
  st = comm_->allreduce(buf.ptr, 4, dtype::f32, reduce_op::sum);
  EXPECT_TRUE(st.ok()) << st.to_string();
  st = comm_->synchronize();
  EXPECT_TRUE(st.ok()) << st.to_string();
}

TEST_F(nccl_single_rank, synchronize_with_nothing_enqueued_returns_ok) {
  status st = comm_->synchronize();
  EXPECT_TRUE(st.ok()) << st.to_string();
}

}  // namespace
}  // namespace chorus
