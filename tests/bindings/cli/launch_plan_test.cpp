// chorusrun's launch commands: local, ssh and --launcher templates; per-node mode; the job
// variables (CHORUS_* and HOROVOD_*); the secret never on a command line.
#include "bindings/cli/chorusrun/launch_plan.hpp"

#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "runtime/transport/tcp/socket_util.hpp"

using namespace chorus::chorusrun;

namespace {

launch_options parse(std::vector<const char*> args) {
  args.insert(args.begin(), "chorusrun");
  auto o = parse_options({args.data(), args.size()});
  EXPECT_TRUE(o) << (o ? "" : o.error().message());
  if (o) {
    auto st = check_options(*o);
    EXPECT_TRUE(st.ok()) << st.message();
  }
  return o ? *o : launch_options{};
}

job_identity test_job() { return {"10.0.0.1:4000", "s3cr3t", "00000000000000ab", -1, "10.0.0.1", "3999"}; }

std::vector<rank_launch> plan(const launch_options& opts) {
  auto p = plan_placements(opts, "here");
  EXPECT_TRUE(p);
  auto l = plan_launch(opts, test_job(), *p, {"PATH=/usr/bin", "HOME=/root"}, "/work dir", "here");
  EXPECT_TRUE(l) << (l ? "" : l.error().message());
  return l ? *l : std::vector<rank_launch>{};
}

std::map<std::string, std::string> as_map(const std::vector<std::string>& env) {
  std::map<std::string, std::string> m;
  for (const auto& e : env) m[e.substr(0, e.find('='))] = e.substr(e.find('=') + 1);
  return m;
}

std::map<std::string, std::string> stdin_vars(const std::string& data) {
  std::map<std::string, std::string> m;
  size_t at = 0;
  while (at < data.size()) {
    auto nl = data.find('\n', at);
    auto line = data.substr(at, nl - at);
    at = nl + 1;
    if (line.empty()) break;
    m[line.substr(0, line.find('='))] = line.substr(line.find('=') + 1);
  }
  return m;
}

bool argv_mentions(const rank_launch& l, const std::string& s) {
  return std::any_of(l.argv.begin(), l.argv.end(), [&](const std::string& a) { return a.find(s) != std::string::npos; });
}

}  // namespace

TEST(launch_plan, local_ranks_get_variables_in_their_environment) {
  auto l = plan(parse({"-np", "2", "-x", "A=1", "prog", "arg"}));
  ASSERT_EQ(l.size(), 2u);
  EXPECT_EQ(l[1].argv, (std::vector<std::string>{"prog", "arg"}));
  EXPECT_TRUE(l[1].stdin_data.empty());
  auto env = as_map(l[1].env);
  EXPECT_EQ(env["CHORUS_RANK"], "1");
  EXPECT_EQ(env["CHORUS_LOCAL_SIZE"], "2");
  EXPECT_EQ(env["HOROVOD_RANK"], "1");
  EXPECT_EQ(env["HOROVOD_CROSS_SIZE"], "1");
  EXPECT_EQ(env["HOROVOD_HOSTNAME"], "here");
  EXPECT_EQ(env["CHORUS_JOB_SECRET"], "s3cr3t");
  EXPECT_EQ(env["A"], "1");
  EXPECT_EQ(env["PATH"], "/usr/bin");
}

TEST(launch_plan, ranks_get_torch_distributeds_variables_too) {
  auto l = plan(parse({"-np", "2", "prog"}));
  ASSERT_EQ(l.size(), 2u);
  auto env = as_map(l[1].env);
  EXPECT_EQ(env["RANK"], "1");
  EXPECT_EQ(env["WORLD_SIZE"], "2");
  EXPECT_EQ(env["LOCAL_RANK"], "1");
  EXPECT_EQ(env["LOCAL_WORLD_SIZE"], "2");
  EXPECT_EQ(env["MASTER_ADDR"], "10.0.0.1");
  EXPECT_EQ(env["MASTER_PORT"], "3999");
  // -x cannot set what differs per rank; elastic ranks change rank from round to round.
  std::vector<std::string> args = {"chorusrun", "-np", "2", "-x", "RANK=3", "prog"};
  std::vector<const char*> argv;
  for (auto& a : args) argv.push_back(a.c_str());
  EXPECT_FALSE(parse_options({argv.data(), argv.size()}));
  auto elastic = plan(parse({"-np", "2", "--min-np", "1", "prog"}));
  ASSERT_FALSE(elastic.empty());
  EXPECT_EQ(as_map(elastic[0].env).count("RANK"), 0u);
}

