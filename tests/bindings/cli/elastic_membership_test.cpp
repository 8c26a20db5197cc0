// chorusrun's elastic membership (elastic_membership.hpp) against a real elastic store on
// 127.0.0.1, with a fake supervisor (hooks that record) and real discovery scripts: surplus
// workers told to leave and signalled when they stay, the wait below --min-np ending in new
// workers or in the end of the job, and no wait without a script; a failed worker's host
// blacklisted (its other workers stopped, no new ones there until a cooldown ends) and
// --reset-limit. What a worker reads is read
// as a worker reads it (elastic::join_round). Timings are shortened; every wait is bounded.
#include "bindings/cli/chorusrun/elastic_membership.hpp"

#include <signal.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "bindings/cli/chorusrun/elastic_coordinator.hpp"
#include "bindings/cli/chorusrun/job_env.hpp"
#include "bindings/cli/chorusrun/launch_plan.hpp"
#include "runtime/env/process_env.hpp"
#include "runtime/rendezvous/elastic_round.hpp"

using namespace chorus;
using namespace chorus::chorusrun;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

namespace {

constexpr int exit_0 = 0;          // waitpid status of exit(0)
constexpr int killed_by_9 = SIGKILL;  // waitpid status of death by SIGKILL

// A store served as chorusrun serves it, a slots file behind a discovery script, and a
// supervisor that only records what it is asked.
struct fixture {
  launch_options opts;
  job_identity job;
  std::unique_ptr<elastic_coordinator> store;
  std::string slots_file;
  std::vector<std::string> said;
  std::vector<int> started;
  std::vector<placement> started_at;  // the place each started worker was given
  std::vector<int> started_world;
  std::string refuse_host;            // start_worker fails there
  std::vector<std::pair<int, int>> signalled;  // (worker, signal)
  std::optional<bool> ended;                   // end_job's `told`
  std::unique_ptr<elastic_membership> m;

  // `hosts`: the script prints the slots file as it is ("host:slots" lines, offer_hosts);
  // else "localhost:<the number in it>" (offer). `where`: worker r's host (default "here", this
  // host). Blacklisting is off (--no-blacklist) unless `blacklist`: with every worker on one host,
  // a failure would end the job (tests of it turn it on).
  fixture(int np, int min_np, int max_np, bool script, double timeout_s = 600, bool hosts = false,
          std::vector<std::string> where = {}, bool blacklist = false,
          std::optional<cooldown_range> cooldown = std::nullopt, std::optional<int> reset_limit = std::nullopt) {
    opts.num_ranks = np;
    opts.blacklist = blacklist;
    opts.blacklist_cooldown = cooldown;
    opts.reset_limit = reset_limit;
    opts.min_np = min_np;
    opts.max_np = max_np;
    opts.elastic_timeout_seconds = timeout_s;
    char name[] = "/tmp/chorus-membership-XXXXXX";
    int fd = ::mkstemp(name);
    EXPECT_GE(fd, 0);
    ::close(fd);
    slots_file = name;
    offer(np);
    if (script) opts.discovery_script = hosts ? "cat " + slots_file : "echo localhost:$(cat " + slots_file + ")";
    if (hosts) offer_hosts("localhost:" + std::to_string(np));
    auto places = plan_placements(opts, "here");
    EXPECT_TRUE(places);
    auto j = make_job_identity(opts, *places, "here");
    EXPECT_TRUE(j) << (j ? "" : j.error().message());
    job = *j;
    auto s = elastic_coordinator::start(job);
    EXPECT_TRUE(s) << (s ? "" : s.error().message());
    store = std::move(*s);
    std::vector<worker_at> workers;
    for (int r = 0; r < np; ++r) workers.push_back({r, r < static_cast<int>(where.size()) ? where[r] : "here"});
    EXPECT_TRUE(store->form_round(workers).ok());
    elastic_timing t;
    t.settle = 20ms;
    t.discovery_interval = 30ms;
    t.discovery_bound = 2s;
    t.leave_grace = 200ms;
    t.kill_grace = 100ms;
    membership_hooks h;
    h.say = [this](const std::string& s) { said.push_back(s); };
    h.start_worker = [this](int id, const placement& at, int world_size) {
      if (at.host == refuse_host) return false;
      started.push_back(id);
      started_at.push_back(at);
      started_world.push_back(world_size);
      return true;
    };
    h.signal_worker = [this](int id, int sig) { signalled.emplace_back(id, sig); };
    h.end_job = [this](bool told) { ended = told; };
    m = std::make_unique<elastic_membership>(opts, t, "here", *store, workers, h);
  }
  ~fixture() { std::remove(slots_file.c_str()); }

  void offer(int n) {
    std::ofstream(slots_file) << n << "\n";
  }

