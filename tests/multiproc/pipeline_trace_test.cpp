// Tracing a real job (CHORUS_TRACE) and reading it back with chorus-trace: 2 and 3 ranks run
// chorus-testrank pipeline-exact with tracing on; the replay of their traces matches; a ready
// record moved one cycle later on one rank is reported at that cycle; a truncated trace is
// an error naming the file and byte offset; the timeline is Chrome-trace JSON with events of
// every rank. Every process has a hard deadline and is killed by its pid after it.
#include <unistd.h>

#include <gtest/gtest.h>

#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>

#include "tests/multiproc/local_job.hpp"
#include "tests/support/child_process.hpp"

namespace chorus::testing {
namespace {

namespace fs = std::filesystem;

struct tool_result {
  int exit_code = -1;  ///< -1: killed at the deadline
  std::string out;     ///< stdout
  std::string err;     ///< stderr
};

std::string slurp(const std::string& path) { return read_file(path); }

/// Runs chorus-trace with `args`; killed after `limit`.
tool_result chorus_trace(const std::vector<std::string>& args, const std::string& scratch,
                         std::chrono::seconds limit = std::chrono::seconds(60)) {
  std::vector<std::string> argv{CHORUS_TRACE_TOOL_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  auto run = run_bounded(argv, scratch, limit, true);
  return {run.status.exited ? run.status.exit_code : -1, std::move(run.out), std::move(run.err)};
}

/// A strict RFC 8259 syntax check: one JSON value and nothing after it.
class json_syntax {
 public:
  static bool valid(const std::string& s) {
    json_syntax j(s);
    j.ws();
    return j.value() && (j.ws(), j.p_ == s.size());
  }

 private:
  explicit json_syntax(const std::string& s) : s_(s) {}
  void ws() {
    while (p_ < s_.size() && std::strchr(" \t\r\n", s_[p_])) ++p_;
  }
  bool eat(char c) {
    ws();
    if (p_ < s_.size() && s_[p_] == c) return ++p_, true;
    return false;
  }
  bool value() {
    ws();
    if (p_ >= s_.size()) return false;
    char c = s_[p_];
    if (c == '{') return object();
    if (c == '[') return array();
    if (c == '"') return string();
    for (const char* w : {"true", "false", "null"})
      if (s_.compare(p_, std::strlen(w), w) == 0) return p_ += std::strlen(w), true;
    return number();
  }
  bool object() {
    ++p_;
    if (eat('}')) return true;
    do {
      ws();
      if (!string() || !eat(':') || !value()) return false;
    } while (eat(','));
    return eat('}');
  }
  bool array() {
    ++p_;
    if (eat(']')) return true;
    do {
      if (!value()) return false;
    } while (eat(','));
    return eat(']');
  }
  bool string() {
    if (p_ >= s_.size() || s_[p_] != '"') return false;
    for (++p_; p_ < s_.size(); ++p_) {
      auto c = static_cast<unsigned char>(s_[p_]);
      if (c == '"') return ++p_, true;
      if (c < 0x20) return false;
      if (c == '\\') {
        if (++p_ >= s_.size() || !std::strchr("\"\\/bfnrtu", s_[p_])) return false;
        if (s_[p_] == 'u') {
          for (int i = 0; i < 4; ++i)
            if (++p_ >= s_.size() || !std::isxdigit(static_cast<unsigned char>(s_[p_]))) return false;
        }
      }
    }
    return false;
  }
  bool number() {
    static const std::regex num("-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][+-]?[0-9]+)?");
    std::smatch m;
    auto rest = s_.substr(p_, 40);
    if (!std::regex_search(rest, m, num, std::regex_constants::match_continuous)) return false;
    p_ += static_cast<std::size_t>(m.length(0));
    return true;
  }
  const std::string& s_;
  std::size_t p_ = 0;
};

/// The value of a number field `"key":N` in one JSON line (-1 when absent).
double number_field(const std::string& line, const std::string& key) {
  std::smatch m;
  if (!std::regex_search(line, m, std::regex("\"" + key + "\":(-?[0-9.eE+-]+)"))) return -1;
  return std::stod(m[1].str());
}

/// The value of a string field `"key":"..."` (names here hold no quotes or escapes).
std::string string_field(const std::string& line, const std::string& key) {
  std::smatch m;
  if (!std::regex_search(line, m, std::regex("\"" + key + "\":\"([^\"]*)\""))) return "";
  return m[1].str();
}

/// The strings of an array field `"key":["a","b"]`.
std::vector<std::string> names_field(const std::string& line, const std::string& key) {
  std::smatch m;
  std::vector<std::string> out;
  if (!std::regex_search(line, m, std::regex("\"" + key + "\":\\[([^\\]]*)\\]"))) return out;
  auto body = m[1].str();
  static const std::regex item("\"([^\"]*)\"");
  for (auto it = std::sregex_iterator(body.begin(), body.end(), item); it != std::sregex_iterator(); ++it)
    out.push_back((*it)[1].str());
  return out;
}

/// A recorded job: `size` ranks of pipeline-exact (seed fixed, 2 steps) traced into dir().
class recorded_job {
 public:
  explicit recorded_job(int size, local_job::env_map extra = {}) {
    char tmpl[] = "/tmp/chorus-trace-job-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    extra["CHORUS_TRACE"] = dir_ + "/trace";
    local_job job(size, {CHORUS_TESTRANK_PATH, "pipeline-exact", "4242", "2"}, extra);
    results_ = job.wait(std::chrono::seconds(90));
  }
  ~recorded_job() { fs::remove_all(dir_); }
  std::string dir() const { return dir_ + "/trace"; }
  std::string scratch() const { return dir_; }
  void expect_passed() const {
    for (auto& r : results_) {
      EXPECT_FALSE(r.timed_out) << "rank " << r.rank << " hung:\n" << r.output;
      EXPECT_TRUE(r.exited && r.exit_code == 0) << "rank " << r.rank << " failed:\n" << r.output;
    }
  }

 private:
  std::string dir_;
  std::vector<rank_result> results_;
};

// Replay relies on the negotiator reporting each tensor's strategy->contribution_cycle() and on
// the pipeline's tunables carrying in_place_bytes.
class pipeline_trace : public ::testing::TestWithParam<int> {};

TEST_P(pipeline_trace, replay_of_a_recorded_job_matches) {
  recorded_job job(GetParam());
  job.expect_passed();
  auto r = chorus_trace({"replay", job.dir()}, job.scratch());
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(std::regex_search(r.out, std::regex("^replay matches: [1-9][0-9]* cycles, 400 tensors\n$")))
      << r.out << r.err;
}

// Hosts faked by CHORUS_HOST_ID (chorus-testrank's CHORUS_TEST_HOSTS), hierarchy forced on: the
// buckets record which algorithm ran them, and replay (which has no hosts) still matches.
TEST(pipeline_trace_hier, buckets_name_their_algorithm_and_replay_matches) {
  recorded_job job(4, {{"CHORUS_TEST_HOSTS", "2,2"}, {"CHORUS_HIERARCHICAL", "on"}});
  job.expect_passed();
  auto r = chorus_trace({"replay", job.dir()}, job.scratch());
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("replay matches"), std::string::npos) << r.out << r.err;
  auto d = chorus_trace({"dump", job.dir() + "/rank-0.trace"}, job.scratch());
  EXPECT_NE(d.out.find("\"algorithm\":\"hier_"), std::string::npos) << d.out.substr(0, 4000);
}

INSTANTIATE_TEST_SUITE_P(sizes, pipeline_trace, ::testing::Values(2, 3),
                         [](const ::testing::TestParamInfo<int>& i) { return "n" + std::to_string(i.param); });

uint32_t crc32_of(const std::string& data, std::size_t from, std::size_t n) {
  uint32_t c = 0xFFFFFFFFu;
  for (std::size_t i = from; i < from + n; ++i) {
    c ^= static_cast<unsigned char>(data[i]);
    for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
  }
  return c ^ 0xFFFFFFFFu;
}

uint32_t u32_at(const std::string& d, std::size_t at) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<unsigned char>(d[at + i])) << (8 * i);
  return v;
}

