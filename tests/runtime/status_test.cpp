// status_from_string: a status sent as text (an abort notice) comes back with its code.
#include <gtest/gtest.h>

#include "runtime/core/status.hpp"

namespace chorus {
namespace {

TEST(status_from_string, reads_back_what_to_string_wrote) {
  for (int c = 1; c <= static_cast<int>(errc::internal); ++c) {
    status st{static_cast<errc>(c), "rank 2 stream 0: x: y"};
    auto back = status_from_string(st.to_string(), errc::internal);
    EXPECT_EQ(back.code(), st.code()) << st.to_string();
    EXPECT_EQ(back.message(), st.message());
  }
}

TEST(status_from_string, text_without_a_known_code_keeps_its_words) {
  auto st = status_from_string("timeouts: not a code", errc::protocol);
  EXPECT_EQ(st.code(), errc::protocol);
  EXPECT_EQ(st.message(), "timeouts: not a code");
  EXPECT_EQ(status_from_string("", errc::connection_lost).code(), errc::connection_lost);
}

}  // namespace
}  // namespace chorus