TEST(launch_plan, torchs_store_goes_beside_the_rendezvous_unless_the_environment_names_it) {
  ::unsetenv("CHORUS_RENDEZVOUS");
  ::unsetenv("MASTER_ADDR");
  ::unsetenv("MASTER_PORT");
  auto local = parse({"-np", "2", "prog"});
  auto p = plan_placements(local, "here");
  ASSERT_TRUE(p);
  auto job = make_job_identity(local, *p, "here");
  ASSERT_TRUE(job) << job.error().message();
  EXPECT_EQ(job->master_addr, "127.0.0.1");
  EXPECT_FALSE(job->master_port.empty());
  EXPECT_NE(job->rendezvous, "127.0.0.1:" + job->master_port) << "torch's store and Chorus's on one port";
  ::close(job->store_listener);
  // A given rendezvous (per-node mode): the port below it, alike on every node.
  auto node = parse({"--nnodes", "2", "--node-rank", "1", "--rendezvous", "10.0.0.1:29501", "-np", "1", "prog"});
  ::setenv("CHORUS_JOB_SECRET", "abcd", 1);
  auto njob = make_job_identity(node, *plan_placements(node, "here"), "here");
  ASSERT_TRUE(njob) << njob.error().message();
  EXPECT_EQ(njob->master_addr, "10.0.0.1");
  EXPECT_EQ(njob->master_port, "29500");
  ::setenv("MASTER_ADDR", "10.9.9.9", 1);
  ::setenv("MASTER_PORT", "1234", 1);
  njob = make_job_identity(node, *plan_placements(node, "here"), "here");
  ::unsetenv("MASTER_ADDR");
  ::unsetenv("MASTER_PORT");
  ::unsetenv("CHORUS_JOB_SECRET");
  ASSERT_TRUE(njob) << njob.error().message();
  EXPECT_EQ(njob->master_addr, "10.9.9.9");
  EXPECT_EQ(njob->master_port, "1234");
}

TEST(launch_plan, launcher_template_gets_host_and_variables_on_stdin) {
  auto l = plan(parse({"-np", "4", "-H", "10.0.0.1:2,10.0.0.2:2", "--launcher", "hosts.sh exec {host}", "prog", "x y"}));
  ASSERT_EQ(l.size(), 4u);
  const auto& r3 = l[3];
  EXPECT_EQ(r3.host, "10.0.0.2");
  ASSERT_GE(r3.argv.size(), 8u);
  EXPECT_EQ(r3.argv[0], "hosts.sh");
  EXPECT_EQ(r3.argv[1], "exec");
  EXPECT_EQ(r3.argv[2], "10.0.0.2");
  EXPECT_EQ(r3.argv[3], "sh");
  EXPECT_EQ(r3.argv[4], "-c");
  EXPECT_EQ(r3.argv[6], "chorus-rank");
  EXPECT_EQ(r3.argv[7], "prog");
  EXPECT_EQ(r3.argv[8], "x y");
  EXPECT_FALSE(argv_mentions(r3, "s3cr3t"));
  EXPECT_EQ(as_map(r3.env).count("CHORUS_JOB_SECRET"), 0u);
  auto vars = stdin_vars(r3.stdin_data);
  EXPECT_EQ(vars["CHORUS_JOB_SECRET"], "s3cr3t");
  EXPECT_EQ(vars["CHORUS_RANK"], "3");
  EXPECT_EQ(vars["CHORUS_SIZE"], "4");
  EXPECT_EQ(vars["CHORUS_LOCAL_RANK"], "1");
  EXPECT_EQ(vars["CHORUS_LOCAL_SIZE"], "2");
  EXPECT_EQ(vars["HOROVOD_CROSS_RANK"], "1");
  EXPECT_EQ(vars["HOROVOD_CROSS_SIZE"], "2");
  EXPECT_EQ(vars["HOROVOD_HOSTNAME"], "10.0.0.2");
  EXPECT_EQ(vars["CHORUS_RENDEZVOUS"], "10.0.0.1:4000");
  EXPECT_EQ(r3.stdin_data.substr(r3.stdin_data.size() - 2), "\n\n");
}

