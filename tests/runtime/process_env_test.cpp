// read_process_env over a fake environment: every launcher family, precedence between them,
// and each error naming the variable and the value it saw.
#include "runtime/env/process_env.hpp"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace chorus {
namespace {

using vars = std::map<std::string, std::string>;

result<process_env> read(const vars& v) {
  return read_process_env([&v](const char* name) -> const char* {
    auto it = v.find(name);
    return it == v.end() ? nullptr : it->second.c_str();
  });
}

// Expects errc::config with every fragment in the message.
void expect_config_error(const vars& v, std::initializer_list<std::string> fragments) {
  auto env = read(v);
  ASSERT_FALSE(env.ok()) << "accepted: " << describe(env.value());
  EXPECT_EQ(env.error().code(), errc::config) << env.error().to_string();
  for (const auto& f : fragments) {
    EXPECT_NE(env.error().message().find(f), std::string::npos)
        << "message '" << env.error().message() << "' lacks '" << f << "'";
  }
}

TEST(ProcessEnv, NoVariablesIsSingleRankDefault) {
  auto env = read({});
  ASSERT_TRUE(env.ok()) << env.error().to_string();
  EXPECT_EQ(env->rank, 0);
  EXPECT_EQ(env->size, 1);
  EXPECT_EQ(env->local_rank, 0);
  EXPECT_EQ(env->local_size, 1);
  EXPECT_EQ(env->source, "default");
  EXPECT_EQ(env->rendezvous_host, "127.0.0.1");
  EXPECT_EQ(env->rendezvous_port, 0);
  EXPECT_TRUE(env->job_secret.empty());
  EXPECT_EQ(env->rendezvous_timeout, std::chrono::milliseconds(60000));
  EXPECT_FALSE(env->local_assumed);
}

TEST(ProcessEnv, ChorusFamily) {
  auto env = read({{"CHORUS_RANK", "2"},
                   {"CHORUS_SIZE", "4"},
                   {"CHORUS_LOCAL_RANK", "0"},
                   {"CHORUS_LOCAL_SIZE", "2"},
                   {"CHORUS_RENDEZVOUS", "10.0.0.5:29500"}});
  ASSERT_TRUE(env.ok()) << env.error().to_string();
  EXPECT_EQ(env->rank, 2);
  EXPECT_EQ(env->size, 4);
  EXPECT_EQ(env->local_rank, 0);
  EXPECT_EQ(env->local_size, 2);
  EXPECT_EQ(env->rendezvous_host, "10.0.0.5");
  EXPECT_EQ(env->rendezvous_port, 29500);
  EXPECT_EQ(env->source, "chorus");
}

TEST(ProcessEnv, TorchrunFamilyUsesMasterPortPlusOffset) {
  auto env = read({{"RANK", "3"},
                   {"WORLD_SIZE", "8"},
                   {"LOCAL_RANK", "3"},
                   {"LOCAL_WORLD_SIZE", "4"},
                   {"MASTER_ADDR", "node001"},
                   {"MASTER_PORT", "29500"}});
  ASSERT_TRUE(env.ok()) << env.error().to_string();
  EXPECT_EQ(env->rank, 3);
  EXPECT_EQ(env->size, 8);
  EXPECT_EQ(env->local_rank, 3);
  EXPECT_EQ(env->local_size, 4);
  EXPECT_EQ(env->rendezvous_host, "node001");
  EXPECT_EQ(env->rendezvous_port, 29500 + master_port_offset);
  EXPECT_EQ(env->source, "torchrun");
}

TEST(ProcessEnv, OpenMpiFamilyWithChorusRendezvous) {
  auto env = read({{"OMPI_COMM_WORLD_RANK", "5"},
                   {"OMPI_COMM_WORLD_SIZE", "6"},
                   {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                   {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                   {"CHORUS_RENDEZVOUS", "[fe80::1]:4000"}});
  ASSERT_TRUE(env.ok()) << env.error().to_string();
  EXPECT_EQ(env->rank, 5);
  EXPECT_EQ(env->size, 6);
  EXPECT_EQ(env->local_rank, 1);
  EXPECT_EQ(env->local_size, 2);
  EXPECT_EQ(env->rendezvous_host, "fe80::1");
  EXPECT_EQ(env->rendezvous_port, 4000);
  EXPECT_EQ(env->source, "openmpi");
}

TEST(ProcessEnv, PmiFamilyWithEitherLocalSpelling) {
  auto env = read({{"PMI_RANK", "1"},
                   {"PMI_SIZE", "4"},
                   {"PMI_LOCAL_RANK", "1"},
                   {"PMI_LOCAL_SIZE", "2"},
                   {"CHORUS_RENDEZVOUS", "h:1"}});
  ASSERT_TRUE(env.ok()) << env.error().to_string();
  EXPECT_EQ(env->source, "pmi");
  EXPECT_EQ(env->local_rank, 1);
  EXPECT_EQ(env->local_size, 2);

  env = read({{"PMI_RANK", "3"},
              {"PMI_SIZE", "4"},
              {"MPI_LOCALRANKID", "0"},
              {"MPI_LOCALNRANKS", "3"},
              {"CHORUS_RENDEZVOUS", "h:1"}});
  ASSERT_TRUE(env.ok()) << env.error().to_string();
  EXPECT_EQ(env->rank, 3);
  EXPECT_EQ(env->local_rank, 0);
  EXPECT_EQ(env->local_size, 3);

  expect_config_error({{"PMI_RANK", "1"},
                       {"PMI_SIZE", "4"},
                       {"PMI_LOCAL_RANK", "1"},
                       {"PMI_LOCAL_SIZE", "2"},
                       {"MPI_LOCALRANKID", "0"},
                       {"MPI_LOCALNRANKS", "2"},
                       {"CHORUS_RENDEZVOUS", "h:1"}},
                      {"PMI_LOCAL_RANK=1 contradicts MPI_LOCALRANKID=0"});
}

TEST(ProcessEnv, SlurmFamilyLocalSize) {
  vars base{{"SLURM_PROCID", "5"},
            {"SLURM_NTASKS", "8"},
            {"SLURM_LOCALID", "1"},
            {"MASTER_ADDR", "n1"},
            {"MASTER_PORT", "7000"}};
  auto v = base;
  v["SLURM_NTASKS_PER_NODE"] = "4";
  v["SLURM_TASKS_PER_NODE"] = "2(x4)";
  auto env = read(v);
  ASSERT_TRUE(env.ok()) << env.error().to_string();
  EXPECT_EQ(env->source, "slurm");
  EXPECT_EQ(env->rank, 5);
  EXPECT_EQ(env->size, 8);
  EXPECT_EQ(env->local_rank, 1);
  EXPECT_EQ(env->local_size, 2);  // this node's entry of the step's layout over --ntasks-per-node

  v.erase("SLURM_TASKS_PER_NODE");
  env = read(v);
  ASSERT_TRUE(env.ok()) << env.error().to_string();
  EXPECT_EQ(env->local_size, 4);  // without the layout: SLURM_NTASKS_PER_NODE

  v["SLURM_TASKS_PER_NODE"] = "3(x2),2";
  env = read(v);
  ASSERT_TRUE(env.ok()) << env.error().to_string();
  EXPECT_EQ(env->local_size, 3);

  v.erase("SLURM_NTASKS_PER_NODE");
  v["SLURM_TASKS_PER_NODE"] = "(x2)";
  expect_config_error(v, {"SLURM_TASKS_PER_NODE='(x2)'"});
}

TEST(ProcessEnv, SlurmVariablesAreIgnoredUnderAnotherLauncher) {
  // `srun torchrun ...`: SLURM_PROCID is the node's task, RANK the process's rank.
  auto env = read({{"SLURM_PROCID", "1"},
                   {"SLURM_NTASKS", "2"},
                   {"SLURM_LOCALID", "0"},
                   {"SLURM_TASKS_PER_NODE", "1(x2)"},
                   {"RANK", "5"},
                   {"WORLD_SIZE", "8"},
                   {"LOCAL_RANK", "1"},
                   {"LOCAL_WORLD_SIZE", "4"},
                   {"MASTER_ADDR", "n0"},
                   {"MASTER_PORT", "29500"}});
  ASSERT_TRUE(env.ok()) << env.error().to_string();
  EXPECT_EQ(env->source, "torchrun");
  EXPECT_EQ(env->rank, 5);
  EXPECT_EQ(env->size, 8);
}

TEST(ProcessEnv, ChorusTakesPrecedenceWhenFamiliesAgree) {
  auto env = read({{"CHORUS_RANK", "1"},
                   {"CHORUS_SIZE", "2"},
                   {"RANK", "1"},
                   {"WORLD_SIZE", "2"},
                   {"OMPI_COMM_WORLD_RANK", "1"},
                   {"OMPI_COMM_WORLD_SIZE", "2"},
                   {"CHORUS_RENDEZVOUS", "a:1"},
                   {"MASTER_ADDR", "b"},
                   {"MASTER_PORT", "2"}});
  ASSERT_TRUE(env.ok()) << env.error().to_string();
  EXPECT_EQ(env->source, "chorus");
  EXPECT_EQ(env->rendezvous_host, "a");  // CHORUS_RENDEZVOUS over MASTER_*
  EXPECT_EQ(env->rendezvous_port, 1);
}

TEST(ProcessEnv, TorchrunTakesPrecedenceOverOpenMpi) {
  auto env = read({{"RANK", "0"},
                   {"WORLD_SIZE", "2"},
                   {"OMPI_COMM_WORLD_RANK", "0"},
                   {"OMPI_COMM_WORLD_SIZE", "2"},
                   {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                   {"OMPI_COMM_WORLD_LOCAL_SIZE", "1"},
                   {"MASTER_ADDR", "b"},
                   {"MASTER_PORT", "2"}});
  ASSERT_TRUE(env.ok()) << env.error().to_string();
  EXPECT_EQ(env->source, "torchrun");
  EXPECT_EQ(env->local_size, 1);  // a field torchrun leaves unset comes from the next family
}

TEST(ProcessEnv, ContradictionsNameBothVariables) {
  expect_config_error({{"CHORUS_RANK", "1"},
                       {"CHORUS_SIZE", "2"},
                       {"RANK", "0"},
                       {"WORLD_SIZE", "2"},
                       {"CHORUS_RENDEZVOUS", "a:1"}},
                      {"CHORUS_RANK=1 contradicts RANK=0"});
  expect_config_error({{"RANK", "0"},
                       {"WORLD_SIZE", "2"},
                       {"OMPI_COMM_WORLD_RANK", "0"},
                       {"OMPI_COMM_WORLD_SIZE", "4"},
                       {"CHORUS_RENDEZVOUS", "a:1"}},
                      {"WORLD_SIZE=2 contradicts OMPI_COMM_WORLD_SIZE=4"});
  expect_config_error({{"CHORUS_RANK", "0"},
                       {"CHORUS_SIZE", "2"},
                       {"CHORUS_LOCAL_RANK", "0"},
                       {"CHORUS_LOCAL_SIZE", "2"},
                       {"PMI_LOCAL_SIZE", "1"},
                       {"PMI_LOCAL_RANK", "0"},
                       {"CHORUS_RENDEZVOUS", "a:1"}},
                      {"CHORUS_LOCAL_SIZE=2 contradicts PMI_LOCAL_SIZE=1"});
}

TEST(ProcessEnv, BadNumbersNameTheVariable) {
  expect_config_error({{"CHORUS_RANK", "abc"}, {"CHORUS_SIZE", "2"}},
                      {"CHORUS_RANK='abc'", "expected a whole number in [0, 2147483647]"});
  expect_config_error({{"RANK", "-1"}, {"WORLD_SIZE", "2"}}, {"RANK='-1'", "expected a whole number"});
  expect_config_error({{"RANK", "1"}, {"WORLD_SIZE", "2x"}}, {"WORLD_SIZE='2x'"});
  expect_config_error({{"RANK", "0"}, {"WORLD_SIZE", "99999999999"}},
                      {"WORLD_SIZE='99999999999'", "[0, 2147483647]"});
  expect_config_error({{"OMPI_COMM_WORLD_RANK", "0"},
                       {"OMPI_COMM_WORLD_SIZE", "1"},
                       {"OMPI_COMM_WORLD_LOCAL_RANK", " 0"},
                       {"OMPI_COMM_WORLD_LOCAL_SIZE", "1"}},
                      {"OMPI_COMM_WORLD_LOCAL_RANK=' 0'"});
}

TEST(ProcessEnv, RangeErrorsNameTheVariables) {
  expect_config_error({{"CHORUS_RANK", "4"}, {"CHORUS_SIZE", "4"}, {"CHORUS_RENDEZVOUS", "a:1"}},
                      {"CHORUS_RANK=4 is not below CHORUS_SIZE=4"});
  expect_config_error({{"CHORUS_RANK", "0"}, {"CHORUS_SIZE", "0"}},
                      {"CHORUS_SIZE=0", "at least 1"});
  expect_config_error({{"RANK", "1"},
                       {"WORLD_SIZE", "4"},
                       {"LOCAL_RANK", "2"},
                       {"LOCAL_WORLD_SIZE", "2"},
                       {"MASTER_ADDR", "a"},
                       {"MASTER_PORT", "1"}},
                      {"LOCAL_RANK=2 is not below LOCAL_WORLD_SIZE=2"});
  expect_config_error({{"RANK", "1"},
                       {"WORLD_SIZE", "4"},
                       {"LOCAL_RANK", "0"},
                       {"LOCAL_WORLD_SIZE", "8"},
                       {"MASTER_ADDR", "a"},
                       {"MASTER_PORT", "1"}},
                      {"LOCAL_WORLD_SIZE=8 exceeds WORLD_SIZE=4"});
  expect_config_error({{"CHORUS_LOCAL_RANK", "0"}, {"CHORUS_LOCAL_SIZE", "0"}},
                      {"CHORUS_LOCAL_SIZE=0"});
}

TEST(ProcessEnv, HalfSetFamiliesNameWhatIsMissing) {
  expect_config_error({{"CHORUS_RANK", "1"}}, {"CHORUS_RANK=1", "CHORUS_SIZE"});
  expect_config_error({{"WORLD_SIZE", "2"}}, {"WORLD_SIZE=2 is set but RANK is not"});
  expect_config_error({{"PMI_RANK", "0"}, {"PMI_SIZE", "1"}, {"MPI_LOCALRANKID", "0"}},
                      {"MPI_LOCALRANKID=0 is set but PMI_LOCAL_SIZE is not"});
  expect_config_error({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}, {"SLURM_LOCALID", "0"}},
                      {"SLURM_LOCALID=0 is set but SLURM_TASKS_PER_NODE is not"});
  expect_config_error({{"CHORUS_RANK", "0"}, {"CHORUS_SIZE", "1"}, {"CHORUS_LOCAL_RANK", "0"}},
                      {"CHORUS_LOCAL_RANK=0", "CHORUS_LOCAL_SIZE"});
  expect_config_error({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"}},
                      {"MASTER_ADDR=a", "MASTER_PORT"});
  expect_config_error({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "5"}},
                      {"MASTER_PORT=5", "MASTER_ADDR"});
}

TEST(ProcessEnv, MultiRankWithoutAddressSaysWhatToSet) {
  expect_config_error({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}},
                      {"openmpi", "OMPI_COMM_WORLD_SIZE=2", "CHORUS_RENDEZVOUS", "MASTER_ADDR"});
  expect_config_error({{"PMI_RANK", "0"}, {"PMI_SIZE", "3"}},
                      {"pmi", "PMI_SIZE=3", "CHORUS_RENDEZVOUS"});
  expect_config_error({{"SLURM_PROCID", "0"},
                       {"SLURM_NTASKS", "2"},
                       {"SLURM_LOCALID", "0"},
                       {"SLURM_TASKS_PER_NODE", "2"}},
                      {"slurm", "SLURM_NTASKS=2", "CHORUS_RENDEZVOUS"});
  // A single rank needs no address.
  auto env = read({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "1"}});
  ASSERT_TRUE(env.ok()) << env.error().to_string();
  EXPECT_EQ(env->rendezvous_port, 0);
}

TEST(ProcessEnv, MalformedAddressesNameTheVariable) {
  expect_config_error({{"CHORUS_RENDEZVOUS", "nohostport"}},
                      {"CHORUS_RENDEZVOUS='nohostport'", "host:port"});
  expect_config_error({{"CHORUS_RENDEZVOUS", "h:99999"}}, {"CHORUS_RENDEZVOUS='h:99999'", "port"});
  expect_config_error({{"CHORUS_RENDEZVOUS", ":80"}}, {"CHORUS_RENDEZVOUS=':80'", "empty host"});
  expect_config_error({{"CHORUS_RENDEZVOUS", "::1:80"}},
                      {"CHORUS_RENDEZVOUS='::1:80'", "brackets"});
  expect_config_error({{"CHORUS_RENDEZVOUS", "h:"}}, {"CHORUS_RENDEZVOUS='h:'"});
  expect_config_error({{"MASTER_ADDR", "a"}, {"MASTER_PORT", "http"}}, {"MASTER_PORT='http'"});
  expect_config_error({{"MASTER_ADDR", "a"}, {"MASTER_PORT", "65535"}}, {"MASTER_PORT=65535"});
  expect_config_error({{"CHORUS_RANK", "0"}, {"CHORUS_SIZE", "2"}, {"CHORUS_RENDEZVOUS", "h:0"}},
                      {"CHORUS_RENDEZVOUS=h:0", "port 0", "CHORUS_SIZE=2"});
}

TEST(ProcessEnv, SecretIsDecodedAndNeverEchoed) {
  auto env = read({{"CHORUS_JOB_SECRET", "00ff10Ab"}});
  ASSERT_TRUE(env.ok()) << env.error().to_string();
  EXPECT_EQ(env->job_secret, std::string("\x00\xff\x10\xab", 4));
  EXPECT_EQ(describe(*env).find("00ff10Ab"), std::string::npos);
  EXPECT_NE(describe(*env).find("secret=set"), std::string::npos);

  auto odd = read({{"CHORUS_JOB_SECRET", "abcdeXYZ1"}});
  ASSERT_FALSE(odd.ok());
  EXPECT_NE(odd.error().message().find("CHORUS_JOB_SECRET"), std::string::npos);
  EXPECT_EQ(odd.error().message().find("abcdeXYZ1"), std::string::npos);
  expect_config_error({{"CHORUS_JOB_SECRET", "zz11"}}, {"CHORUS_JOB_SECRET", "character 0"});
}

TEST(ProcessEnv, JobIdFromVariableOrDerivedFromAddress) {
  auto env = read({{"CHORUS_JOB_ID", "0123456789abcdef"}});
  ASSERT_TRUE(env.ok()) << env.error().to_string();
  EXPECT_EQ(env->job_id, 0x0123456789abcdefull);
  expect_config_error({{"CHORUS_JOB_ID", "xyz"}}, {"CHORUS_JOB_ID='xyz'"});
  expect_config_error({{"CHORUS_JOB_ID", "11112222333344445"}},
                      {"CHORUS_JOB_ID='11112222333344445'"});

  auto a = read({{"CHORUS_RENDEZVOUS", "h:1000"}});
  auto b = read({{"CHORUS_RENDEZVOUS", "h:1000"}});
  auto c = read({{"CHORUS_RENDEZVOUS", "h:1001"}});
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->job_id, b->job_id);
  EXPECT_NE(a->job_id, c->job_id);
  EXPECT_NE(a->job_id, 0u);
}

