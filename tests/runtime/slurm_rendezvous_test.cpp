// Ranks started by srun alone meet at the step's first node (runtime/env/slurm_rendezvous.hpp):
// the first host of every host-list form Slurm writes, malformed lists refused naming the
// variable, the derived port alike for every task of a step and different between steps, and
// read_process_env using it only for the slurm family and only where nothing else says.
#include "runtime/env/slurm_rendezvous.hpp"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "runtime/env/process_env.hpp"

namespace chorus {
namespace {

using vars = std::map<std::string, std::string>;

env_lookup lookup_in(const vars& v) {
  return [&v](const char* name) -> const char* {
    auto it = v.find(name);
    return it == v.end() ? nullptr : it->second.c_str();
  };
}

TEST(SlurmRendezvous, FirstHostOfEveryListForm) {
  const std::map<std::string, std::string> cases = {
      {"n0", "n0"},
      {"chorus-host0,chorus-host1", "chorus-host0"},
      {"chorus-host[0-1]", "chorus-host0"},
      {"node[07-09,12]", "node07"},
      {"node[3,5-6],gpu[1-2]", "node3"},
      {"rack[1-2]-n4", "rack1-n4"},
      {"a-b.example.org,c", "a-b.example.org"},
      {"node[0012]", "node0012"},
  };
  for (const auto& [list, want] : cases) {
    auto got = first_host(list, "SLURM_STEP_NODELIST");
    ASSERT_TRUE(got.ok()) << list << ": " << got.error().to_string();
    EXPECT_EQ(*got, want) << list;
  }
}

TEST(SlurmRendezvous, MalformedListsAreRefusedNamingTheVariableAndWhy) {
  const std::map<std::string, std::string> cases = {
      {"", "empty"},          {",n1", "empty"},           {"node[1-2", "without its ']'"},
      {"node1-2]", "without its '['"}, {"node[a-b]", "does not start with a number"},
      {"node[1x]", "'x'"},    {"[1-2]", "without a name"}, {"n[1-2]r[3-4]", "two bracketed ranges"},
      {"n[[1]]", "nested"},
  };
  for (const auto& [list, why] : cases) {
    auto got = first_host(list, "SLURM_JOB_NODELIST");
    ASSERT_FALSE(got.ok()) << "'" << list << "' accepted as " << *got;
    EXPECT_EQ(got.error().code(), errc::config);
    const auto& m = got.error().message();
    EXPECT_NE(m.find("SLURM_JOB_NODELIST='" + list + "'"), std::string::npos) << m;
    EXPECT_NE(m.find(why), std::string::npos) << m << " lacks " << why;
  }
}

TEST(SlurmRendezvous, PortIsAlikeWithinAStepAndDiffersBetweenSteps) {
  vars v{{"SLURM_STEP_NODELIST", "chorus-host[0-1]"}, {"SLURM_JOB_ID", "4242"}, {"SLURM_STEP_ID", "0"}};
  auto a = read_slurm_rendezvous(lookup_in(v));
  ASSERT_TRUE(a.ok() && a->has_value());
  EXPECT_EQ((*a)->host, "chorus-host0");
  EXPECT_GE((*a)->port, slurm_port_base);
  EXPECT_LT((*a)->port, slurm_port_base + slurm_port_span);
  auto again = read_slurm_rendezvous(lookup_in(v));
  EXPECT_EQ((*again)->port, (*a)->port);
  v["SLURM_STEP_ID"] = "1";
  auto next_step = read_slurm_rendezvous(lookup_in(v));
  EXPECT_NE((*next_step)->port, (*a)->port);
  v["SLURM_JOB_ID"] = "4243";
  auto next_job = read_slurm_rendezvous(lookup_in(v));
  EXPECT_NE((*next_job)->port, (*next_step)->port);
  // The job's list where the step's is missing; nothing without a job id or a list.
  auto job_list = read_slurm_rendezvous(lookup_in({{"SLURM_JOB_NODELIST", "b[2-3]"}, {"SLURM_JOB_ID", "7"}}));
  ASSERT_TRUE(job_list.ok() && job_list->has_value());
  EXPECT_EQ((*job_list)->host, "b2");
  EXPECT_FALSE(read_slurm_rendezvous(lookup_in({{"SLURM_JOB_NODELIST", "b"}}))->has_value());
  EXPECT_FALSE(read_slurm_rendezvous(lookup_in({{"SLURM_JOB_ID", "7"}}))->has_value());
  auto bad_id = read_slurm_rendezvous(lookup_in({{"SLURM_NODELIST", "b"}, {"SLURM_JOB_ID", "x7"}}));
  ASSERT_FALSE(bad_id.ok());
  EXPECT_NE(bad_id.error().message().find("SLURM_JOB_ID"), std::string::npos);
}

vars srun_task(int rank) {
  return {{"SLURM_PROCID", std::to_string(rank)},
          {"SLURM_NTASKS", "4"},
          {"SLURM_LOCALID", std::to_string(rank % 2)},
          {"SLURM_TASKS_PER_NODE", "2(x2)"},
          {"SLURM_STEP_NODELIST", "chorus-host[0-1]"},
          {"SLURM_JOB_ID", "99"},
          {"SLURM_STEP_ID", "3"}};
}

TEST(SlurmRendezvous, SrunTasksMeetAtTheFirstNodeUnlessTold) {
  auto first = read_process_env(lookup_in(srun_task(0)));
  ASSERT_TRUE(first.ok()) << first.error().to_string();
  EXPECT_EQ(first->source, "slurm");
  EXPECT_EQ(first->rendezvous_host, "chorus-host0");
  for (int r = 1; r < 4; ++r) {
    auto other = read_process_env(lookup_in(srun_task(r)));
    ASSERT_TRUE(other.ok()) << other.error().to_string();
    EXPECT_EQ(other->rendezvous_host, first->rendezvous_host);
    EXPECT_EQ(other->rendezvous_port, first->rendezvous_port);
    EXPECT_EQ(other->job_id, first->job_id) << "the job id hashes the same address";
  }
  auto told = srun_task(1);
  told["CHORUS_RENDEZVOUS"] = "10.77.0.1:5000";
  auto env = read_process_env(lookup_in(told));
  ASSERT_TRUE(env.ok());
  EXPECT_EQ(env->rendezvous_host, "10.77.0.1");
  EXPECT_EQ(env->rendezvous_port, 5000);
  auto broken = srun_task(0);
  broken["SLURM_STEP_NODELIST"] = "n[1-";
  auto refused = read_process_env(lookup_in(broken));
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message().find("SLURM_STEP_NODELIST='n[1-'"), std::string::npos);
}

TEST(SlurmRendezvous, AnotherLaunchersRanksNeverTakeTheSlurmAddress) {
  // `srun torchrun` / `srun mpirun`: the ranks come from torchrun's variables, which must name
  // the rendezvous themselves.
  auto v = srun_task(0);
  v["RANK"] = "0";
  v["WORLD_SIZE"] = "8";
  auto env = read_process_env(lookup_in(v));
  ASSERT_FALSE(env.ok());
  EXPECT_NE(env.error().message().find("torchrun"), std::string::npos) << env.error().message();
}

}  // namespace
}  // namespace chorus