TEST(launch_plan, ssh_by_default_with_one_quoted_remote_command) {
  auto l = plan(parse({"-np", "2", "-H", "localhost:1,node2:1", "prog", "it's"}));
  ASSERT_EQ(l.size(), 2u);
  EXPECT_EQ(l[0].argv, (std::vector<std::string>{"prog", "it's"}));  // loopback: started directly
  const auto& r1 = l[1];
  ASSERT_EQ(r1.argv.size(), 5u);
  EXPECT_EQ(r1.argv[0], "ssh");
  EXPECT_EQ(r1.argv[3], "node2");
  const auto& remote = r1.argv[4];
  EXPECT_EQ(remote.rfind("cd '/work dir' 2>/dev/null; exec sh -c '", 0), 0u) << remote;
  EXPECT_NE(remote.find(" chorus-rank 'prog' 'it'\\''s'"), std::string::npos) << remote;
  EXPECT_FALSE(argv_mentions(r1, "s3cr3t"));
  EXPECT_EQ(stdin_vars(r1.stdin_data)["CHORUS_JOB_SECRET"], "s3cr3t");
}

TEST(launch_plan, per_node_mode_numbers_ranks_by_node) {
  auto opts = parse({"--nnodes", "3", "--node-rank", "2", "--rendezvous", "10.0.0.1:29500", "-np", "2", "prog"});
  auto l = plan(opts);
  ASSERT_EQ(l.size(), 2u);
  auto env = as_map(l[1].env);
  EXPECT_EQ(env["CHORUS_RANK"], "5");
  EXPECT_EQ(env["CHORUS_SIZE"], "6");
  EXPECT_EQ(env["CHORUS_LOCAL_RANK"], "1");
  EXPECT_EQ(env["CHORUS_LOCAL_SIZE"], "2");
  EXPECT_EQ(env["HOROVOD_CROSS_RANK"], "2");
  EXPECT_EQ(env["HOROVOD_CROSS_SIZE"], "3");
  EXPECT_EQ(l[1].argv, (std::vector<std::string>{"prog"}));
}

TEST(launch_plan, per_node_mode_needs_a_shared_secret) {
  auto opts = parse({"--nnodes", "2", "--node-rank", "0", "--rendezvous", "10.0.0.1:29500", "-np", "1", "prog"});
  auto p = plan_placements(opts, "here");
  ASSERT_TRUE(p);
  ::unsetenv("CHORUS_JOB_SECRET");
  ::unsetenv("CHORUS_RENDEZVOUS");
  auto job = make_job_identity(opts, *p, "here");
  ASSERT_FALSE(job);
  EXPECT_NE(job.error().message().find("CHORUS_JOB_SECRET"), std::string::npos);
  ::setenv("CHORUS_JOB_SECRET", "abcd", 1);
  job = make_job_identity(opts, *p, "here");
  ::unsetenv("CHORUS_JOB_SECRET");
  ASSERT_TRUE(job) << job.error().message();
  EXPECT_EQ(job->rendezvous, "10.0.0.1:29500");
  EXPECT_TRUE(job->job_id.empty());  // the ranks derive one from the rendezvous, alike on every node
}

