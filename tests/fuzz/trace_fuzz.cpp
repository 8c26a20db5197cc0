// Fuzzes the trace file reader (telemetry/trace/reader.hpp, parse_trace): chorus-trace and
// replay read files that may be damaged or hostile. Whatever it returns, records stop before
// any damage it reports, and an `end` record is the last one.
#include <cstddef>
#include <cstdint>
#include <span>

#include "telemetry/trace/reader.hpp"
#include "tests/fuzz/fuzz_check.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace chorus::telemetry::trace;
  auto f = parse_trace("fuzz.trace", std::span(reinterpret_cast<const std::byte*>(data), size));
  if (!f) return 0;
  for (std::size_t i = 0; i < f->records.size(); ++i) {
    const auto& r = f->records[i];
    CHORUS_FUZZ_CHECK(r.offset < size, "a record offset past the file");
    CHORUS_FUZZ_CHECK(r.kind != record_kind::string, "a string record in the records");
    if (r.kind == record_kind::end) CHORUS_FUZZ_CHECK(i + 1 == f->records.size(), "a record after end");
  }
  return 0;
}