  void offer_hosts(const std::string& lines) { std::ofstream(slots_file) << lines; }

  // Ticks until `done` or `bound` passed; returns done().
  template <class F>
  bool tick_until(F done, std::chrono::milliseconds bound = 3000ms) {
    auto end = clock_type::now() + bound;
    while (!done() && clock_type::now() < end) {
      m->tick();
      std::this_thread::sleep_for(5ms);
    }
    return done();
  }

  bool said_with(const std::string& part) const {
    for (const auto& s : said)
      if (s.find(part) != std::string::npos) return true;
    return false;
  }

  // What worker `id` finds in the newest round, as its init() would.
  result<process_env> join(int id) const {
    std::map<std::string, std::string> vars = {{"CHORUS_RENDEZVOUS", job.rendezvous},
                                               {"CHORUS_JOB_SECRET", job.secret},
                                               {"CHORUS_JOB_ID", job.job_id},
                                               {"CHORUS_RANK", "0"},
                                               {"CHORUS_SIZE", "1"},
                                               {"CHORUS_ELASTIC_WORKER", std::to_string(id)},
                                               {"CHORUS_RENDEZVOUS_TIMEOUT_SECONDS", "0.5"}};
    auto env = read_process_env([&](const char* n) -> const char* {
      auto it = vars.find(n);
      return it == vars.end() ? nullptr : it->second.c_str();
    });
    if (!env) return env.error();
    return elastic::join_round(*env, -1);
  }
};

TEST(elastic_membership, fewer_slots_remove_the_highest_id_which_is_told_to_leave) {
  fixture f(3, 2, 3, true);
  f.offer(2);
  ASSERT_TRUE(f.tick_until([&] { return f.store->round() == 1; })) << "no round without the surplus worker";
  EXPECT_TRUE(f.said_with("offers 2 slot(s) for 3 worker(s): worker(s) 2 leave")) << testing::PrintToString(f.said);
  auto kept = f.join(1);
  ASSERT_TRUE(kept) << kept.error().to_string();
  EXPECT_EQ(kept->size, 2);
  EXPECT_EQ(kept->rank, 1);
  auto gone = f.join(2);
  ASSERT_FALSE(gone);
  EXPECT_TRUE(elastic::removed(gone.error())) << gone.error().to_string();
  // It leaves by itself (exit 0 or not): nothing else changes, and it is not signalled.
  f.m->on_exit(2, exit_0, "exited with status 0");
  f.tick_until([] { return false; }, 400ms);
  EXPECT_EQ(f.store->round(), 1);
  EXPECT_TRUE(f.signalled.empty());
  EXPECT_FALSE(f.ended);
  // Worker 1 dies now: the job is below --min-np 2 and waits for slots (2 offered: none missing
  // for the one left, so one is started and a round formed with it).
  f.m->on_exit(1, killed_by_9, "was killed by signal 9");
  ASSERT_TRUE(f.tick_until([&] { return f.store->round() == 2; }));
  EXPECT_EQ(f.started, (std::vector<int>{3}));  // a fresh id, never a removed one's
  auto fresh = f.join(3);
  ASSERT_TRUE(fresh) << fresh.error().to_string();
  EXPECT_EQ(fresh->size, 2);
}

TEST(elastic_membership, a_removed_worker_that_stays_gets_sigterm_then_sigkill_and_min_np_holds) {
  fixture f(3, 2, 3, true);
  f.offer(1);  // one slot: --min-np 2 keeps two workers
  ASSERT_TRUE(f.tick_until([&] { return f.signalled.size() >= 2; }));
  EXPECT_EQ(f.signalled, (std::vector<std::pair<int, int>>{{2, SIGTERM}, {2, SIGKILL}}));
  EXPECT_TRUE(f.said_with("--min-np 2 keeps 1 more than that")) << testing::PrintToString(f.said);
  EXPECT_EQ(f.store->round(), 1);
  EXPECT_TRUE(f.join(0));
  EXPECT_TRUE(f.join(1));
  f.m->on_exit(2, killed_by_9, "was killed by signal 9");  // its exit does not count
  f.tick_until([] { return false; }, 200ms);
  EXPECT_EQ(f.store->round(), 1);
  EXPECT_FALSE(f.ended);
}

TEST(elastic_membership, below_min_np_the_job_waits_for_slots_and_ends_when_none_come) {
  fixture f(2, 2, 3, true, 0.4);
  f.offer(1);
  f.m->on_exit(1, killed_by_9, "was killed by signal 9");
  EXPECT_TRUE(f.said_with("1 rank(s) left, fewer than --min-np 2: waiting up to --elastic-timeout 0.4 s"))
      << testing::PrintToString(f.said);
  EXPECT_FALSE(f.ended);
  auto start = clock_type::now();
  ASSERT_TRUE(f.tick_until([&] { return f.ended.has_value(); }));
  EXPECT_GE(clock_type::now() - start, 300ms);
  EXPECT_TRUE(*f.ended);
  EXPECT_TRUE(f.started.empty());
  auto told = f.join(0);
  ASSERT_FALSE(told);
  EXPECT_NE(told.error().message().find("no slots for more within --elastic-timeout 0.4 s"), std::string::npos)
      << told.error().to_string();
}

TEST(elastic_membership, without_a_script_below_min_np_ends_at_once) {
  fixture f(2, 2, 2, false);
  f.m->on_exit(0, killed_by_9, "was killed by signal 9");
  ASSERT_TRUE(f.ended.has_value());
  EXPECT_TRUE(*f.ended);
  EXPECT_TRUE(f.said_with("rank 0 was killed by signal 9; 1 rank(s) left, fewer than --min-np 2: ending the job"));
  auto told = f.join(1);
  ASSERT_FALSE(told);
  EXPECT_FALSE(elastic::removed(told.error()));
}

TEST(elastic_membership, workers_follow_the_hosts_the_script_offers) {
  fixture f(2, 1, 3, true, 600, true);  // workers 0 and 1 on this host ("here")
  // This host keeps one slot, host far offers one: worker 1 leaves, worker 2 starts on far, and
  // one round has both changes.
  f.offer_hosts("localhost:1\nfar:1\n");
  ASSERT_TRUE(f.tick_until([&] { return f.store->round() == 1; })) << testing::PrintToString(f.said);
  ASSERT_EQ(f.started, (std::vector<int>{2}));
  EXPECT_EQ(f.started_at[0].host, "far");
  EXPECT_EQ(f.started_at[0].rank, 1);  // its place in the round it joins, in its variables
  EXPECT_EQ(f.started_at[0].local_rank, 0);
  EXPECT_EQ(f.started_at[0].cross_rank, 1);
  EXPECT_EQ(f.started_at[0].cross_size, 2);
  EXPECT_EQ(f.started_world[0], 2);
  EXPECT_TRUE(f.said_with("host discovery added 1 worker(s); --host-discovery-script offers 2 slot(s) for 2 "
                          "worker(s): worker(s) 1 leave"))
      << testing::PrintToString(f.said);
  auto far = f.join(2);
  ASSERT_TRUE(far) << far.error().to_string();
  EXPECT_EQ(far->rank, 1);
  EXPECT_EQ(far->size, 2);
  EXPECT_EQ(far->local_rank, 0);
  EXPECT_EQ(far->local_size, 1);
  auto gone = f.join(1);
  ASSERT_FALSE(gone);
  EXPECT_TRUE(elastic::removed(gone.error())) << gone.error().to_string();
  EXPECT_NE(gone.error().message().find("no slot for it on host 'here'"), std::string::npos)
      << gone.error().to_string();
  f.m->on_exit(1, exit_0, "exited with status 0");
  // Host far disappears: its worker leaves (--min-np 1 allows it), nobody starts.
  f.offer_hosts("localhost:1\n");
  ASSERT_TRUE(f.tick_until([&] { return f.store->round() == 2; })) << testing::PrintToString(f.said);
  EXPECT_EQ(f.started.size(), 1u);
  auto left = f.join(2);
  ASSERT_FALSE(left);
  EXPECT_TRUE(elastic::removed(left.error()));
  auto kept = f.join(0);
  ASSERT_TRUE(kept);
  EXPECT_EQ(kept->size, 1);
  f.m->on_exit(2, exit_0, "exited with status 0");
  // A host where no worker can be started is not tried again.
  f.refuse_host = "broken";
  f.offer_hosts("localhost:1\nbroken:1\n");
  f.tick_until([] { return false; }, 300ms);
  EXPECT_EQ(f.store->round(), 2);
  EXPECT_EQ(f.started.size(), 1u);
  // Host far comes back: a worker with a fresh id joins at the next round.
  f.offer_hosts("localhost:1\nbroken:1\nfar:1\n");
  ASSERT_TRUE(f.tick_until([&] { return f.store->round() == 3; })) << testing::PrintToString(f.said);
  EXPECT_EQ(f.started.back(), 4);  // id 3 went to the host that refused it
  EXPECT_EQ(f.started_at.back().host, "far");
  auto back = f.join(4);
  ASSERT_TRUE(back) << back.error().to_string();
  EXPECT_EQ(back->size, 2);
}

}  // namespace