TEST(launch_plan, multi_host_rendezvous_is_on_rank_zeros_host) {
  auto opts = parse({"-np", "2", "-H", "10.77.0.1:1,10.77.0.2:1", "--launcher", "x {host}", "prog"});
  auto p = plan_placements(opts, "here");
  ::unsetenv("CHORUS_RENDEZVOUS");
  auto job = make_job_identity(opts, *p, "here");
  ASSERT_TRUE(job);
  EXPECT_EQ(job->rendezvous.rfind("10.77.0.1:", 0), 0u) << job->rendezvous;
  EXPECT_EQ(job->secret.size(), 64u);
  auto v6 = parse({"-np", "1", "-H", "[fd00::1]:1", "--launcher", "x {host}", "prog"});
  auto p6 = plan_placements(v6, "here");
  job = make_job_identity(v6, *p6, "here");
  ASSERT_TRUE(job);
  EXPECT_EQ(job->rendezvous.rfind("[fd00::1]:", 0), 0u) << job->rendezvous;
}

TEST(launch_plan, remote_variable_with_newline_is_refused) {
  auto opts = parse({"-np", "1", "-H", "n1:1", "-x", "A=two\nlines", "prog"});
  auto p = plan_placements(opts, "here");
  auto l = plan_launch(opts, test_job(), *p, {}, "/", "here");
  ASSERT_FALSE(l);
  EXPECT_NE(l.error().message().find("A holds a newline"), std::string::npos) << l.error().message();
}

TEST(options, host_options_are_checked_together) {
  auto check = [](std::vector<const char*> args) {
    args.insert(args.begin(), "chorusrun");
    auto o = parse_options({args.data(), args.size()});
    if (!o) return o.error().message();
    auto st = check_options(*o);
    return st.ok() ? std::string() : st.message();
  };
  EXPECT_NE(check({"-np", "5", "-H", "a:2,b:2", "p"}).find("-np 5"), std::string::npos);
  EXPECT_NE(check({"-np", "1", "-H", "a:1", "--hostfile", "f", "p"}).find("not both"), std::string::npos);
  EXPECT_NE(check({"-np", "1", "-H", "a:1", "--launcher", "ssh a", "p"}).find("{host}"), std::string::npos);
  EXPECT_NE(check({"-np", "1", "--nnodes", "2", "p"}).find("--rendezvous"), std::string::npos);
  EXPECT_NE(check({"-np", "1", "--nnodes", "2", "--node-rank", "2", "--rendezvous", "a:1", "p"}).find("below"),
            std::string::npos);
  EXPECT_NE(check({"-np", "1", "--node-rank", "1", "p"}).find("--nnodes"), std::string::npos);
  EXPECT_NE(check({"-np", "1", "-x", "HOROVOD_RANK=3", "p"}).find("per rank"), std::string::npos);
  EXPECT_EQ(check({"-np", "2", "--hosts=a:1,b:1", "--launcher={host} x", "p"}), "");
}

