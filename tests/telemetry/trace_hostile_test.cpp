// Trace files and trace paths are input: files built here by hand ask the reader for huge
// copies of an interned string, carry an unknown dtype or op, and a symlink planted at the
// recorder's path must be refused (recording stops with a warning, the job goes on).
#include "telemetry/trace/reader.hpp"
#include "telemetry/trace/recorder.hpp"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <new>

#include "runtime/negotiation/byte_io.hpp"

namespace chorus::telemetry::trace {
namespace {

namespace fs = std::filesystem;

struct temp_dir {
  fs::path path;
  temp_dir() {
    char tmpl[] = "/tmp/chorus-trace-hostile-XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~temp_dir() { fs::remove_all(path); }
};

/// Builds a trace file record by record: one block holding every record added.
class file_builder {
 public:
  /// Adds a record: kind, t_ns = 0, then what `payload` writes. Returns its offset in the file.
  template <class F>
  uint64_t record(record_kind kind, F&& payload) {
    uint64_t offset = body_offset + body_.size();
    std::vector<std::byte> rec;
    byte_writer w(rec);
    w.u8(static_cast<uint8_t>(kind));
    w.svarint(0);
    payload(w);
    byte_writer b(body_);
    b.varint(rec.size());
    body_.insert(body_.end(), rec.begin(), rec.end());
    return offset;
  }

  void write(const std::string& path) const {
    std::vector<std::byte> out(header_bytes + block_header_bytes);
    std::memcpy(out.data(), file_magic.data(), file_magic.size());
    put_u16(out.data() + 8, format_version);
    put_u16(out.data() + 10, header_bytes);
    put_u32(out.data() + 12, 0);
    put_u32(out.data() + 16, 1);
    put_u32(out.data() + header_bytes, static_cast<uint32_t>(body_.size()));
    put_u32(out.data() + header_bytes + 4, crc32(body_));
    out.insert(out.end(), body_.begin(), body_.end());
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(out.data()), static_cast<std::streamsize>(out.size()));
  }

  /// Offset in the file of the body's first byte.
  static constexpr uint64_t body_offset = header_bytes + block_header_bytes;