/// Sets the cycle of the ready record at `offset` (its last byte, a one-byte varint) to
/// `cycle` and fixes its block's checksum (telemetry/trace/format.hpp).
void move_ready_record(const std::string& path, std::size_t offset, uint64_t cycle) {
  auto d = slurp(path);
  ASSERT_LT(cycle, 128u);
  std::size_t len = static_cast<unsigned char>(d[offset]);
  ASSERT_LT(len, 128u);
  std::size_t last = offset + 1 + len - 1;
  ASSERT_LT(static_cast<unsigned char>(d[last]), 128u);
  d[last] = static_cast<char>(cycle);
  for (std::size_t at = 36; at < d.size();) {
    uint32_t n = u32_at(d, at);
    if (offset >= at + 8 && offset < at + 8 + n) {
      uint32_t c = crc32_of(d, at + 8, n);
      for (int i = 0; i < 4; ++i) d[at + 4 + i] = static_cast<char>(c >> (8 * i));
      std::ofstream(path, std::ios::binary | std::ios::trunc) << d;
      return;
    }
    at += 8 + n;
  }
  FAIL() << "no block holds offset " << offset;
}

TEST(pipeline_trace_damage, a_tensor_ready_one_cycle_later_diverges_at_that_cycle) {
  recorded_job job(2);
  job.expect_passed();
  // Rank 0's agreed cycles, from the JSON dump.
  auto d0 = chorus_trace({"dump", job.dir() + "/rank-0.trace"}, job.scratch());
  ASSERT_EQ(d0.exit_code, 0) << d0.err;
  std::map<std::string, std::vector<uint64_t>> agreed_in;  // name → cycles, in order
  uint64_t last_cycle = 0;
  std::istringstream l0(d0.out);
  for (std::string line; std::getline(l0, line);) {
    auto kind = string_field(line, "kind");
    auto c = static_cast<uint64_t>(number_field(line, "cycle"));
    if (kind == "cycle") last_cycle = std::max(last_cycle, c);
    if (kind != "agreed") continue;
    for (auto& n : names_field(line, "names")) agreed_in[n].push_back(c);
  }
  // An op that some rank made ready in the very cycle that agreed it (that rank held it back).
  std::size_t offset = 0;
  uint64_t cycle = 0;
  std::string name, file;
  for (int rank : {1, 0}) {
    file = job.dir() + "/rank-" + std::to_string(rank) + ".trace";
    auto d = chorus_trace({"dump", file}, job.scratch());
    ASSERT_EQ(d.exit_code, 0) << d.err;
    std::map<std::string, std::size_t> seen;
    std::istringstream lines(d.out);
    for (std::string line; std::getline(lines, line);) {
      if (string_field(line, "kind") != "ready") continue;
      auto n = string_field(line, "name");
      auto k = seen[n]++;
      auto c = static_cast<uint64_t>(number_field(line, "cycle"));
      if (k < agreed_in[n].size() && agreed_in[n][k] == c && c + 1 < last_cycle && c + 1 < 128) {
        offset = static_cast<std::size_t>(number_field(line, "offset")), cycle = c, name = n;
        break;
      }
    }
    if (offset) break;
  }
  ASSERT_NE(offset, 0u) << "no ready record in its agreeing cycle below cycle 127";
  move_ready_record(file, offset, cycle + 1);
  auto r = chorus_trace({"replay", job.dir()}, job.scratch());
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_EQ(r.out.rfind("replay differs at cycle " + std::to_string(cycle) + ", rank 0: ", 0), 0u)
      << "moved '" << name << "' in " << file << " from cycle " << cycle << ":\n" << r.out << r.err;
}