TEST(options, elastic_bounds_and_scope) {
  auto check = [](std::vector<const char*> args) {
    args.insert(args.begin(), "chorusrun");
    auto o = parse_options({args.data(), args.size()});
    if (!o) return o.error().message();
    auto st = check_options(*o);
    return st.ok() ? std::string() : st.message();
  };
  EXPECT_EQ(check({"-np", "3", "--min-np", "2", "--max-np", "4", "p"}), "");
  EXPECT_EQ(check({"-np", "3", "--min-np=3", "p"}), "");
  EXPECT_NE(check({"-np", "3", "--min-np", "4", "p"}).find("--min-np <= -np <= --max-np"), std::string::npos);
  EXPECT_NE(check({"-np", "3", "--max-np", "2", "p"}).find("--min-np <= -np <= --max-np"), std::string::npos);
  EXPECT_NE(check({"-np", "3", "--min-np", "0", "p"}).find("positive"), std::string::npos);
  EXPECT_EQ(check({"-np", "2", "--min-np", "1", "-H", "a:1,b:1", "p"}), "");  // across hosts
  EXPECT_NE(check({"-np", "2", "--min-np", "1", "-H", "a:1", "p"}).find("slots"), std::string::npos);
  EXPECT_NE(check({"-np", "2", "--min-np", "1", "--rendezvous", "a:1", "p"}).find("serves the elastic store"),
            std::string::npos);
  EXPECT_NE(check({"-np", "1", "--min-np", "1", "-x", "CHORUS_ELASTIC_WORKER=3", "p"}).find("per rank"),
            std::string::npos);
  EXPECT_EQ(check({"-np", "2", "--min-np", "1", "--elastic-timeout", "2.5", "p"}), "");
  EXPECT_NE(check({"-np", "2", "--elastic-timeout", "5", "p"}).find("needs an elastic job"), std::string::npos);
  EXPECT_NE(check({"-np", "2", "--min-np", "1", "--elastic-timeout", "0", "p"}).find("positive number of seconds"),
            std::string::npos);
  EXPECT_NE(check({"-np", "2", "--min-np", "1", "-x", "HOROVOD_ELASTIC_TIMEOUT=3", "p"}).find("--elastic-timeout"),
            std::string::npos);
}

TEST(options, blacklist_cooldown_reset_limit_and_no_blacklist) {
  auto parsed = [](std::vector<const char*> args) {
    args.insert(args.begin(), "chorusrun");
    return parse_options({args.data(), args.size()});
  };
  auto check = [&](std::vector<const char*> args) {
    auto o = parsed(std::move(args));
    if (!o) return o.error().message();
    auto st = check_options(*o);
    return st.ok() ? std::string() : st.message();
  };
  auto o = parsed({"-np", "2", "--min-np", "1", "--blacklist-cooldown-range", "10", "100", "--reset-limit", "0",
                   "p", "--x"});
  ASSERT_TRUE(o) << o.error().message();
  EXPECT_EQ(o->blacklist_cooldown, (cooldown_range{10, 100}));
  EXPECT_EQ(o->reset_limit, 0);
  EXPECT_TRUE(o->blacklist);
  EXPECT_EQ(o->command, (std::vector<std::string>{"p", "--x"}));
  auto plain = parsed({"-np", "2", "--min-np", "1", "p"});
  ASSERT_TRUE(plain);
  EXPECT_TRUE(plain->blacklist);  // on by default, as in horovodrun
  EXPECT_FALSE(plain->blacklist_cooldown);
  EXPECT_FALSE(plain->reset_limit);
  EXPECT_EQ(check({"-np", "2", "--min-np", "1", "--no-blacklist", "p"}), "");
  EXPECT_EQ(check({"-np", "2", "--min-np", "1", "--blacklist-cooldown-range", "1", "3600", "p"}), "");
  EXPECT_NE(check({"-np", "2", "--min-np", "1", "--blacklist-cooldown-range", "0", "5", "p"}).find("positive"),
            std::string::npos);
  EXPECT_NE(check({"-np", "2", "--min-np", "1", "--blacklist-cooldown-range", "5", "3601", "p"})
                .find("1 <= MIN <= MAX <= 3600"),
            std::string::npos);
  EXPECT_NE(check({"-np", "2", "--min-np", "1", "--blacklist-cooldown-range", "9", "5", "p"}).find("MIN <= MAX"),
            std::string::npos);
  EXPECT_NE(check({"-np", "2", "--min-np", "1", "--blacklist-cooldown-range", "5"}).find("two values"),
            std::string::npos);
  EXPECT_NE(check({"-np", "2", "--min-np", "1", "--blacklist-cooldown-range=5", "6", "p"}).find("two values"),
            std::string::npos);
  EXPECT_NE(check({"-np", "2", "--min-np", "1", "--reset-limit", "-1", "p"}).find("non-negative"), std::string::npos);
  EXPECT_NE(check({"-np", "2", "--reset-limit", "3", "p"}).find("--reset-limit needs an elastic job"),
            std::string::npos);
  EXPECT_NE(check({"-np", "2", "--no-blacklist", "p"}).find("--no-blacklist needs an elastic job"), std::string::npos);
  EXPECT_NE(check({"-np", "2", "--blacklist-cooldown-range", "1", "2", "p"}).find("needs an elastic job"),
            std::string::npos);
  EXPECT_NE(check({"-np", "2", "--min-np", "1", "--no-blacklist", "--blacklist-cooldown-range", "1", "2", "p"})
                .find("contradict"),
            std::string::npos);
}

