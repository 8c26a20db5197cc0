// Test helper shared by the multi-process tests that start chorus-testrank jobs
// (local_job.hpp): the job's seed, chosen and printed alike in every test, the checks such
// tests make of their ranks (exited 0 within the bound, printed the line that says done; all
// failed with one error; the survivors of a killed rank name it) and how Chorus' errors name
// ranks.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "tests/multiproc/local_job.hpp"

namespace chorus::testing {

/// A randomised job's seed: CHORUS_TEST_SEED when set, else a fresh one; printed as
/// "<who> n=<size> seed=<s> (re-run with CHORUS_TEST_SEED=<s>)".
inline uint64_t job_seed(const char* who, int size) {
  const char* fixed = std::getenv("CHORUS_TEST_SEED");
  uint64_t seed = fixed ? std::strtoull(fixed, nullptr, 10) : std::random_device{}();
  std::printf("%s n=%d seed=%llu (re-run with CHORUS_TEST_SEED=%llu)\n", who, size,
              static_cast<unsigned long long>(seed), static_cast<unsigned long long>(seed));
  std::fflush(stdout);
  return seed;
}

/// Names the cases of a test parameterised by the job size: "n2", "n3", ...
inline std::string size_name(const ::testing::TestParamInfo<int>& info) { return "n" + std::to_string(info.param); }

/// "rank 2" or "ranks 0-1": how Chorus' errors name a run of ranks.
inline std::string rank_run(int first, int last) {
  return first == last ? "rank " + std::to_string(first)
                       : "ranks " + std::to_string(first) + "-" + std::to_string(last);
}

/// Every rank exited 0 within its deadline. `context` prefixes each failure (e.g. the seed).
inline void expect_all_passed(const std::vector<rank_result>& results, const std::string& context = "") {
  for (auto& r : results) {
    EXPECT_FALSE(r.timed_out) << context << "rank " << r.rank << " hung:\n" << r.output;
    EXPECT_TRUE(r.exited && r.exit_code == 0) << context << "rank " << r.rank << " failed:\n" << r.output;
  }
}

/// Every rank ended within its deadline with exit 3 (chorus-testrank's error exit), printing
/// `error` (e.g. "testrank error: protocol").
inline void expect_every_rank_failed_with(const std::vector<rank_result>& results, const std::string& error) {
  for (auto& r : results) {
    EXPECT_FALSE(r.timed_out) << "rank " << r.rank << " hung:\n" << r.output;
    EXPECT_TRUE(r.exited && r.exit_code == 3) << "rank " << r.rank << ":\n" << r.output;
    EXPECT_NE(r.output.find(error), std::string::npos) << r.output;
  }
}

/// Every rank but `victim` (which died) ended within its deadline with exit 3 and a lost
/// connection naming the victim ("rank <victim>").
inline void expect_survivors_name(const std::vector<rank_result>& results, int victim) {
  const std::string name = "rank " + std::to_string(victim);
  for (auto& r : results) {
    if (r.rank == victim) continue;
    EXPECT_FALSE(r.timed_out) << "rank " << r.rank << " hung after " << name << " died:\n" << r.output;
    EXPECT_TRUE(r.exited && r.exit_code == 3) << "rank " << r.rank << ":\n" << r.output;
    EXPECT_NE(r.output.find("testrank error: connection_lost"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find(name), std::string::npos) << "error does not name " << name << ":\n" << r.output;
  }
}

/// Every rank printed `text`.
inline void expect_every_rank_printed(const std::vector<rank_result>& results, const std::string& text,
                                      const std::string& context = "") {
  for (auto& r : results)
    EXPECT_NE(r.output.find(text), std::string::npos)
        << context << "rank " << r.rank << " lacks\n  " << text << "\noutput:\n"
        << r.output;
}

/// The ranks an error line names ("rank 2", "ranks 0-1" count as 2 and 0), except `self`.
inline std::set<int> named_ranks(const std::string& line, int self) {
  std::set<int> out;
  static const std::regex rank_re("ranks? ([0-9]+)");
  for (std::sregex_iterator it(line.begin(), line.end(), rank_re), end; it != end; ++it) {
    int r = std::stoi((*it)[1]);
    if (r != self) out.insert(r);
  }
  return out;
}

}  // namespace chorus::testing