TEST(ProcessEnv, RendezvousTimeout) {
  auto env = read({{"CHORUS_RENDEZVOUS_TIMEOUT_SECONDS", "2.5"}});
  ASSERT_TRUE(env.ok()) << env.error().to_string();
  EXPECT_EQ(env->rendezvous_timeout, std::chrono::milliseconds(2500));
  expect_config_error({{"CHORUS_RENDEZVOUS_TIMEOUT_SECONDS", "0"}},
                      {"CHORUS_RENDEZVOUS_TIMEOUT_SECONDS='0'"});
  expect_config_error({{"CHORUS_RENDEZVOUS_TIMEOUT_SECONDS", "-3"}},
                      {"CHORUS_RENDEZVOUS_TIMEOUT_SECONDS='-3'"});
  expect_config_error({{"CHORUS_RENDEZVOUS_TIMEOUT_SECONDS", "soon"}},
                      {"CHORUS_RENDEZVOUS_TIMEOUT_SECONDS='soon'"});
  expect_config_error({{"CHORUS_RENDEZVOUS_TIMEOUT_SECONDS", "inf"}},
                      {"CHORUS_RENDEZVOUS_TIMEOUT_SECONDS='inf'"});
}

// An elastic worker waits for the next round as long as chorusrun may wait for slots
// (--elastic-timeout, passed on under both names); other processes do not read it.
TEST(ProcessEnv, ElasticTimeoutIsReadByElasticWorkersOnly) {
  auto worker = read({{"CHORUS_ELASTIC_WORKER", "3"}, {"HOROVOD_ELASTIC_TIMEOUT", "2.5"}});
  ASSERT_TRUE(worker.ok()) << worker.error().to_string();
  EXPECT_EQ(worker->elastic_worker, 3);
  EXPECT_EQ(worker->elastic_timeout, std::chrono::milliseconds(2500));
  auto fallback = read({{"CHORUS_ELASTIC_WORKER", "0"}});
  ASSERT_TRUE(fallback.ok()) << fallback.error().to_string();
  EXPECT_EQ(fallback->elastic_timeout, std::chrono::milliseconds(600000));
  expect_config_error({{"CHORUS_ELASTIC_WORKER", "0"}, {"CHORUS_ELASTIC_TIMEOUT_SECONDS", "0"}},
                      {"CHORUS_ELASTIC_TIMEOUT_SECONDS='0'"});
  expect_config_error({{"CHORUS_ELASTIC_WORKER", "0"}, {"CHORUS_ELASTIC_TIMEOUT_SECONDS", "5"},
                       {"HOROVOD_ELASTIC_TIMEOUT", "6"}},
                      {"HOROVOD_ELASTIC_TIMEOUT"});
  EXPECT_TRUE(read({{"CHORUS_ELASTIC_TIMEOUT_SECONDS", "soon"}}).ok());  // not an elastic worker
}