TEST(launch_plan, elastic_workers_get_their_id_and_no_rank_serves_the_store) {
  auto opts = parse({"-np", "2", "--min-np", "1", "python3", "t.py"});
  ASSERT_TRUE(opts.elastic());
  auto p = plan_placements(opts, "here");
  ASSERT_TRUE(p);
  auto job = test_job();
  job.store_listener = 9;  // held by chorusrun, which serves the store itself in elastic mode
  auto launches = plan_launch(opts, job, *p, {"PATH=/usr/bin"}, "/w", "here");
  ASSERT_TRUE(launches);
  for (const auto& l : *launches) {
    auto env = as_map(l.env);
    EXPECT_EQ(env["CHORUS_ELASTIC_WORKER"], std::to_string(l.rank));
    EXPECT_EQ(env.count("CHORUS_RENDEZVOUS_FD"), 0u);
    EXPECT_EQ(l.inherit_fd, -1);
  }
  // The wait for slots (main fills it in from the option or the environment) reaches the workers
  // under both names, so an alias inherited with another value cannot contradict it.
  auto timed = parse({"-np", "2", "--min-np", "1", "--elastic-timeout", "7.5", "python3", "t.py"});
  auto with_timeout = plan_launch(timed, job, *p, {"PATH=/usr/bin", "HOROVOD_ELASTIC_TIMEOUT=99"}, "/w", "here");
  ASSERT_TRUE(with_timeout);
  auto env = as_map((*with_timeout)[1].env);
  EXPECT_EQ(env["CHORUS_ELASTIC_TIMEOUT_SECONDS"], "7.5");
  EXPECT_EQ(env["HOROVOD_ELASTIC_TIMEOUT"], "7.5");
  auto plain = plan_launch(parse({"-np", "2", "p"}), job, *p, {"PATH=/usr/bin"}, "/w", "here");
  ASSERT_TRUE(plain);
  EXPECT_EQ(as_map((*plain)[0].env).count("CHORUS_ELASTIC_WORKER"), 0u);
  EXPECT_EQ((*plain)[0].inherit_fd, 9);
}

