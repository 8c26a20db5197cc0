// Fuzzes the chunk operations' frame checks through the engine (runtime/collectives/): a peer
// chooses every header field of a data frame (sequence, step, offset, length), and the engine
// turns them into a pointer (destination) or a copy/reduction (delivered). The input is a
// script: which op runs (rank 0 of a 3-rank ring allreduce or allgather, an alltoall, a
// broadcast), then frames from peers 1 and 2, op starts and transport releases. Buffers are
// heap blocks of exactly their size, so ASan sees any byte written outside them; the target
// also fills whatever destination() returns with `length` bytes.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#include "runtime/collectives/alltoall_op.hpp"
#include "runtime/collectives/engine.hpp"
#include "runtime/collectives/exchange_op.hpp"
#include "runtime/collectives/ring_op.hpp"
#include "tests/fuzz/fuzz_check.hpp"

namespace {

using namespace chorus;

// Delivers nothing by itself; release() hands sent payloads back, as a real transport does.
class null_transport final : public transport {
 public:
  int rank() const override { return 0; }
  int size() const override { return 3; }
  int num_streams() const override { return 1; }
  uint64_t job_id() const override { return 7; }
  void start(frame_sink*) override {}
  void post(std::function<void()> fn) override { fn(); }
  void send(int, int, const wire::frame_header& h, const std::byte*) override { queued_.push_back(h); }
  void cancel(uint64_t) override {}
  void abort(const status&) override {}
  void close(std::chrono::milliseconds) override {}
  void release(frame_sink& sink) {
    auto q = std::move(queued_);
    queued_.clear();
    for (auto& h : q) sink.sent(1, h);
  }

 private:
  std::vector<wire::frame_header> queued_;
};

class script {
 public:
  script(const uint8_t* data, size_t size) : p_(data), end_(data + size) {}
  bool more() const { return p_ < end_; }
  template <class T>
  T take() {
    T v = 0;
    for (size_t i = 0; i < sizeof(T) && p_ < end_; ++i) v |= static_cast<T>(*p_++) << (8 * i);
    return v;
  }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
};

constexpr std::size_t buffer_bytes = 4096;  // small buffers, small segments: many frames per op
constexpr std::size_t segment_bytes = 256;
constexpr uint32_t max_frame_length = 1u << 20;  // the largest payload length a script chooses

struct world {
  std::vector<std::unique_ptr<std::vector<std::byte>>> buffers;  // outlive the engine's ops
  null_transport t;
  engine eng{t};
  uint8_t which = 0;

  std::byte* fresh(std::size_t n) {
    buffers.push_back(std::make_unique<std::vector<std::byte>>(n, std::byte{1}));
    return buffers.back()->data();
  }
  std::unique_ptr<chunk_op> make(uint64_t seq) {
    switch (which % 4) {
      case 0:
        return make_ring_allreduce(seq, 0, 0, 3, fresh(buffer_bytes), buffer_bytes / 4, dtype::f32, reduce_op::sum,
                                   segment_bytes);
      case 1:
        return make_ring_allgather(seq, 0, 0, 3, fresh(buffer_bytes), {300, 124, 600}, dtype::f32, segment_bytes);
      case 2: {
        std::vector<byte_range> send{{0, 1024}, {1024, 2048}, {3072, 1024}};
        std::vector<byte_range> recv{{0, 1024}, {1024, 512}, {1536, 2560}};
        return std::make_unique<alltoall_op>(seq, 0, 0, 3, fresh(buffer_bytes), send, fresh(buffer_bytes), recv, 4,
                                             segment_bytes);
      }
      default:
        return std::make_unique<broadcast_op>(seq, 0, 0, 3, fresh(buffer_bytes), buffer_bytes, 1, segment_bytes);
    }
  }
};

// The payload of a frame with no destination (an early or refused frame): the last `length`
// bytes of one heap block of the largest length, filled once. Ending at the block's end keeps
// a read past `length` visible to ASan, without a fresh megabyte (page faults) per frame.
std::byte* payload_ending_at_block_end(uint32_t length) {
  static std::vector<std::byte> block(max_frame_length, std::byte{0x7f});
  return block.data() + block.size() - length;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  script s(data, size);
  world w;
  w.which = s.take<uint8_t>();
  uint64_t next_seq = 0;
  std::vector<uint16_t> tags;
  for (int i = 0; i < 4; ++i) tags.push_back(w.make(i)->layout_tag());
  int steps = 0;
  while (s.more() && steps++ < 64) {
    uint8_t action = s.take<uint8_t>();
    if (action % 8 == 0) {  // start the next op
      if (next_seq < 4) w.eng.run(w.make(next_seq++), [](const status&) {});
      continue;
    }
    if (action % 8 == 1) {
      w.t.release(w.eng);
      continue;
    }
    wire::frame_header h;
    h.kind = wire::frame_kind::data;
    h.job_id = w.t.job_id();
    h.sequence = s.take<uint8_t>() % 5;
    uint32_t step = s.take<uint16_t>();
    // Mostly the op's own layout tag, so the bounds checks behind it are reached.
    uint16_t tag = (action & 0x10) ? s.take<uint16_t>() : tags[h.sequence % 4];
    h.step = (static_cast<uint32_t>(tag) << 16) | (step & 0xffff);
    h.offset = (action & 0x20) ? s.take<uint64_t>() : s.take<uint16_t>();
    h.length = (action & 0x40) ? s.take<uint32_t>() % max_frame_length : s.take<uint16_t>() % 8192;
    int peer = 1 + (action >> 7);
    std::byte* dest = w.eng.destination(peer, h);
    if (dest == nullptr) {
      dest = payload_ending_at_block_end(h.length);
    } else {
      std::memset(dest, 0x7f, h.length);  // what the transport would read there
    }
    w.eng.delivered(peer, h, dest);
  }
  w.t.release(w.eng);
  w.eng.fail_all(status{errc::internal, "fuzz input ended"});
  w.t.release(w.eng);
  return 0;
}