TEST(ProcessEnv, MissingLocalVariablesAssumeOneHost) {
  auto env = read({{"PMI_RANK", "2"}, {"PMI_SIZE", "3"}, {"CHORUS_RENDEZVOUS", "h:1"}});
  ASSERT_TRUE(env.ok()) << env.error().to_string();
  EXPECT_EQ(env->local_rank, 2);
  EXPECT_EQ(env->local_size, 3);
  EXPECT_TRUE(env->local_assumed);
  EXPECT_NE(describe(*env).find("assumed"), std::string::npos);
}

TEST(ProcessEnv, EmptyValuesCountAsUnset) {
  auto env = read({{"RANK", ""}, {"WORLD_SIZE", ""}, {"CHORUS_JOB_SECRET", ""}});
  ASSERT_TRUE(env.ok()) << env.error().to_string();
  EXPECT_EQ(env->source, "default");
}

TEST(ProcessEnv, DescribeNamesEveryField) {
  auto env = read({{"CHORUS_RANK", "1"},
                   {"CHORUS_SIZE", "2"},
                   {"CHORUS_LOCAL_RANK", "1"},
                   {"CHORUS_LOCAL_SIZE", "2"},
                   {"CHORUS_RENDEZVOUS", "[::1]:5"},
                   {"CHORUS_JOB_ID", "ab"}});
  ASSERT_TRUE(env.ok()) << env.error().to_string();
  EXPECT_EQ(describe(*env),
            "rank=1 size=2 local_rank=1 local_size=2 rendezvous=[::1]:5 job_id=0xab source=chorus "
            "secret=unset rendezvous_timeout_ms=60000");
}

}  // namespace
}  // namespace chorus
