// compression_policy (runtime/collectives/compression_policy.hpp): which collectives keep fp16/bf16 given
// the link entries every rank published, and CHORUS_COMPRESSION_SHM's two settings.
#include <gtest/gtest.h>

#include "runtime/collectives/compression_policy.hpp"
#include "runtime/config/config.hpp"

namespace chorus {
namespace {

std::vector<link_entry> one_host(int n) { return std::vector<link_entry>(static_cast<std::size_t>(n), {true, "hostA"}); }

TEST(compression_policy, all_ranks_on_shared_memory_drop_compression) {
  compression_policy g(one_host(3), shm_compression::automatic);
  EXPECT_TRUE(g.all_shm());
  EXPECT_EQ(g.effective(compression::fp16), compression::none);
  EXPECT_EQ(g.effective(compression::bf16), compression::none);
  EXPECT_TRUE(g.drops_for_job());
  EXPECT_NE(g.describe().find("compression off"), std::string::npos) << g.describe();
}

TEST(compression_policy, a_peer_over_tcp_keeps_compression) {
  auto e = one_host(3);
  e[2].identity = "hostB";
  compression_policy g(e, shm_compression::automatic);
  EXPECT_FALSE(g.all_shm());
  EXPECT_EQ(g.effective(compression::fp16), compression::fp16);
  EXPECT_FALSE(g.drops_for_job());
  EXPECT_NE(g.describe().find("TCP"), std::string::npos) << g.describe();
  // A process set inside host A is all shared memory; one reaching host B is not.
  EXPECT_EQ(g.effective(compression::fp16, {0, 1}), compression::none);
  EXPECT_EQ(g.effective(compression::bf16, {1, 2}), compression::bf16);
}

TEST(compression_policy, rings_switched_off_on_one_rank_keep_compression) {
  auto e = one_host(2);
  e[1].shm_on = false;  // CHORUS_SHM_BYTES=0 there: the pair talks TCP (plan_links)
  compression_policy g(e, shm_compression::automatic);
  EXPECT_EQ(g.effective(compression::fp16), compression::fp16);
}

TEST(compression_policy, forced_on_keeps_compression_on_shared_memory) {
  compression_policy g(one_host(2), shm_compression::on);
  EXPECT_TRUE(g.all_shm());
  EXPECT_EQ(g.effective(compression::fp16), compression::fp16);
  EXPECT_FALSE(g.drops_for_job());
  EXPECT_NE(g.describe().find("CHORUS_COMPRESSION_SHM=on"), std::string::npos) << g.describe();
}

TEST(compression_policy, no_compression_asked_stays_none) {
  for (auto mode : {shm_compression::automatic, shm_compression::on}) {
    compression_policy shm(one_host(2), mode), mixed({{true, "a"}, {true, "b"}}, mode);
    EXPECT_EQ(shm.effective(compression::none), compression::none);
    EXPECT_EQ(mixed.effective(compression::none), compression::none);
  }
}

TEST(compression_policy, one_rank_or_no_link_information_keeps_what_was_asked) {
  EXPECT_EQ(compression_policy(one_host(1), shm_compression::automatic).effective(compression::fp16),
            compression::fp16);
  EXPECT_EQ(compression_policy().effective(compression::bf16), compression::bf16);
  EXPECT_EQ(compression_policy(one_host(3), shm_compression::automatic).effective(compression::fp16, {1}),
            compression::fp16);
}

TEST(compression_policy, every_rank_decides_alike) {
  // The decision reads only the entries, which every rank holds identically: no rank input.
  auto e = one_host(4);
  e[3].identity = "hostB";
  compression_policy a(e, shm_compression::automatic), b(e, shm_compression::automatic);
  for (std::vector<int> m : {std::vector<int>{}, {0, 1, 2}, {2, 3}, {0, 3}})
    EXPECT_EQ(a.effective(compression::fp16, m), b.effective(compression::fp16, m));
}

TEST(compression_policy, setting_is_read_from_the_environment) {
  auto read = [](const char* value) {
    return read_config([value](const char* name) -> const char* {
      return std::string_view(name) == "CHORUS_COMPRESSION_SHM" ? value : nullptr;
    });
  };
  ASSERT_TRUE(read(nullptr));
  EXPECT_EQ(read(nullptr)->collectives.wire_on_shm, shm_compression::automatic);
  EXPECT_EQ(read("on")->collectives.wire_on_shm, shm_compression::on);
  EXPECT_EQ(read("auto")->collectives.wire_on_shm, shm_compression::automatic);
  auto bad = read("off");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message().find("CHORUS_COMPRESSION_SHM"), std::string::npos) << bad.error().message();
}

}  // namespace
}  // namespace chorus
