// chorusrun's cleanup of a finished job's shared-memory segments: in a scratch folder standing
// for /dev/shm, exactly the regular files named chorus-<this job's id>-... go; other jobs'
// segments, look-alike names, symlinks and folders stay.
#include "bindings/cli/chorusrun/shm_cleanup.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace chorus::chorusrun {
namespace {

namespace fs = std::filesystem;

TEST(shm_cleanup, removes_this_jobs_segments_and_nothing_else) {
  fs::path dir = fs::path(::testing::TempDir()) / ("chorus-shm-cleanup-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto touch = [&](const std::string& name) { std::ofstream(dir / name) << "x"; };
  // The ranks spell the id in lower-case hex without leading zeros (runtime/transport/shm/lanes.cpp).
  touch("chorus-abc123-0-1-0-deadbeef");
  touch("chorus-abc123-1-0-7-feedface");
  touch("chorus-abc1234-0-1-0-00");      // another job whose id starts alike
  touch("chorus-ffff-0-1-0-00");         // another job
  touch("other-chorus-abc123-0-1-0-0");  // not a segment name
  fs::create_directory(dir / "chorus-abc123-dir");
  fs::create_symlink(dir / "chorus-ffff-0-1-0-00", dir / "chorus-abc123-link");

  EXPECT_EQ(remove_job_segments("00000000000ABC123", dir.string()), 2);
  EXPECT_FALSE(fs::exists(dir / "chorus-abc123-0-1-0-deadbeef"));
  EXPECT_FALSE(fs::exists(dir / "chorus-abc123-1-0-7-feedface"));
  for (const char* kept : {"chorus-abc1234-0-1-0-00", "chorus-ffff-0-1-0-00", "other-chorus-abc123-0-1-0-0",
                           "chorus-abc123-dir", "chorus-abc123-link"})
    EXPECT_TRUE(fs::exists(fs::symlink_status(dir / kept))) << kept;
  EXPECT_EQ(remove_job_segments("not-hex", dir.string()), 0);
  EXPECT_EQ(remove_job_segments("", dir.string()), 0);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace chorus::chorusrun
