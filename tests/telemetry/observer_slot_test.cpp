// The run-time timeline's parts (telemetry/observer_slot.hpp, telemetry/trace/live_timeline.hpp):
// the slot forwards to what is installed and nothing else, hands a part back only once no
// thread is inside it (checked with threads hammering it while parts are swapped), replays the
// tunables and the direct path's size; a live timeline started and finished around some events writes Chrome-trace JSON
// with each tensor's phases, only the events it saw, and removes its scratch recording.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "telemetry/observer_slot.hpp"
#include "telemetry/trace/live_timeline.hpp"

namespace chorus::telemetry {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

/// Counts the events it gets; `retired` is set once the slot handed it back: a call after that
/// is a violation.
class counting final : public observer {
 public:
  void on_enqueue(uint64_t, const tensor_spec&, time_point) override { hit(); }
  void on_cycle(const cycle_event&) override { hit(); }
  void on_tunables(const tunables& t, time_point) override { tunables_seen = t.streams; }
  void on_direct_path(std::size_t max_bytes, time_point) override { direct_seen = max_bytes; }
  void hit() {
    if (retired.load()) violations.fetch_add(1);
    calls.fetch_add(1);
  }
  std::atomic<bool> retired{false};
  std::atomic<uint64_t> calls{0}, violations{0};
  int tunables_seen = 0;
  std::size_t direct_seen = 0;
};

tensor_spec spec(std::string name) {
  return tensor_spec{std::move(name), collective_kind::allreduce, dtype::f32, {16}, reduce_op::sum, -1,
                     device_kind::cpu, 0};
}

TEST(ObserverSlot, ForwardsOnlyToWhatIsInstalled) {
  observer_slot slot;
  auto s = spec("w");
  slot.on_enqueue(1, s, clock::now());  // nothing installed: dropped
  EXPECT_FALSE(slot.installed());
  auto a = std::make_shared<counting>();
  EXPECT_EQ(slot.exchange(a), nullptr);
  EXPECT_TRUE(slot.installed());
  slot.on_enqueue(2, s, clock::now());
  slot.on_cycle({});
  EXPECT_EQ(a->calls.load(), 2u);
  auto b = std::make_shared<counting>();
  EXPECT_EQ(slot.exchange(b), a);  // restart: the old part comes back
  slot.on_enqueue(3, s, clock::now());
  EXPECT_EQ(a->calls.load(), 2u);
  EXPECT_EQ(b->calls.load(), 1u);
  EXPECT_EQ(slot.exchange(nullptr), b);
  slot.on_enqueue(4, s, clock::now());
  EXPECT_EQ(b->calls.load(), 1u);
  EXPECT_FALSE(slot.installed());
}

TEST(ObserverSlot, ANewPartGetsTheLastTunablesAndTheDirectPath) {
  observer_slot slot;
  slot.on_direct_path(SIZE_MAX, clock::now());           // the pipeline's start, before any part
  slot.on_tunables({1, 2, 3, 1000us, 0}, clock::now());
  auto a = std::make_shared<counting>();
  slot.exchange(a);
  EXPECT_EQ(a->tunables_seen, 3);
  EXPECT_EQ(a->direct_seen, SIZE_MAX);  // a trace started late replays with the lane's size
  // Without a direct path there is nothing to replay.
  observer_slot none;
  auto b = std::make_shared<counting>();
  none.exchange(b);
  EXPECT_EQ(b->direct_seen, 0u);
}

TEST(ObserverSlot, APartHandedBackIsNeverCalledAgainWhileThreadsReport) {
  observer_slot slot;
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  auto s = spec("w");
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      while (!stop.load(std::memory_order_relaxed)) slot.on_enqueue(1, s, clock::now());
    });
  std::vector<std::shared_ptr<counting>> parts;
  uint64_t seen = 0;
  for (int i = 0; i < 300; ++i) {
    auto p = std::make_shared<counting>();
    parts.push_back(p);
    auto old = slot.exchange(i % 3 == 2 ? nullptr : p);
    if (auto* c = dynamic_cast<counting*>(old.get())) c->retired = true;
    if (i % 50 == 0) std::this_thread::sleep_for(1ms);  // let the reporters reach the part
  }
  if (auto* c = dynamic_cast<counting*>(slot.exchange(nullptr).get())) c->retired = true;
  stop = true;
  for (auto& t : threads) t.join();
  for (auto& p : parts) {
    EXPECT_EQ(p->violations.load(), 0u);
    seen += p->calls.load();
  }
  EXPECT_GT(seen, 0u);  // the reporters did reach the parts
}

