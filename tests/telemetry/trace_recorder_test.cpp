// The trace recorder and reader (telemetry/trace/): every event comes back as written, from
// several threads at once; the size bound stops recording with a `limit` record; a truncated
// or corrupted file is an error naming the file and byte offset, with no record after the
// damage; CHORUS_TRACE / CHORUS_TRACE_MAX_MB are read as documented.
#include "telemetry/trace/reader.hpp"
#include "telemetry/trace/recorder.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

namespace chorus::telemetry::trace {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

struct temp_dir {
  fs::path path;
  temp_dir() {
    char tmpl[] = "/tmp/chorus-trace-test-XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~temp_dir() { fs::remove_all(path); }
};

tensor_spec spec(std::string name, std::vector<int64_t> shape) {
  return tensor_spec{std::move(name), collective_kind::allreduce, dtype::f32, std::move(shape), reduce_op::sum, -1,
                     device_kind::cpu, 0};
}

std::shared_ptr<recorder> open_recorder(const std::string& dir, int rank = 0, uint64_t max_bytes = 0) {
  recorder_options o;
  o.dir = dir;
  o.rank = rank;
  o.size = 2;
  o.max_bytes = max_bytes;
  auto r = recorder::open(o);
  EXPECT_TRUE(r.ok()) << r.error().to_string();
  return r.ok() ? *r : nullptr;
}

std::vector<char> bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::string& path, const std::vector<char>& b) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(b.data(), static_cast<std::streamsize>(b.size()));
}

TEST(TraceRecorder, EveryEventComesBackAsWritten) {
  temp_dir dir;
  auto t0 = clock::now();
  std::vector<uint8_t> msg{1, 2, 3, 250};
  std::vector<std::string> names{"fc1.weight", "fc1.bias"};
  {
    auto rec = open_recorder(dir.path.string(), 1);
    rec->on_tunables({64u << 20, 4u << 20, 2, 1000us, 1u << 20}, t0);
    rec->on_enqueue(7, spec("fc1.weight", {512, 256}), t0 + 1us);
    auto urgent = spec("fc1.weight", {512, 256});
    urgent.priority = -42;  // a priority rides in the spec (replay plans by it)
    rec->on_ready(7, urgent, 3, t0 + 2us);
    rec->on_gossip_sent(0, msg, t0 + 3us);
    rec->on_gossip_received(msg, t0 + 4us);
    rec->on_cycle({3, 1, 1, t0 + 2us, t0 + 5us});
    std::vector<std::chrono::microseconds> lat{40us, 12us};
    rec->on_agreed(3, names, lat, t0 + 5us);
    rec->on_bucket({1, 3, 100, 2, 524800, false, "allreduce", names}, t0 + 6us);
    rec->on_chunk_start(1, 100, 4096, t0 + 7us);
    rec->on_chunk_end(1, 100, 4096, status{errc::connection_lost, "rank 0 closed"}, t0 + 7us, t0 + 9us);
    rec->on_compressed(1, 4096, 2048, t0 + 9us);
    rec->on_direct_path(SIZE_MAX, t0 + 9us);
    rec->on_steal(1, 0, 101, t0 + 8us);
    std::vector<int> missing{0};
    rec->on_stall("fc2.weight", missing, t0 + 10us);
    rec->on_error("connection_lost", status{errc::connection_lost, "rank 0 closed"}, t0 + 11us);
    rec->on_callback(7, spec("fc1.weight", {512, 256}), status{}, t0 + 1us, t0 + 12us);
  }
  auto f = read_trace_strict((dir.path / "rank-1.trace").string());
  ASSERT_TRUE(f.ok()) << f.error().to_string();
  EXPECT_EQ(f->header.rank, 1);
  EXPECT_EQ(f->header.size, 2);
  EXPECT_TRUE(f->ended);
  const auto& r = f->records;
  ASSERT_EQ(r.size(), 17u);  // 16 events and the end record
  std::map<record_kind, const trace_record*> by;
  for (auto& x : r) by[x.kind] = &x;
  EXPECT_EQ(by[record_kind::tunables]->tuning.in_place_bytes, 1u << 20);
  EXPECT_EQ(by[record_kind::tunables]->tuning.cycle_time, 1000us);
  EXPECT_EQ(by[record_kind::enqueue]->handle, 7u);
  EXPECT_EQ(by[record_kind::enqueue]->spec, spec("fc1.weight", {512, 256}));
  EXPECT_EQ(by[record_kind::ready]->cycle, 3u);
  EXPECT_EQ(by[record_kind::ready]->spec.priority, -42);
  EXPECT_EQ(by[record_kind::enqueue]->spec.priority, 0);
  EXPECT_EQ(by[record_kind::ready]->t_ns - by[record_kind::enqueue]->t_ns, 1000);
  EXPECT_EQ(by[record_kind::gossip_sent]->peer, 0);
  EXPECT_EQ(by[record_kind::gossip_sent]->payload, msg);
  EXPECT_EQ(by[record_kind::gossip_received]->payload, msg);
  EXPECT_EQ(by[record_kind::cycle]->cycle, 3u);
  EXPECT_EQ(by[record_kind::cycle]->t_ns - by[record_kind::cycle]->started_ns, 3000);
  EXPECT_EQ(by[record_kind::agreed]->names, names);
  EXPECT_EQ(by[record_kind::agreed]->values, (std::vector<int64_t>{40, 12}));
  const auto* b = by[record_kind::bucket];
  EXPECT_EQ(b->bucket, 1u);
  EXPECT_EQ(b->cycle, 3u);
  EXPECT_EQ(b->sequence, 100u);
  EXPECT_EQ(b->count, 2u);
  EXPECT_EQ(b->bytes, 524800u);
  EXPECT_EQ(b->text, "allreduce");
  EXPECT_EQ(b->names, names);
  EXPECT_EQ(by[record_kind::chunk_end]->result.code(), errc::connection_lost);
  EXPECT_EQ(by[record_kind::chunk_end]->result.message(), "rank 0 closed");
  const auto* z = by[record_kind::compressed];
  ASSERT_NE(z, nullptr);
  EXPECT_EQ(z->peer, 1);
  EXPECT_EQ(z->bytes, 4096u);
  EXPECT_EQ(z->count, 2048u);
  ASSERT_NE(by[record_kind::direct_path], nullptr);
  EXPECT_EQ(by[record_kind::direct_path]->bytes, uint64_t{SIZE_MAX});
  EXPECT_EQ(by[record_kind::steal]->victim, 0);
  EXPECT_EQ(by[record_kind::stall]->names, std::vector<std::string>{"fc2.weight"});
  EXPECT_EQ(by[record_kind::stall]->values, std::vector<int64_t>{0});
  EXPECT_EQ(by[record_kind::error]->text, "connection_lost");
  EXPECT_TRUE(by[record_kind::callback]->result.ok());
  EXPECT_EQ(by[record_kind::callback]->started_ns, by[record_kind::enqueue]->t_ns);
}

