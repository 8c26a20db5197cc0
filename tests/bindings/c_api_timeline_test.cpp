// The C API's timeline calls (chorus_start_timeline / chorus_stop_timeline) in a job of one
// rank: what the file holds between start and stop, cycle marks, the file written at shutdown,
// and an error text for every bad path or call.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "chorus/chorus.h"
#include "tests/support/mini_json.hpp"
#include "tests/support/c_api_fixture.hpp"
#include "tests/support/one_rank_api.hpp"

namespace {

using chorus::testing::c_api;
using chorus::testing::clear_launcher_env;
using chorus::testing::has;

/// A fresh directory under /tmp, removed with what it holds at the end of the test.
struct scratch_dir {
  std::filesystem::path path;
  scratch_dir() {
    char tmpl[] = "/tmp/chorus-c-timeline-XXXXXX";
    const char* made = ::mkdtemp(tmpl);
    if (made == nullptr) throw std::runtime_error("mkdtemp failed");
    path = made;
  }
  ~scratch_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

/// One int32 sum allreduce of `name` (enqueue, wait, release).
void allreduce_once(const char* name) {
  int32_t v[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  int64_t shape[] = {8};
  int64_t h = chorus_enqueue_allreduce(chorus_register(name), v, shape, 1, CHORUS_INT32, CHORUS_OP_SUM, nullptr, nullptr);
  ASSERT_GE(h, 0) << chorus_last_error();
  EXPECT_EQ(chorus_wait(h, 10000), CHORUS_OK) << chorus_error_string(h);
  chorus_release(h);
}

/// The traceEvents of the Chrome-trace JSON at `path` (fails the test when it does not parse).
chorus::testing::json::array trace_events(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  auto doc = chorus::testing::json::parse(text.str());
  if (!doc["traceEvents"].is_array()) throw std::runtime_error(path.string() + ": no traceEvents array");
  return doc["traceEvents"].arr();
}

/// Events whose name mentions `part`, with phase `ph` ("" = any).
int count_events(const chorus::testing::json::array& events, const std::string& part, const std::string& ph) {
  int n = 0;
  for (auto& e : events) {
    if (!e["name"].is_string() || e["name"].str().find(part) == std::string::npos) continue;
    if (ph.empty() || (e["ph"].is_string() && e["ph"].str() == ph)) ++n;
  }
  return n;
}

TEST_F(c_api, timeline_holds_the_ops_between_start_and_stop) {
  scratch_dir dir;
  const std::string path = (dir.path / "timeline.json").string();
  EXPECT_EQ(chorus_stop_timeline(), CHORUS_OK) << chorus_last_error();  // stop without start: nothing to do
  allreduce_once("c.tl.before");
  ASSERT_EQ(chorus_start_timeline(path.c_str(), 1), CHORUS_OK) << chorus_last_error();
  EXPECT_TRUE(std::filesystem::exists(path)) << "the file is created at the start";
  allreduce_once("c.tl.during");
  ASSERT_EQ(chorus_stop_timeline(), CHORUS_OK) << chorus_last_error();
  allreduce_once("c.tl.after");
  EXPECT_EQ(chorus_stop_timeline(), CHORUS_OK) << chorus_last_error();  // a second stop: nothing to do

  chorus::testing::json::array events;
  ASSERT_NO_THROW(events = trace_events(path));
  int op_begins = 0, op_ends = 0;
  for (auto& e : events) {
    if (!e["cat"].is_string() || e["cat"].str() != "op" || !e["name"].is_string() ||
        e["name"].str().find("c.tl.during") == std::string::npos)
      continue;
    op_begins += e["ph"].is_string() && e["ph"].str() == "b";
    op_ends += e["ph"].is_string() && e["ph"].str() == "e";
  }
  EXPECT_EQ(op_begins, 1) << "the op span of 'c.tl.during' begins once";
  EXPECT_EQ(op_ends, 1) << "the op span of 'c.tl.during' ends once";
  EXPECT_GE(count_events(events, "CYCLE_START", "i"), 1) << "mark_cycles=1 marks the cycles";
  EXPECT_EQ(count_events(events, "c.tl.before", ""), 0);
  EXPECT_EQ(count_events(events, "c.tl.after", ""), 0);
}

TEST_F(c_api, timeline_without_mark_cycles_and_written_by_shutdown) {
  scratch_dir dir;
  const std::string path = (dir.path / "at_shutdown.json").string();
  ASSERT_EQ(chorus_start_timeline(path.c_str(), 0), CHORUS_OK) << chorus_last_error();
  allreduce_once("c.tl.shutdown");
  chorus_shutdown();  // writes the timeline still running
  chorus::testing::json::array events;
  ASSERT_NO_THROW(events = trace_events(path));
  EXPECT_GE(count_events(events, "c.tl.shutdown", ""), 1);
  EXPECT_EQ(count_events(events, "CYCLE_START", ""), 0);
}

TEST_F(c_api, timeline_rejects_bad_paths_and_calls_with_a_text) {
  scratch_dir dir;
  const std::string missing = (dir.path / "no" / "such" / "dir" / "t.json").string();
  EXPECT_EQ(chorus_start_timeline(missing.c_str(), 0), CHORUS_ERR_CONFIG);
  EXPECT_TRUE(has(chorus_last_error(), "chorus_start_timeline")) << chorus_last_error();
  EXPECT_TRUE(has(chorus_last_error(), missing)) << chorus_last_error();
  EXPECT_TRUE(has(chorus_last_error(), "cannot create")) << chorus_last_error();
  EXPECT_EQ(chorus_start_timeline("", 0), CHORUS_ERR_CONFIG);
  EXPECT_TRUE(has(chorus_last_error(), "empty")) << chorus_last_error();
  EXPECT_EQ(chorus_start_timeline(nullptr, 0), CHORUS_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(has(chorus_last_error(), "path is NULL")) << chorus_last_error();
  EXPECT_EQ(chorus_stop_timeline(), CHORUS_OK) << "no timeline started: " << chorus_last_error();

  // From a completion callback: rejected with a text, on that callback's thread.
  struct from_callback {
    std::atomic<int> calls{0};
    int start = -1, stop = -1;
    std::string start_error, stop_error;
  } seen;
  auto cb = [](int64_t, int, const char*, void* user) {
    auto* s = static_cast<from_callback*>(user);
    s->start = chorus_start_timeline("/tmp/never-written.json", 0);
    s->start_error = chorus_last_error();
    s->stop = chorus_stop_timeline();
    s->stop_error = chorus_last_error();
    ++s->calls;
  };
  int32_t v[2] = {1, 2};
  int64_t shape[] = {2};
  int64_t h = chorus_enqueue_allreduce(chorus_register("c.tl.cb"), v, shape, 1, CHORUS_INT32, CHORUS_OP_SUM, cb, &seen);
  ASSERT_GE(h, 0) << chorus_last_error();
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (seen.calls == 0 && std::chrono::steady_clock::now() < end)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  chorus_release(h);
  ASSERT_EQ(seen.calls.load(), 1);
  EXPECT_EQ(seen.start, CHORUS_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(has(seen.start_error.c_str(), "completion callback")) << seen.start_error;
  EXPECT_EQ(seen.stop, CHORUS_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(has(seen.stop_error.c_str(), "completion callback")) << seen.stop_error;
  EXPECT_FALSE(std::filesystem::exists("/tmp/never-written.json"));

  chorus_shutdown();
  EXPECT_EQ(chorus_start_timeline((dir.path / "late.json").c_str(), 0), CHORUS_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(has(chorus_last_error(), "not initialized")) << chorus_last_error();
  EXPECT_FALSE(std::filesystem::exists(dir.path / "late.json"));
}

}  // namespace