TEST(elastic_membership, a_failure_on_the_only_host_blacklists_it_and_ends_the_job) {
  fixture f(3, 2, 3, false, 600, false, {}, true);
  f.m->on_exit(1, killed_by_9, "was killed by signal 9");
  ASSERT_TRUE(f.ended.has_value());
  EXPECT_TRUE(*f.ended);  // told through the store, not signalled
  EXPECT_TRUE(f.signalled.empty());
  EXPECT_TRUE(f.said_with("rank 1 was killed by signal 9; host here is blacklisted for the rest of the job "
                          "(no --blacklist-cooldown-range); worker(s) 0, 2 there stop; 0 rank(s) left, "
                          "fewer than --min-np 2 and none on a host that is not blacklisted: ending the job"))
      << testing::PrintToString(f.said);
  for (int w : {0, 2}) {
    auto told = f.join(w);
    ASSERT_FALSE(told);
    EXPECT_NE(told.error().message().find("host here is blacklisted"), std::string::npos) << told.error().to_string();
  }
}

TEST(elastic_membership, a_blacklisted_hosts_workers_stop_and_new_ones_start_there_after_the_cooldown) {
  fixture f(3, 1, 3, true, 600, true, {"here", "b", "b"}, true, cooldown_range{1, 1});
  f.offer_hosts("here:1\nb:2\n");
  const auto failed = clock_type::now();
  f.m->on_exit(1, killed_by_9, "was killed by signal 9");
  ASSERT_FALSE(f.ended.has_value());
  EXPECT_TRUE(f.said_with("host b is blacklisted for 1 s (failure 1 there, --blacklist-cooldown-range); "
                          "worker(s) 2 there stop; elastic round 1 goes on with 1 rank(s)"))
      << testing::PrintToString(f.said);
  EXPECT_EQ(f.signalled, (std::vector<std::pair<int, int>>{{2, SIGTERM}}));
  auto zero = f.join(0);
  ASSERT_TRUE(zero) << zero.error().to_string();
  EXPECT_EQ(zero->size, 1);
  auto two = f.join(2);
  ASSERT_FALSE(two);
  EXPECT_TRUE(elastic::removed(two.error())) << two.error().to_string();
  f.m->on_exit(2, SIGTERM, "was killed by signal 15");  // a stopped worker's end does not count
  // While b cools down the script's two slots there stay empty.
  EXPECT_FALSE(f.tick_until([&] { return !f.started.empty(); }, 600ms));
  ASSERT_TRUE(f.tick_until([&] { return f.started.size() == 2; }, 3000ms));
  EXPECT_GE(clock_type::now() - failed, 1s);
  EXPECT_TRUE(f.said_with("host b's blacklist cooldown is over: workers may start there again"));
  for (const auto& p : f.started_at) EXPECT_EQ(p.host, "b");
  EXPECT_TRUE(f.said_with("elastic round 2 goes on with 3 rank(s)")) << testing::PrintToString(f.said);
  EXPECT_FALSE(f.ended.has_value());
}