TEST(TraceRecorder, ManyThreadsAtOnceLoseNothing) {
  temp_dir dir;
  constexpr int threads = 4, per_thread = 5000;
  {
    auto rec = open_recorder(dir.path.string());
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t)
      ts.emplace_back([&, t] {
        for (int i = 0; i < per_thread; ++i)
          rec->on_enqueue(static_cast<uint64_t>(t * per_thread + i), spec("t" + std::to_string(i % 50), {i % 7 + 1}),
                          clock::now());
      });
    for (auto& t : ts) t.join();
  }
  auto f = read_trace_strict((dir.path / "rank-0.trace").string());
  ASSERT_TRUE(f.ok()) << f.error().to_string();
  std::set<uint64_t> handles;
  for (auto& r : f->records)
    if (r.kind == record_kind::enqueue) {
      handles.insert(r.handle);
      EXPECT_EQ(r.spec.name, "t" + std::to_string(r.handle % per_thread % 50));
    }
  EXPECT_EQ(handles.size(), static_cast<std::size_t>(threads * per_thread));
  EXPECT_EQ(f->lost, 0u);
}

TEST(TraceRecorder, TheSizeBoundStopsRecordingWithALimitRecord) {
  temp_dir dir;
  constexpr uint64_t bound = 64 << 10;
  std::string path;
  {
    auto rec = open_recorder(dir.path.string(), 0, bound);
    path = rec->path();
    for (int i = 0; i < 20000 && !rec->stopped(); ++i) {
      rec->on_enqueue(static_cast<uint64_t>(i), spec("layer" + std::to_string(i % 100), {64, 64}), clock::now());
      if (i % 1000 == 0) rec->flush();
    }
    rec->flush();
    EXPECT_TRUE(rec->stopped());
    rec->on_enqueue(1, spec("after", {1}), clock::now());  // ignored, does not block
  }
  EXPECT_LE(fs::file_size(path), bound);
  auto f = read_trace_strict(path);
  ASSERT_TRUE(f.ok()) << f.error().to_string();
  EXPECT_TRUE(f->limited);
  EXPECT_FALSE(f->ended);
  ASSERT_FALSE(f->records.empty());
  EXPECT_EQ(f->records.back().kind, record_kind::limit);
  for (auto& r : f->records) EXPECT_NE(r.spec.name, "after");
}