TEST(launch_plan, elastic_workers_start_on_any_host_like_minus_h_ranks) {
  auto opts = parse({"-np", "2", "--min-np", "1", "--max-np", "4", "--launcher", "hosts.sh exec {host}", "prog"});
  auto job = test_job();
  // A worker added on a remote host: through the launcher, its variables (the secret too) on
  // stdin, its id and its place in the round it joins.
  placement at;
  at.rank = 2;
  at.host = "10.0.0.2";
  at.local_rank = 1;
  at.local_size = 2;
  at.cross_rank = 1;
  at.cross_size = 2;
  auto far = elastic_worker_launch(opts, job, at, 3, 7, {"PATH=/usr/bin"}, "/w", "here");
  ASSERT_TRUE(far) << far.error().message();
  EXPECT_EQ(far->rank, 7);
  EXPECT_EQ(far->host, "10.0.0.2");
  ASSERT_GE(far->argv.size(), 3u);
  EXPECT_EQ(far->argv[2], "10.0.0.2");
  EXPECT_FALSE(argv_mentions(*far, "s3cr3t"));
  auto vars = stdin_vars(far->stdin_data);
  EXPECT_EQ(vars["CHORUS_ELASTIC_WORKER"], "7");
  EXPECT_EQ(vars["CHORUS_RANK"], "2");
  EXPECT_EQ(vars["CHORUS_SIZE"], "3");
  EXPECT_EQ(vars["HOROVOD_LOCAL_RANK"], "1");
  EXPECT_EQ(vars["HOROVOD_CROSS_RANK"], "1");
  EXPECT_EQ(vars["HOROVOD_CROSS_SIZE"], "2");
  EXPECT_EQ(vars["HOROVOD_HOSTNAME"], "10.0.0.2");
  EXPECT_EQ(vars["CHORUS_RENDEZVOUS"], "10.0.0.1:4000");
  // This host's name and the loopback names start directly, launcher or not; other hosts
  // through the launcher, ssh by default.
  EXPECT_TRUE(starts_directly(opts, "here", "here"));
  EXPECT_FALSE(starts_directly(opts, "10.0.0.2", "here"));
  auto direct = parse({"-np", "2", "--min-np", "1", "prog"});
  EXPECT_TRUE(starts_directly(direct, "here", "here"));
  EXPECT_TRUE(starts_directly(direct, "localhost", "here"));
  EXPECT_FALSE(starts_directly(direct, "node2", "here"));
  at.host = "here";
  auto local = elastic_worker_launch(direct, job, at, 3, 7, {"PATH=/usr/bin"}, "/w", "here");
  ASSERT_TRUE(local);
  EXPECT_EQ(local->argv, (std::vector<std::string>{"prog"}));
  EXPECT_EQ(as_map(local->env)["CHORUS_ELASTIC_WORKER"], "7");
  EXPECT_EQ(local->inherit_fd, -1);
  auto ssh = elastic_worker_launch(direct, job, placement{0, 0, "node2"}, 3, 8, {}, "/w", "here");
  ASSERT_TRUE(ssh);
  EXPECT_EQ(ssh->argv.front(), "ssh");
}

TEST(launch_plan, an_elastic_store_listens_where_remote_workers_reach_it) {
  // Every worker here: loopback. A remote host: this host's address on the route there (here
  // the route to 127.0.0.2 leaves from 127.0.0.1 or 127.0.0.2, a loopback address either way;
  // emulated hosts check a real one in tests/hosts).
  auto local = parse({"-np", "2", "--min-np", "1", "prog"});
  auto p = plan_placements(local, "here");
  ASSERT_TRUE(p);
  auto job = make_job_identity(local, *p, "here");
  ASSERT_TRUE(job) << job.error().message();
  EXPECT_EQ(job->rendezvous.rfind("127.0.0.1:", 0), 0u) << job->rendezvous;
  EXPECT_GE(job->store_listener, 0);
  ::close(job->store_listener);
  auto toward = chorus::tcp::address_toward("127.0.0.2");
  ASSERT_TRUE(toward) << toward.error().message();
  EXPECT_EQ(toward->rfind("127.", 0), 0u) << *toward;
  auto remote = parse({"-np", "2", "--min-np", "1", "-H", "127.0.0.2:2", "--launcher", "x {host}", "prog"});
  auto rp = plan_placements(remote, "here");
  ASSERT_TRUE(rp);
  auto rjob = make_job_identity(remote, *rp, "here");
  ASSERT_TRUE(rjob) << rjob.error().message();
  EXPECT_EQ(rjob->rendezvous.rfind(*toward + ":", 0), 0u) << rjob->rendezvous;
  EXPECT_GE(rjob->store_listener, 0) << "chorusrun holds the port it serves the store on";
  ::close(rjob->store_listener);
  auto nowhere = chorus::tcp::address_toward("no-such-host.invalid");
  ASSERT_FALSE(nowhere);
  EXPECT_NE(nowhere.error().message().find("'no-such-host.invalid'"), std::string::npos);
}

