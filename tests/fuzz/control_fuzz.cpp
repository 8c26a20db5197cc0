// Fuzzes the control link's frame assembly (runtime/transport/tcp/control_frames.hpp): what a
// peer sends on its control connection, arriving in pieces of any size. The input's first byte
// picks how the rest is cut into receives. Every frame that comes out must account for its
// bytes exactly (consumed + buffered = received), nothing may follow a goodbye, and the buffer
// must stay within one frame at the limit plus a read.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "runtime/transport/tcp/control_frames.hpp"
#include "tests/fuzz/fuzz_check.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace chorus;
  using tcp::control_assembler;
  using tcp::control_frame;
  if (size < 1) return 0;
  wire::frame_limits limits;
  limits.job_id = 0x1234;  // the seeds' job id (make_seeds.cpp)
  limits.max_payload = 1 << 20;
  control_assembler a(limits);
  uint32_t cut = data[0] | 1u;  // a small generator of piece sizes
  std::size_t at = 1, received = 0, consumed = 0;
  bool goodbye = false;
  while (at < size) {
    cut = cut * 1103515245u + 12345u;
    auto room = a.space();
    CHORUS_FUZZ_CHECK(room.size() >= control_assembler::read_quantum, "less room than a read");
    std::size_t n = std::min<std::size_t>({size - at, room.size(), 1 + (cut >> 16) % 4096});
    std::memcpy(room.data(), data + at, n);
    at += n;
    received += n;
    auto st = a.received(n, [&](const control_frame& f) {
      CHORUS_FUZZ_CHECK(!goodbye, "a frame after the goodbye passed");
      std::size_t bytes = wire::frame_header_size;
      switch (f.what) {
        case control_frame::type::message: bytes += control_assembler::message_head + f.data.size(); break;
        case control_frame::type::abort: bytes += f.data.size(); break;
        case control_frame::type::goodbye: goodbye = true; [[fallthrough]];
        case control_frame::type::heartbeat: CHORUS_FUZZ_CHECK(f.data.empty(), "payload on a bare frame"); break;
      }
      CHORUS_FUZZ_CHECK(bytes - wire::frame_header_size <= limits.max_payload, "a frame over the limit passed");
      // The handler reads the message's bytes (the negotiator decodes them): read all.
      volatile uint8_t sum = 0;
      for (auto b : f.data) sum = static_cast<uint8_t>(sum + b);
      (void)sum;
      consumed += bytes;
      return true;
    });
    if (!st.ok()) return 0;  // refused: the connection ends here
    CHORUS_FUZZ_CHECK(consumed + a.pending() == received, "bytes lost or doubled in assembly");
    CHORUS_FUZZ_CHECK(a.capacity() <= wire::frame_header_size + limits.max_payload + 2 * control_assembler::read_quantum,
                      "the buffer grew past one frame at the limit");
    CHORUS_FUZZ_CHECK(goodbye == a.goodbye_received(), "goodbye state differs");
  }
  return 0;
}