/// A recorded file with several blocks (one flush per event).
std::string several_blocks(const temp_dir& dir) {
  auto rec = open_recorder(dir.path.string());
  for (int i = 0; i < 5; ++i) {
    rec->on_enqueue(static_cast<uint64_t>(i), spec("g" + std::to_string(i), {8}), clock::now());
    rec->flush();
  }
  return rec->path();
}

/// The number after "byte offset " in an error message.
uint64_t offset_in(const std::string& msg) {
  auto at = msg.find("byte offset ");
  return at == std::string::npos ? 0 : std::stoull(msg.substr(at + 12));
}

TEST(TraceReader, ATruncatedFileNamesTheFileAndOffsetAndKeepsOnlyRecordsBeforeIt) {
  temp_dir dir;
  auto path = several_blocks(dir);
  auto whole = bytes_of(path);
  auto full = read_trace_strict(path);
  ASSERT_TRUE(full.ok()) << full.error().to_string();
  ASSERT_EQ(full->records.size(), 6u);
  // Cut inside the third enqueue's block.
  std::size_t cut = full->records[2].offset + 3;
  write_bytes(path, std::vector<char>(whole.begin(), whole.begin() + static_cast<std::ptrdiff_t>(cut)));
  auto strict = read_trace_strict(path);
  ASSERT_FALSE(strict.ok());
  const auto& msg = strict.error().message();
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
  // The damaged block is the third one: after the second enqueue, at or before the third.
  auto offset = offset_in(msg);
  EXPECT_GT(offset, full->records[1].offset) << msg;
  EXPECT_LT(offset, full->records[2].offset) << msg;
  auto lenient = read_trace(path);
  ASSERT_TRUE(lenient.ok());
  EXPECT_EQ(lenient->records.size(), 2u);
  EXPECT_FALSE(lenient->damage.ok());
}

TEST(TraceReader, AFlippedByteIsACorruptedBlockAndNothingAfterItIsRead) {
  temp_dir dir;
  auto path = several_blocks(dir);
  auto full = read_trace_strict(path);
  ASSERT_TRUE(full.ok());
  auto b = bytes_of(path);
  b[full->records[1].offset + 2] ^= 0x5a;
  write_bytes(path, b);
  auto f = read_trace(path);
  ASSERT_TRUE(f.ok());
  ASSERT_EQ(f->records.size(), 1u);
  EXPECT_EQ(f->records[0].handle, 0u);
  auto msg = f->damage.message();
  EXPECT_NE(msg.find("checksum"), std::string::npos) << msg;
  EXPECT_NE(msg.find(path + ": "), std::string::npos) << msg;
  auto offset = offset_in(msg);
  EXPECT_GT(offset, full->records[0].offset) << msg;
  EXPECT_LT(offset, full->records[1].offset) << msg;
}

TEST(TraceReader, ABadHeaderIsAnError) {
  temp_dir dir;
  auto path = (dir.path / "x.trace").string();
  write_bytes(path, {'n', 'o', 't', ' ', 'a', ' ', 't', 'r', 'a', 'c', 'e', '!', '!'});
  auto f = read_trace(path);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.error().message().find("bad magic"), std::string::npos);
  EXPECT_FALSE(read_trace((dir.path / "missing.trace").string()).ok());
}

TEST(TraceFromConfig, ReadsTheDirectoryAndTheBound) {
  temp_dir dir;
  context ctx;
  ctx.rank = 3;
  ctx.size = 4;
  telemetry_config c;
  auto off = trace_from_config(ctx, c);
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(*off, nullptr);
  // A bad bound never gets here: read_config() refuses it (tests/runtime/config_test.cpp).
  std::map<std::string, std::string> env{{"CHORUS_TRACE", (dir.path / "sub").string()}, {"CHORUS_TRACE_MAX_MB", "lots"}};
  auto get = [&](const char* k) -> const char* {
    auto it = env.find(k);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  auto bad = read_config(get);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code(), errc::config);
  EXPECT_NE(bad.error().message().find("CHORUS_TRACE_MAX_MB='lots'"), std::string::npos);
  env["CHORUS_TRACE_MAX_MB"] = "1";
  auto good = read_config(get);
  ASSERT_TRUE(good.ok()) << good.error().to_string();
  EXPECT_EQ(good->telemetry.trace_max_mb, 1u);
  auto on = trace_from_config(ctx, good->telemetry);
  ASSERT_TRUE(on.ok()) << on.error().to_string();
  ASSERT_NE(*on, nullptr);
  on->reset();
  EXPECT_TRUE(fs::exists(dir.path / "sub" / "rank-3.trace"));
  EXPECT_EQ(telemetry_config{}.trace_max_mb, default_max_mb);
}

}  // namespace
}  // namespace chorus::telemetry::trace
