// A job of one rank for the C++ API tests: no launcher variables may leak in from the
// environment of the test run; the fixture inits before each test and shuts down after it.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "chorus/chorus.hpp"

namespace chorus::testing {

inline void clear_launcher_env() {
  for (const char* v :
       {"CHORUS_RANK", "CHORUS_SIZE", "CHORUS_LOCAL_RANK", "CHORUS_LOCAL_SIZE", "CHORUS_RENDEZVOUS", "RANK",
        "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "OMPI_COMM_WORLD_RANK",
        "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE", "SLURM_PROCID", "SLURM_NTASKS"})
    ::unsetenv(v);
}

class one_rank_api : public ::testing::Test {
 protected:
  void SetUp() override {
    clear_launcher_env();
    auto st = init();
    ASSERT_TRUE(st.ok()) << st.to_string();
  }
  void TearDown() override { shutdown(); }
};

inline bool mentions(const status& st, const std::string& text) { return st.message().find(text) != std::string::npos; }

}  // namespace chorus::testing