class live_timeline_test : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/chorus-live-timeline-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
  }
  void TearDown() override { fs::remove_all(dir_); }

  /// One allreduce "name" through every phase, with cycle `cycle`, starting at `t0`.
  static void one_op(observer& o, uint64_t handle, const std::string& name, uint64_t cycle, uint64_t seq,
                     time_point t0) {
    auto s = spec(name);
    std::vector<std::string> names{name};
    std::vector<std::chrono::microseconds> lat{2000us};
    o.on_enqueue(handle, s, t0);
    o.on_ready(handle, s, cycle, t0);
    o.on_cycle({cycle, 1, 1, t0 + 1ms, t0 + 2ms});
    o.on_agreed(cycle, names, lat, t0 + 2ms);
    o.on_bucket({cycle, cycle, seq, 1, 64, false, "allreduce", names}, t0 + 2ms);
    o.on_chunk_start(0, seq, 64, t0 + 3ms);
    o.on_chunk_end(0, seq, 64, status{}, t0 + 3ms, t0 + 4ms);
    o.on_callback(handle, s, status{}, t0, t0 + 5ms);
  }

  static std::string read(const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  std::string dir_;
};

TEST_F(live_timeline_test, WritesThePhasesOfWhatItSawAndRemovesTheScratch) {
  observer_slot slot;
  auto t0 = clock::now();
  one_op(slot, 1, "before.start", 1, 10, t0);
  trace::live_timeline_options o;
  o.path = dir_ + "/timeline.json";
  o.mark_cycles = true;
  auto t = trace::live_timeline::start(o);
  ASSERT_TRUE(t.ok()) << t.error().to_string();
  EXPECT_TRUE(fs::exists(o.path));  // created at start, as Horovod does
  slot.exchange((*t)->events());
  // An op enqueued before the start that ends inside the recording: no half span.
  slot.on_callback(7, spec("straddles.start"), status{}, t0, t0 + 9ms);
  one_op(slot, 2, "grad.w", 2, 11, t0 + 10ms);
  one_op(slot, 3, "grad.b", 3, 12, t0 + 20ms);
  slot.exchange(nullptr);
  one_op(slot, 4, "after.stop", 4, 13, t0 + 30ms);
  ASSERT_TRUE((*t)->finish().ok());
  EXPECT_TRUE((*t)->finish().ok());  // a second finish does nothing

  auto text = read(o.path);
  EXPECT_EQ(text.rfind("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[", 0), 0u) << text;
  for (std::string what : {"\"name\":\"grad.w\",\"cat\":\"op\",\"ph\":\"b\"", "\"name\":\"grad.w\",\"cat\":\"op\",\"ph\":\"e\"",
                           "\"name\":\"grad.b\",\"cat\":\"op\",\"ph\":\"b\"", "\"name\":\"NEGOTIATE_ALLREDUCE\"",
                           "\"name\":\"QUEUE\"", "\"name\":\"ALLREDUCE\"", "\"name\":\"CYCLE_START\"",
                           "\"name\":\"cycle 2\""})
    EXPECT_NE(text.find(what), std::string::npos) << what << "\n" << text;
  for (std::string what : {"before.start", "after.stop", "straddles.start", "\"name\":\"cycle 1\"",
                           "\"name\":\"cycle 4\""})
    EXPECT_EQ(text.find(what), std::string::npos) << what << "\n" << text;
  // Three phases, each a b/e pair, for each of the two ops.
  std::size_t pairs = 0;
  for (auto at = text.find("\"name\":\"QUEUE\""); at != std::string::npos; at = text.find("\"name\":\"QUEUE\"", at + 1))
    ++pairs;
  EXPECT_EQ(pairs, 4u);
  EXPECT_FALSE(fs::exists(o.path + ".chorus-trace"));
  EXPECT_FALSE(fs::exists(o.path + ".tmp"));
}

TEST_F(live_timeline_test, WithoutMarkCyclesThereAreNoCycleMarks) {
  observer_slot slot;
  trace::live_timeline_options o;
  o.path = dir_ + "/plain.json";
  auto t = trace::live_timeline::start(o);
  ASSERT_TRUE(t.ok()) << t.error().to_string();
  slot.exchange((*t)->events());
  one_op(slot, 1, "grad.w", 1, 1, clock::now());
  slot.exchange(nullptr);
  ASSERT_TRUE((*t)->finish().ok());
  auto text = read(o.path);
  EXPECT_NE(text.find("\"name\":\"NEGOTIATE_ALLREDUCE\""), std::string::npos) << text;
  EXPECT_EQ(text.find("CYCLE_START"), std::string::npos) << text;
}

TEST_F(live_timeline_test, APathThatCannotBeCreatedIsAnErrorNamingIt) {
  trace::live_timeline_options o;
  o.path = dir_ + "/no/such/dir/timeline.json";
  auto t = trace::live_timeline::start(o);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error().code(), errc::config);
  EXPECT_NE(t.error().message().find(o.path), std::string::npos) << t.error().message();
}

TEST_F(live_timeline_test, DroppedWithoutFinishLeavesNoScratch) {
  trace::live_timeline_options o;
  o.path = dir_ + "/dropped.json";
  {
    auto t = trace::live_timeline::start(o);
    ASSERT_TRUE(t.ok()) << t.error().to_string();
    (*t)->events()->on_enqueue(1, spec("w"), clock::now());
  }
  EXPECT_FALSE(fs::exists(o.path + ".chorus-trace"));
}

}  // namespace
}  // namespace chorus::telemetry
