// Fuzzes the shared-memory ring's reader (runtime/transport/shm/ring.hpp), which reads what a
// local peer writes into a segment both processes map. The input plays a hostile writer, step
// by step: each record is `advance u16 | n u16 | n bytes`; the bytes go into the ring at the
// published position (wrapping at the end), the published counter grows by `advance`, and the
// reader then takes every frame it finds. Whatever the writer does, each frame next() returns
// must lie inside the ring, within what was published, with a header the job's limits accept;
// the reader stops at the first error.
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "runtime/transport/shm/ring.hpp"
#include "tests/fuzz/fuzz_check.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace chorus;
  constexpr std::size_t ring_bytes = 512;  // the seeds' ring (make_seeds.cpp): wraps often
  auto seg = shm::segment::create("/chorus-fuzz-ring-" + std::to_string(::getpid()), ring_bytes, 1);
  CHORUS_FUZZ_CHECK(static_cast<bool>(seg), "a segment could not be created (is /dev/shm full?)");
  std::byte* ring = (*seg)->data();
  const std::size_t cap = (*seg)->capacity();
  auto& published_counter = (*seg)->published();
  wire::frame_limits limits;
  limits.job_id = 0x1234;  // the seeds' job id
  limits.max_payload = 1 << 20;
  shm::ring_reader reader(std::move(*seg), limits);

  uint64_t published = 0;
  uint64_t taken = 0;  // bytes of the frames returned, headers included (padding not counted)
  std::size_t at = 0;
  while (size - at >= 4) {
    uint16_t advance = 0, n = 0;
    std::memcpy(&advance, data + at, 2);
    std::memcpy(&n, data + at + 2, 2);
    at += 4;
    n = static_cast<uint16_t>(std::min<std::size_t>(n, size - at));
    for (std::size_t k = 0; k < n; ++k) ring[(published + k) % cap] = static_cast<std::byte>(data[at + k]);
    at += n;
    published += advance;
    published_counter.store(published);
    for (int i = 0; i < 1024; ++i) {
      shm::ring_frame f;
      auto got = reader.next(f);
      if (!got) return 0;  // refused: the ring is unusable from here on, as in the transport
      if (!*got) break;
      const std::size_t frame = wire::frame_header_size + f.header.length;
      CHORUS_FUZZ_CHECK(f.header.kind == wire::frame_kind::data, "a frame of another kind passed");
      CHORUS_FUZZ_CHECK(f.header.length <= limits.max_payload, "a frame over the payload limit passed");
      CHORUS_FUZZ_CHECK(f.header.job_id == limits.job_id, "a frame of another job passed");
      const std::byte* start = f.payload - wire::frame_header_size;
      CHORUS_FUZZ_CHECK(start >= ring && start + frame <= ring + cap, "a frame outside the ring passed");
      taken += frame;
      CHORUS_FUZZ_CHECK(taken <= published, "frames beyond the published counter passed");
      // The sink reads the payload in place (a reduction does): read all of it.
      volatile uint8_t sum = 0;
      for (std::size_t k = 0; k < f.header.length; ++k) sum = static_cast<uint8_t>(sum + static_cast<uint8_t>(f.payload[k]));
      (void)sum;
      reader.consume();
    }
  }
  return 0;
}