TEST(pipeline_trace_damage, a_truncated_trace_is_an_error_naming_the_file_and_offset) {
  recorded_job job(2);
  job.expect_passed();
  // Cut rank 0's file in the middle.
  auto path = job.dir() + "/rank-0.trace";
  auto bytes = slurp(path);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes.substr(0, bytes.size() / 2);
  auto t = chorus_trace({"dump", path}, job.scratch());
  EXPECT_EQ(t.exit_code, 1) << t.err;
  EXPECT_TRUE(std::regex_search(t.err, std::regex("trace " + path + ": truncated: .* at byte offset [0-9]+")))
      << t.err;
  auto offset_text = std::regex_replace(t.err, std::regex("(?:.|\n)*byte offset ([0-9]+)(?:.|\n)*"), "$1");
  EXPECT_LE(std::stoull(offset_text), bytes.size() / 2);
  // Records before the damage only: every dumped record starts before it.
  std::istringstream lt(t.out);
  std::size_t lines = 0;
  for (std::string line; std::getline(lt, line); ++lines)
    EXPECT_LT(number_field(line, "offset"), static_cast<double>(std::stoull(offset_text))) << line;
  EXPECT_GT(lines, 0u);
  auto rr = chorus_trace({"replay", job.dir()}, job.scratch());
  EXPECT_EQ(rr.exit_code, 1);
  EXPECT_NE(rr.err.find(path + ": truncated"), std::string::npos) << rr.err;
}

TEST(pipeline_trace_timeline, is_chrome_trace_json_with_events_from_every_rank) {
  recorded_job job(3);
  job.expect_passed();
  auto out = job.scratch() + "/timeline.json";
  auto r = chorus_trace({"timeline", job.dir(), "-o", out}, job.scratch());
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto text = slurp(out);
  ASSERT_TRUE(json_syntax::valid(text)) << "not valid JSON: " << out;
  ASSERT_EQ(text.rfind("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[", 0), 0u);
  std::map<int, std::set<std::string>> cats;  // pid → categories of its events
  std::istringstream lines(text);
  std::size_t events = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("{\"name\":", 0) != 0) continue;  // one event per line
    if (line.back() == ',') line.pop_back();
    ASSERT_TRUE(json_syntax::valid(line)) << line;
    ++events;
    auto ph = string_field(line, "ph");
    ASSERT_FALSE(ph.empty()) << line;
    if (ph == "M") continue;
    ASSERT_GE(number_field(line, "ts"), 0.0) << line;
    if (ph == "X") EXPECT_GE(number_field(line, "dur"), 0.0) << line;
    cats[static_cast<int>(number_field(line, "pid"))].insert(string_field(line, "cat"));
  }
  EXPECT_GT(events, 100u);
  ASSERT_EQ(cats.size(), 3u);
  for (auto& [pid, c] : cats)
    for (const char* want : {"negotiation", "fusion", "chunk", "op"})
      EXPECT_TRUE(c.count(want)) << "rank " << pid << " has no '" << want << "' events";
  auto s = chorus_trace({"stragglers", job.dir()}, job.scratch());
  EXPECT_EQ(s.exit_code, 0) << s.err;
  EXPECT_NE(s.out.find("stragglers: 3 ranks, 400 operations"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("slowest ranks first:"), std::string::npos) << s.out;
}

}  // namespace
}  // namespace chorus::testing