 private:
  std::vector<std::byte> body_;
};

void define_string(file_builder& b, uint64_t id, const std::string& text) {
  (void)b.record(record_kind::string, [&](byte_writer& w) {
    w.varint(id);
    w.str(text);
  });
}

/// spec = u8 collective | u8 dtype | u8 op | u8 device | svarint root | varint set | varint name id |
/// varint ndim | dims.
void write_spec(byte_writer& w, uint8_t type, uint8_t op, uint64_t name_id,
                const std::vector<int64_t>& shape = {1024}) {
  w.u8(0);
  w.u8(type);
  w.u8(op);
  w.u8(0);
  w.svarint(-1);
  w.varint(0);
  w.varint(name_id);
  w.varint(shape.size());
  for (auto d : shape) w.svarint(d);
}

/// Runs `f` in a child whose address space is bounded, so a reader that allocates without
/// bound fails there (bad_alloc: exit 3) instead of taking the machine's memory.
int in_bounded_child(uint64_t max_address_space, const std::function<int()>& f) {
  pid_t pid = ::fork();
  if (pid == 0) {
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
    rlimit lim{max_address_space, max_address_space};
    ::setrlimit(RLIMIT_AS, &lim);
#endif
    int rc = 4;
    try {
      rc = f();
    } catch (const std::bad_alloc&) {
      rc = 3;
    }
    ::_exit(rc);
  }
  int st = 0;
  ::waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

TEST(TraceHostile, OneBigStringReferencedAMillionTimesIsRefusedWithBoundedMemory) {
  temp_dir dir;
  auto path = (dir.path / "rank-0.trace").string();
  file_builder b;
  define_string(b, 0, std::string(60000, 'x'));
  // A bucket record listing the 60 KB name a million times: ~1 MB of file, 60 GB as copies.
  uint64_t bucket_offset = b.record(record_kind::bucket, [&](byte_writer& w) {
    for (int i = 0; i < 5; ++i) w.varint(1);
    w.u8(0);
    w.varint(0);  // kind id
    w.varint(1'000'000);
    for (int i = 0; i < 1'000'000; ++i) w.varint(0);
  });
  b.write(path);
  ASSERT_LT(fs::file_size(path), 2u << 20);
  // Decoded with at most 1 GiB of address space: the bound is 256 MiB + 64 per byte of file.
  int rc = in_bounded_child(uint64_t{1} << 30, [&] {
    auto f = read_trace_strict(path);
    if (f.ok()) return 1;
    const auto& msg = f.error().message();
    bool named = msg.find("trace " + path + ": ") != std::string::npos &&
                 msg.find("strings its records reference") != std::string::npos &&
                 msg.find("at byte offset ") != std::string::npos;
    return named ? 0 : 2;
  });
  ASSERT_EQ(rc, 0) << "1: decoded a 60 GB expansion; 2: error without file, cause or offset; 3: ran out of memory";
  // In this process: the message itself, and the offset is the bucket record's.
  auto f = read_trace(path);
  ASSERT_TRUE(f.ok());
  EXPECT_TRUE(f->records.empty());
  EXPECT_NE(f->damage.message().find("at byte offset " + std::to_string(bucket_offset)),
            std::string::npos)
      << f->damage.message();
}

TEST(TraceHostile, ARealisticNameReusedManyTimesStillReads) {
  temp_dir dir;
  auto path = (dir.path / "rank-0.trace").string();
  file_builder b;
  define_string(b, 0, "module.encoder.layers.23.self_attention.query_key_value.weight");
  for (uint64_t h = 0; h < 20000; ++h)
    (void)b.record(record_kind::enqueue, [&](byte_writer& w) {
      w.varint(h);
      write_spec(w, static_cast<uint8_t>(dtype::f32), static_cast<uint8_t>(reduce_op::sum), 0);
    });
  b.write(path);
  auto f = read_trace_strict(path);
  ASSERT_TRUE(f.ok()) << f.error().to_string();
  ASSERT_EQ(f->records.size(), 20000u);
  EXPECT_EQ(f->records.back().spec.name, "module.encoder.layers.23.self_attention.query_key_value.weight");
}

/// A file whose one enqueue record carries `type` and `op`; the reader's error, or "".
std::string read_spec_with(uint8_t type, uint8_t op, const temp_dir& dir, uint64_t* offset = nullptr,
                           const std::vector<int64_t>& shape = {1024}) {
  auto path = (dir.path / "rank-0.trace").string();
  file_builder b;
  define_string(b, 0, "fc1.weight");
  uint64_t at = b.record(record_kind::enqueue, [&](byte_writer& w) {
    w.varint(7);
    write_spec(w, type, op, 0, shape);
  });
  if (offset) *offset = at;
  b.write(path);
  auto f = read_trace_strict(path);
  return f.ok() ? "" : f.error().message();
}

TEST(TraceHostile, AnUnknownDtypeOrOpIsDamageNamingTheOffset) {
  temp_dir dir;
  const uint8_t f32 = static_cast<uint8_t>(dtype::f32), sum = static_cast<uint8_t>(reduce_op::sum);
  uint64_t offset = 0;
  EXPECT_EQ(read_spec_with(f32, sum, dir, &offset), "");
  const std::string at = "at byte offset " + std::to_string(offset);
  for (auto [type, op] : {std::pair<int, int>{dtype_count, sum}, {200, sum}, {f32, reduce_op_count}, {f32, 255}}) {
    auto msg = read_spec_with(static_cast<uint8_t>(type), static_cast<uint8_t>(op), dir);
    EXPECT_NE(msg.find("'fc1.weight' with dtype " + std::to_string(type) + " op " + std::to_string(op)),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find(at), std::string::npos) << msg;
  }
}

// Replay sizes buffers from a spec's shape: a product past int64 is damage (fuzzing found the
// same overflow in the negotiation decoder).
TEST(TraceHostile, AShapePastInt64IsDamageNamingTheOffset) {
  temp_dir dir;
  const uint8_t f32 = static_cast<uint8_t>(dtype::f32), sum = static_cast<uint8_t>(reduce_op::sum);
  uint64_t offset = 0;
  auto msg = read_spec_with(f32, sum, dir, &offset, {93285, 15178645473017275});
  EXPECT_NE(msg.find("'fc1.weight' with shape [93285,15178645473017275]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("at byte offset " + std::to_string(offset)), std::string::npos) << msg;
  EXPECT_EQ(read_spec_with(f32, sum, dir, nullptr, {1 << 20, 1 << 20}), "");
}

TEST(TraceHostile, ASymlinkAtTheRecordersPathIsRefusedAndTheVictimIsUntouched) {
  temp_dir dir;
  auto victim = dir.path / "victim";
  std::ofstream(victim) << "precious";
  auto traces = dir.path / "traces";
  fs::create_directories(traces);
  fs::create_symlink(victim, traces / "rank-0.trace");
  recorder_options o;
  o.dir = traces.string();
  o.rank = 0;
  o.size = 1;
  auto r = recorder::open(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("rank-0.trace"), std::string::npos) << r.error().message();
  EXPECT_NE(r.error().message().find("symlink"), std::string::npos) << r.error().message();
  std::string content;
  std::getline(std::ifstream(victim), content);
  EXPECT_EQ(content, "precious");

  // Through the configuration (CHORUS_TRACE): recording is off with a warning, the job goes on.
  telemetry_config c;
  c.trace_dir = traces.string();
  context ctx;
  ctx.rank = 0;
  ctx.size = 1;
  auto obs = trace_from_config(ctx, c);
  ASSERT_TRUE(obs.ok()) << obs.error().to_string();
  EXPECT_EQ(*obs, nullptr);
  std::getline(std::ifstream(victim), content);
  EXPECT_EQ(content, "precious");
}

TEST(TraceHostile, AFileLeftByAnEarlierRunIsReplaced) {
  temp_dir dir;
  std::ofstream(dir.path / "rank-0.trace") << "an older recording";
  recorder_options o;
  o.dir = dir.path.string();
  o.rank = 0;
  o.size = 1;
  {
    auto r = recorder::open(o);
    ASSERT_TRUE(r.ok()) << r.error().to_string();
  }
  auto f = read_trace_strict((dir.path / "rank-0.trace").string());
  ASSERT_TRUE(f.ok()) << f.error().to_string();
  EXPECT_TRUE(f->ended);
  EXPECT_EQ((fs::status(dir.path / "rank-0.trace").permissions() & fs::perms::others_write), fs::perms::none);
}

}  // namespace
}  // namespace chorus::telemetry::trace