TEST(launch_plan, an_elastic_store_listens_on_the_address_the_user_names) {
  // Every worker here, but CHORUS_HOST (else CHORUS_IFACE) names this host's address for the
  // job: the store listens there, so that hosts the discovery script offers later reach it.
  auto local = parse({"-np", "2", "--min-np", "1", "prog"});
  auto p = plan_placements(local, "here");
  ASSERT_TRUE(p);
  ::unsetenv("CHORUS_RENDEZVOUS");
  ::setenv("CHORUS_HOST", "127.0.0.2", 1);
  ::setenv("CHORUS_IFACE", "no-such-iface0", 1);  // CHORUS_HOST wins
  auto job = make_job_identity(local, *p, "here");
  ::unsetenv("CHORUS_HOST");
  ASSERT_TRUE(job) << job.error().message();
  EXPECT_EQ(job->rendezvous.rfind("127.0.0.2:", 0), 0u) << job->rendezvous;
  EXPECT_GE(job->store_listener, 0);
  ::close(job->store_listener);
  auto bad = make_job_identity(local, *p, "here");
  ::unsetenv("CHORUS_IFACE");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message().find("no-such-iface0"), std::string::npos) << bad.error().message();
  // Outside an elastic job the rendezvous stays where rank 0 runs.
  auto fixed = parse({"-np", "2", "prog"});
  ::setenv("CHORUS_HOST", "127.0.0.2", 1);
  auto fjob = make_job_identity(fixed, *plan_placements(fixed, "here"), "here");
  ::unsetenv("CHORUS_HOST");
  ASSERT_TRUE(fjob) << fjob.error().message();
  EXPECT_EQ(fjob->rendezvous.rfind("127.0.0.1:", 0), 0u) << fjob->rendezvous;
  if (fjob->store_listener >= 0) ::close(fjob->store_listener);
}

TEST(launch_plan, a_worker_elsewhere_needs_a_store_it_reaches_and_keeps_its_own_address) {
  auto opts = parse({"-np", "2", "--min-np", "1", "--launcher", "hosts.sh exec {host}", "prog"});
  auto job = test_job();
  job.rendezvous = "127.0.0.1:4000";  // every first worker here, neither CHORUS_HOST nor CHORUS_IFACE
  const std::vector<std::string> env{"PATH=/usr/bin", "CHORUS_HOST=10.0.0.1"};
  auto far = elastic_worker_launch(opts, job, placement{1, 0, "10.0.0.2"}, 2, 1, env, "/w", "here");
  ASSERT_FALSE(far);
  const std::string why = far.error().message();
  for (const char* part : {"127.0.0.1:4000", "10.0.0.2", "CHORUS_HOST", "CHORUS_IFACE"})
    EXPECT_NE(why.find(part), std::string::npos) << part << " not in: " << why;
  auto near = elastic_worker_launch(opts, job, placement{1, 0, "here"}, 2, 1, env, "/w", "here");
  ASSERT_TRUE(near) << near.error().message();
  EXPECT_EQ(as_map(near->env)["CHORUS_HOST"], "10.0.0.1") << "a worker here listens on this host's address";
  // A store on this host's address: the remote worker starts, without this host's CHORUS_HOST in
  // its launcher's environment (a launcher that passes it on would make the worker listen on an
  // address it does not have); -x hands one over on purpose.
  job.rendezvous = "10.0.0.1:4000";
  auto reached = elastic_worker_launch(opts, job, placement{1, 0, "10.0.0.2"}, 2, 1, env, "/w", "here");
  ASSERT_TRUE(reached) << reached.error().message();
  EXPECT_EQ(as_map(reached->env).count("CHORUS_HOST"), 0u);
  EXPECT_EQ(stdin_vars(reached->stdin_data).count("CHORUS_HOST"), 0u);
  auto named = parse({"-np", "2", "--min-np", "1", "--launcher", "x {host}", "-x", "CHORUS_HOST=10.0.0.2", "prog"});
  auto given = elastic_worker_launch(named, job, placement{1, 0, "10.0.0.2"}, 2, 1, env, "/w", "here");
  ASSERT_TRUE(given) << given.error().message();
  EXPECT_EQ(stdin_vars(given->stdin_data)["CHORUS_HOST"], "10.0.0.2");
}
