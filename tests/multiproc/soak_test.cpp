// The soak's short form (./chorus.sh soak runs the long one): three ranks, 1000 checked operations
// each of random kinds, dtypes, sizes and names with random delays (chorus-testrank
// pipeline-soak). Every rank must report no error and no descriptor left open.
#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "tests/support/shell_run.hpp"

namespace chorus::testing {
namespace {

TEST(soak, a_thousand_random_operations_on_three_ranks_are_exact_and_leave_no_descriptor) {
  auto r = run("timeout 170 " CHORUSRUN_PATH " -np 3 --timeout 150 -- " CHORUS_TESTRANK_PATH " pipeline-soak 1000 20261126");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  int lines = 0;
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);) {
    auto at = line.find("RESULT soak ");
    if (at == std::string::npos) continue;
    std::istringstream f(line.substr(at + 12));
    long ops = 0, errors = -1, rss = 0, fds = -1;
    f >> ops >> errors >> rss >> fds;
    EXPECT_EQ(ops, 1000) << line;
    EXPECT_EQ(errors, 0) << line;
    EXPECT_EQ(fds, 0) << "descriptors grew: " << line;
    ++lines;
  }
  EXPECT_EQ(lines, 3) << r.out;
}

}  // namespace
}  // namespace chorus::testing
