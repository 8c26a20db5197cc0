// What ranks started by srun alone take from the step (runtime/env/slurm_step.hpp): tasks on
// each node of the compressed list (uneven ones too), and where they meet, the first node:
// the first host of every host-list form Slurm writes, malformed lists refused naming the
// variable, the derived port alike for every task of a step and different between steps, and
// read_process_env using it only for the slurm family and only where nothing else says; a
// process group (read_group_env) choosing its address towards that node.
#include "runtime/env/slurm_step.hpp"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <tuple>
#include <vector>

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

TEST(SlurmStep, FirstHostOfEveryListForm) {
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

TEST(SlurmStep, MalformedListsAreRefusedNamingTheVariableAndWhy) {
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

TEST(SlurmStep, PortIsAlikeWithinAStepAndDiffersBetweenSteps) {
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

TEST(SlurmStep, TasksOnEachNodeOfTheCompressedList) {
  struct one {
    std::string list;
    int node, tasks;
  };
  for (const auto& c : std::vector<one>{{"2", 0, 2},        {"2(x3),1", 0, 2}, {"2(x3),1", 2, 2},
                                        {"2(x3),1", 3, 1},  {"1,3,2", 1, 3},   {"1,3,2", 2, 2},
                                        {"4(x2),2(x2)", 3, 2}}) {
    auto got = tasks_on_node(c.list, c.node);
    ASSERT_TRUE(got.ok()) << c.list << " node " << c.node << ": " << got.error().to_string();
    EXPECT_EQ(*got, c.tasks) << c.list << " node " << c.node;
  }
  for (const auto& [list, node, why] : std::vector<std::tuple<std::string, int, std::string>>{
           {"2(x3),1", 4, "no entry for node 4"}, {"(x2)", 0, "number of tasks"}, {"2(x0)", 0, "repeat"},
           {"2(x3", 0, "repeat"}, {"2;1", 1, "';' where a comma"}, {"0", 0, "task count of 0"},
           {"2,", 1, "number of tasks"}}) {
    auto got = tasks_on_node(list, node);
    ASSERT_FALSE(got.ok()) << list << " accepted";
    EXPECT_NE(got.error().message().find("SLURM_TASKS_PER_NODE='" + list + "'"), std::string::npos);
    EXPECT_NE(got.error().message().find(why), std::string::npos) << got.error().message() << " lacks " << why;
  }
}

TEST(SlurmStep, UnevenTasksGiveEachNodeItsOwnLocalSize) {
  // srun -N 2 -n 3: two tasks on node 0, one on node 1.
  vars v{{"SLURM_PROCID", "2"},         {"SLURM_NTASKS", "3"},          {"SLURM_LOCALID", "0"},
         {"SLURM_NODEID", "1"},         {"SLURM_TASKS_PER_NODE", "2,1"}, {"SLURM_STEP_NODELIST", "n[0-1]"},
         {"SLURM_JOB_ID", "5"}};
  auto env = read_process_env(lookup_in(v));
  ASSERT_TRUE(env.ok()) << env.error().to_string();
  EXPECT_EQ(env->local_size, 1);
  v["SLURM_PROCID"] = "1";
  v["SLURM_LOCALID"] = "1";
  v["SLURM_NODEID"] = "0";
  env = read_process_env(lookup_in(v));
  ASSERT_TRUE(env.ok()) << env.error().to_string();
  EXPECT_EQ(env->local_size, 2);
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

TEST(SlurmStep, SrunTasksMeetAtTheFirstNodeUnlessTold) {
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

TEST(SlurmStep, AProcessGroupUnderSrunListensTowardsTheFirstNode) {
  // init_process_group("chorus", init_method="tcp://...") under srun: no MASTER_ADDR.
  auto v = srun_task(3);
  auto env = read_group_env(lookup_in(v));
  ASSERT_TRUE(env.ok()) << env.error().to_string();
  EXPECT_EQ(env->rendezvous_host, "chorus-host0");
  v["MASTER_ADDR"] = "10.77.0.1";
  env = read_group_env(lookup_in(v));
  ASSERT_TRUE(env.ok());
  EXPECT_EQ(env->rendezvous_host, "10.77.0.1");
  env = read_group_env(lookup_in({}));
  ASSERT_TRUE(env.ok());
  EXPECT_EQ(env->rendezvous_host, "127.0.0.1");
}

TEST(SlurmStep, AnotherLaunchersRanksNeverTakeTheSlurmAddress) {
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
