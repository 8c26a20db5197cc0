// The settings every rank must share (runtime/collectives/settings_check.hpp): what is
// published reads back the same; a rank whose value differs is named with the variable and both
// values; a published text that is not those lines is a protocol error that shows at most 64
// characters of it. The multi-process case is in tests/multiproc/small_allreduce_test.cpp.
#include <gtest/gtest.h>

#include <string>

#include "runtime/collectives/communicator.hpp"
#include "runtime/collectives/settings_check.hpp"

namespace chorus {
namespace {

TEST(settings_check, what_is_published_reads_back_the_same) {
  collective_options o;
  o.caller_bytes = 123;
  o.hierarchical = hier_mode::off;
  auto mine = deciding_settings(o);
  EXPECT_EQ(encode_settings(mine),
            "CHORUS_CALLER_ALLREDUCE_BYTES=123\nCHORUS_SMALL_ALLREDUCE_BYTES=65536\nCHORUS_HIERARCHICAL=off\n");
  auto back = decode_settings(encode_settings(mine), mine, 3);
  ASSERT_TRUE(back) << back.error().to_string();
  EXPECT_EQ(*back, mine);
  EXPECT_TRUE(compare_settings(mine, *back, 3).ok());
}

TEST(settings_check, a_rank_with_another_value_is_named_with_the_variable_and_both_values) {
  collective_options zero, four;
  zero.caller_bytes = 0;
  four.caller_bytes = 4u << 20;
  EXPECT_EQ(compare_settings(deciding_settings(four), deciding_settings(zero), 2).to_string(),
            "config: CHORUS_CALLER_ALLREDUCE_BYTES is 0 on rank 2 but 4194304 on rank 0: every rank of a job must be "
            "given the same value (it decides which path or algorithm each allreduce takes)");
  collective_options on = four;
  on.hierarchical = hier_mode::on;
  EXPECT_EQ(compare_settings(deciding_settings(four), deciding_settings(on), 1).code(), errc::config);
}

TEST(settings_check, a_text_that_is_not_the_settings_is_a_protocol_error_shown_short) {
  auto shape = deciding_settings(collective_options{});
  const std::string hostile(1000, 'x');
  auto bad = decode_settings(hostile, shape, 1);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().to_string(), "protocol: rank 1 published its settings as '" + std::string(64, 'x') +
                                         "...', expected CHORUS_CALLER_ALLREDUCE_BYTES=... in that line");
  // Lines out of order, or one missing.
  EXPECT_FALSE(decode_settings("CHORUS_SMALL_ALLREDUCE_BYTES=1\nCHORUS_CALLER_ALLREDUCE_BYTES=1\n", shape, 1));
  EXPECT_FALSE(decode_settings("CHORUS_CALLER_ALLREDUCE_BYTES=1\n", shape, 1));
}

}  // namespace
}  // namespace chorus
