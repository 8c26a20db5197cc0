// pipeline_options::from_config over configurations read from a fake environment: defaults,
// CHORUS_* values, HOROVOD_* aliases, contradictions and bad values (errors name the variable
// and the value). Every variable's own rules are tested in tests/runtime/config_test.cpp.
#include "actors/pipeline.hpp"

#include <gtest/gtest.h>

#include <map>

namespace chorus {
namespace {

using env_map = std::map<std::string, std::string>;

result<pipeline_options> read(const env_map& env) {
  auto c = read_config([&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
  if (!c) return c.error();
  return pipeline_options::from_config(*c);
}

TEST(pipeline_options, defaults_without_variables) {
  auto o = read({});
  ASSERT_TRUE(o.ok()) << o.error().to_string();
  EXPECT_EQ(o->negotiation, "gossip");
  EXPECT_FALSE(o->early_start);
  EXPECT_TRUE(o->hold_when_ahead);
  EXPECT_EQ(o->cycle_time, std::chrono::microseconds(1000));
  EXPECT_EQ(o->fusion_threshold, 64u << 20);
  EXPECT_EQ(o->chunk_bytes, 4u << 20);
  EXPECT_EQ(o->stall_check, std::chrono::seconds(60));
  EXPECT_EQ(o->stall_shutdown, std::chrono::seconds(0));
  EXPECT_EQ(o->scheduler_threads, 1);
  EXPECT_TRUE(o->scheduler_batch);
  EXPECT_EQ(o->in_place_bytes, 1u << 20);
  EXPECT_EQ(o->chunks_in_flight, 2u);
  EXPECT_EQ(o->connect_timeout, std::chrono::milliseconds(60000));
  // The defaults of the struct and of the configuration agree.
  pipeline_options plain;
  EXPECT_EQ(o->start_window, plain.start_window);
  EXPECT_EQ(o->fusion_threshold, plain.fusion_threshold);
  EXPECT_EQ(o->in_place_bytes, plain.in_place_bytes);
  EXPECT_EQ(o->cycle_time, plain.cycle_time);
  EXPECT_EQ(o->connect_timeout, plain.connect_timeout);
  EXPECT_EQ(o->scheduler_batch, plain.scheduler_batch);
}

TEST(pipeline_options, chorus_variables) {
  auto o = read({{"CHORUS_NEGOTIATION", "central"},
                 {"CHORUS_EARLY_START", "1"},
                 {"CHORUS_HOLD_WHEN_AHEAD", "0"},
                 {"CHORUS_CYCLE_TIME_MS", "0.25"},
                 {"CHORUS_FUSION_THRESHOLD", "1048576"},
                 {"CHORUS_CHUNK_BYTES", "65536"},
                 {"CHORUS_STALL_CHECK_TIME_SECONDS", "5"},
                 {"CHORUS_STALL_SHUTDOWN_TIME_SECONDS", "30"},
                 {"CHORUS_SCHEDULER_THREADS", "2"},
                 {"CHORUS_SCHEDULER_BATCH", "0"},
                 {"CHORUS_START_WINDOW", "8"},
                 {"CHORUS_IN_PLACE_BYTES", "0"},
                 {"CHORUS_CHUNKS_IN_FLIGHT", "4"},
                 {"CHORUS_CONNECT_TIMEOUT_SECONDS", "2.5"}});
  ASSERT_TRUE(o.ok()) << o.error().to_string();
  EXPECT_EQ(o->negotiation, "central");
  EXPECT_TRUE(o->early_start);
  EXPECT_FALSE(o->hold_when_ahead);
  EXPECT_EQ(o->cycle_time, std::chrono::microseconds(250));
  EXPECT_EQ(o->fusion_threshold, 1048576u);
  EXPECT_EQ(o->chunk_bytes, 65536u);
  EXPECT_EQ(o->stall_check, std::chrono::seconds(5));
  EXPECT_EQ(o->stall_shutdown, std::chrono::seconds(30));
  EXPECT_EQ(o->scheduler_threads, 2);
  EXPECT_FALSE(o->scheduler_batch);
  EXPECT_EQ(o->start_window, 8u);
  EXPECT_EQ(o->in_place_bytes, 0u);
  EXPECT_EQ(o->chunks_in_flight, 4u);
  EXPECT_EQ(o->connect_timeout, std::chrono::milliseconds(2500));
}

TEST(pipeline_options, horovod_aliases) {
  auto o = read({{"HOROVOD_CYCLE_TIME", "5"},
                 {"HOROVOD_FUSION_THRESHOLD", "0"},
                 {"HOROVOD_STALL_CHECK_TIME_SECONDS", "10"},
                 {"HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "20"}});
  ASSERT_TRUE(o.ok()) << o.error().to_string();
  EXPECT_EQ(o->cycle_time, std::chrono::microseconds(5000));
  EXPECT_EQ(o->fusion_threshold, 0u);
  EXPECT_EQ(o->stall_check, std::chrono::seconds(10));
  EXPECT_EQ(o->stall_shutdown, std::chrono::seconds(20));
  // The same value under both names is fine; different values are an error naming both.
  EXPECT_TRUE(read({{"CHORUS_FUSION_THRESHOLD", "100"}, {"HOROVOD_FUSION_THRESHOLD", "100"}}).ok());
  auto bad = read({{"CHORUS_FUSION_THRESHOLD", "100"}, {"HOROVOD_FUSION_THRESHOLD", "200"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code(), errc::config);
  EXPECT_NE(bad.error().message().find("CHORUS_FUSION_THRESHOLD='100'"), std::string::npos);
  EXPECT_NE(bad.error().message().find("HOROVOD_FUSION_THRESHOLD='200'"), std::string::npos);
}

TEST(pipeline_options, bad_values_name_the_variable) {
  for (const auto& [name, value] : env_map{{"CHORUS_NEGOTIATION", "ring"},
                                           {"CHORUS_EARLY_START", "yes"},
                                           {"CHORUS_HOLD_WHEN_AHEAD", "2"},
                                           {"CHORUS_CYCLE_TIME_MS", "-1"},
                                           {"HOROVOD_CYCLE_TIME", "fast"},
                                           {"CHORUS_FUSION_THRESHOLD", "64MB"},
                                           {"CHORUS_CHUNK_BYTES", "10"},
                                           {"CHORUS_STALL_CHECK_TIME_SECONDS", "1.5"},
                                           {"CHORUS_SCHEDULER_THREADS", "0"}}) {
    auto o = read({{name, value}});
    ASSERT_FALSE(o.ok()) << name << "=" << value;
    EXPECT_EQ(o.error().code(), errc::config);
    EXPECT_NE(o.error().message().find(name + "='" + value + "'"), std::string::npos) << o.error().message();
  }
}

TEST(pipeline_options, the_settings_every_rank_must_share_name_their_variables) {
  auto a = read({});
  auto b = read({{"HOROVOD_FUSION_THRESHOLD", "1048576"}});
  ASSERT_TRUE(a.ok() && b.ok());
  auto sa = pipeline_settings(*a), sb = pipeline_settings(*b);
  ASSERT_EQ(sa.size(), sb.size());
  std::vector<std::string> names;
  for (const auto& [name, value] : sa) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"CHORUS_AUTOTUNE", "CHORUS_NEGOTIATION", "CHORUS_FUSION_THRESHOLD",
                                             "CHORUS_CHUNK_BYTES", "CHORUS_IN_PLACE_BYTES", "CHORUS_PRIORITY"}));
  // The alias counts as the variable: the rank given it is named under CHORUS_FUSION_THRESHOLD.
  EXPECT_EQ(compare_settings(sa, sb, 1, "fusion").to_string(),
            "config: CHORUS_FUSION_THRESHOLD is 1048576 on rank 1 but 67108864 on rank 0: every rank of a job must "
            "be given the same value (fusion)");
  EXPECT_TRUE(compare_settings(sa, pipeline_settings(*a), 1).ok());
}

}  // namespace
}  // namespace chorus