TEST(elastic_membership, below_min_np_with_the_other_hosts_blacklisted_the_timeout_names_them) {
  fixture f(2, 2, 2, true, 0.4, true, {"here", "b"}, true);
  f.offer_hosts("here:1\nb:1\n");
  f.m->on_exit(1, killed_by_9, "was killed by signal 9");
  EXPECT_TRUE(f.said_with("waiting up to --elastic-timeout 0.4 s for --host-discovery-script to offer slots "
                          "(blacklisted host(s): b)"))
      << testing::PrintToString(f.said);
  ASSERT_TRUE(f.tick_until([&] { return f.ended.has_value(); }));
  EXPECT_TRUE(f.started.empty());  // b's slot is offered but blacklisted
  auto told = f.join(0);
  ASSERT_FALSE(told);
  EXPECT_NE(told.error().message().find("within --elastic-timeout 0.4 s (blacklisted host(s): b): ending the job"),
            std::string::npos)
      << told.error().to_string();
}

TEST(elastic_membership, past_the_reset_limit_the_job_ends_instead_of_forming_a_round) {
  fixture f(3, 1, 3, false, 600, false, {}, false, std::nullopt, 1);
  f.m->on_exit(2, killed_by_9, "was killed by signal 9");
  EXPECT_TRUE(f.said_with("elastic round 1 goes on with 2 rank(s)")) << testing::PrintToString(f.said);
  ASSERT_FALSE(f.ended.has_value());
  f.m->on_exit(1, killed_by_9, "was killed by signal 9");
  ASSERT_TRUE(f.ended.has_value());
  EXPECT_TRUE(*f.ended);
  EXPECT_TRUE(f.said_with("rank 1 was killed by signal 9; the job was already reset 1 time(s), all --reset-limit 1 "
                          "allows: ending the job"))
      << testing::PrintToString(f.said);
  auto told = f.join(0);
  ASSERT_FALSE(told);
  EXPECT_NE(told.error().message().find("--reset-limit 1"), std::string::npos) << told.error().to_string();
}
