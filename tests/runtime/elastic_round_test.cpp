// Elastic rounds (runtime/rendezvous/elastic_round.hpp) against a real store on 127.0.0.1: the
// assignment codec, a worker joining the newest round and the round after the one it left, the
// launcher's stop, and two ranks of a round meeting under that round's key prefix. Waits are
// bounded well under 2 s.
#include "runtime/rendezvous/elastic_round.hpp"

#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "runtime/rendezvous/kv_client.hpp"
#include "runtime/rendezvous/kv_server.hpp"
#include "runtime/rendezvous/rendezvous.hpp"

namespace chorus {
namespace {

using namespace std::chrono_literals;
using clock = std::chrono::steady_clock;

// A store on 127.0.0.1 and a client standing in for chorusrun.
struct launcher {
  kv::credentials creds{"secret-bytes", 0x42};
  kv_server server{creds};
  uint16_t port = 0;
  std::unique_ptr<kv_client> client;

  launcher() {
    auto p = server.start("127.0.0.1", 0);
    EXPECT_TRUE(p.ok());
    port = p ? *p : 0;
    client = std::make_unique<kv_client>("127.0.0.1", port, creds, 999);
    EXPECT_TRUE(client->connect(clock::now() + 1s).ok());
  }
  void set(const std::string& k, const std::string& v) {
    auto r = client->call(kv::request{kv::op::set, k, v, 0, 0}, clock::now() + 1s);
    ASSERT_TRUE(r.ok());
  }
  bool has(const std::string& k) {
    auto r = client->call(kv::request{kv::op::get, k, {}, 0, 0}, clock::now());
    return r.ok() && r->code == kv::reply_code::ok;
  }
  process_env worker(int id) const {
    process_env env;
    env.rendezvous_port = port;
    env.rendezvous_timeout = 1500ms;
    env.elastic_timeout = 0ms;
    env.job_secret = creds.secret;
    env.job_id = creds.job_id;
    env.elastic_worker = id;
    env.source = "chorus";
    return env;
  }
};

TEST(ElasticRound, AssignmentsRoundTripAndBadOnesAreNamed) {
  elastic::assignment a{2, 3, 1, 2};
  auto back = elastic::decode_assignment(elastic::encode_assignment(a), 7, 4);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->rank, 2);
  EXPECT_EQ(back->size, 3);
  EXPECT_EQ(back->local_rank, 1);
  EXPECT_EQ(back->local_size, 2);
  auto bad = elastic::decode_assignment("rank 3 size 3 local_rank 0 local_size 1", 7, 4);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("worker 7 in round 4"), std::string::npos);
  auto stop = elastic::decode_assignment(elastic::encode_stop("too few"), 7, 4);
  ASSERT_FALSE(stop.ok());
  EXPECT_EQ(stop.error().code(), errc::rendezvous);
  EXPECT_EQ(stop.error().message(), "too few");
  EXPECT_FALSE(elastic::removed(stop.error()));
  auto leave = elastic::decode_assignment(elastic::encode_leave("2 slots for 3 workers"), 7, 4);
  ASSERT_FALSE(leave.ok());
  EXPECT_TRUE(elastic::removed(leave.error())) << leave.error().to_string();
  EXPECT_EQ(leave.error().message(), "worker 7 was removed from the job by chorusrun in round 4: 2 slots for 3 workers");
}

TEST(ElasticRound, FirstJoinTakesTheNewestRoundAndALaterOneAsksForTheNext) {
  launcher l;
  l.set(elastic::assign_key(0, 5), elastic::encode_assignment({1, 2, 1, 2}));
  l.set(elastic::latest_key(), "0");
  auto first = elastic::join_round(l.worker(5), -1);
  ASSERT_TRUE(first.ok()) << first.error().to_string();
  EXPECT_EQ(first->elastic_round, 0);
  EXPECT_EQ(first->rank, 1);
  EXPECT_EQ(first->size, 2);
  auto latest = elastic::latest_round(*first);
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ(*latest, 0);

  // The worker leaves round 0: it asks, and the launcher answers with round 1 a moment later.
  auto joining = std::async(std::launch::async, [&] { return elastic::join_round(*first, 0); });
  auto until = clock::now() + 1s;
  while (!l.has(elastic::want_key(0)) && clock::now() < until) std::this_thread::sleep_for(5ms);
  ASSERT_TRUE(l.has(elastic::want_key(0))) << "the worker did not ask for a new round";
  l.set(elastic::assign_key(1, 5), elastic::encode_assignment({0, 1, 0, 1}));
  l.set(elastic::latest_key(), "1");
  l.set(elastic::next_key(0), "1");
  auto second = joining.get();
  ASSERT_TRUE(second.ok()) << second.error().to_string();
  EXPECT_EQ(second->elastic_round, 1);
  EXPECT_EQ(second->rank, 0);
  EXPECT_EQ(second->size, 1);
}

TEST(ElasticRound, TheLaunchersStopEndsTheJoinWithItsWords) {
  launcher l;
  l.set(elastic::assign_key(3, 1), elastic::encode_stop("chorusrun: 1 rank(s) left, fewer than --min-np 2"));
  l.set(elastic::latest_key(), "3");
  l.set(elastic::next_key(2), "3");
  auto joined = elastic::join_round(l.worker(1), 2);
  ASSERT_FALSE(joined.ok());
  EXPECT_NE(joined.error().message().find("fewer than --min-np 2"), std::string::npos);
}

TEST(ElasticRound, NoNewRoundEndsByTheRendezvousTimeout) {
  launcher l;
  auto env = l.worker(0);
  env.rendezvous_timeout = 300ms;
  auto start = clock::now();
  auto joined = elastic::join_round(env, 4);
  ASSERT_FALSE(joined.ok());
  EXPECT_LT(clock::now() - start, 2s);
  EXPECT_NE(joined.error().message().find("round after round 4"), std::string::npos);
}

// Below --min-np chorusrun may wait its --elastic-timeout for slots before it forms the next
// round: a worker waits that long on top of its rendezvous timeout, and says so.
TEST(ElasticRound, TheWaitForTheNextRoundTakesTheElasticTimeoutToo) {
  launcher l;
  auto env = l.worker(0);
  env.rendezvous_timeout = 300ms;
  env.elastic_timeout = 500ms;
  auto start = clock::now();
  auto joined = elastic::join_round(env, 4);
  ASSERT_FALSE(joined.ok());
  EXPECT_GE(clock::now() - start, 750ms);
  EXPECT_LT(clock::now() - start, 3s);
  EXPECT_NE(joined.error().message().find("waited 800 ms for the launcher to form the round after round 4"),
            std::string::npos)
      << joined.error().message();
}

TEST(ElasticRound, RanksOfARoundMeetUnderItsPrefixInTheLaunchersStore) {
  launcher l;
  auto open = [&](int rank, int64_t round) {
    auto env = l.worker(rank);
    env.rank = rank;
    env.size = 2;
    env.elastic_round = round;
    return rendezvous::open(env);
  };
  for (int64_t round : {0, 1}) {
    auto r1 = std::async(std::launch::async, [&] { return open(1, round); });
    auto r0 = open(0, round);
    auto other = r1.get();
    ASSERT_TRUE(r0.ok()) << r0.error().to_string();
    ASSERT_TRUE(other.ok()) << other.error().to_string();
    EXPECT_EQ((*r0)->session_id(), (*other)->session_id());
    ASSERT_TRUE((*r0)->publish("ep/0", "a" + std::to_string(round)).ok());
    ASSERT_TRUE((*other)->publish("ep/1", "b" + std::to_string(round)).ok());
    auto all = (*r0)->gather("ep/", 1s);
    ASSERT_TRUE(all.ok());
    EXPECT_EQ((*all)[0], "a" + std::to_string(round));  // not the last round's value
    EXPECT_TRUE(l.has("round/" + std::to_string(round) + "/ep/1"));
  }
}

TEST(ElasticRound, ARoundSupersededWhileItGathersEndsTheWaitAtOnce) {
  launcher l;
  l.set(elastic::latest_key(), "0");
  auto env = l.worker(0);
  env.size = 2;  // rank 1 never comes: it died
  env.elastic_round = 0;
  env.rendezvous_timeout = 10s;
  auto start = clock::now();
  auto rdv = rendezvous::open(env);  // rank 0 draws the nonce: it waits for nobody here
  ASSERT_TRUE(rdv.ok()) << rdv.error().to_string();
  auto gathering = std::async(std::launch::async, [&] { return (*rdv)->gather("ep/", 10s); });
  std::this_thread::sleep_for(300ms);
  l.set(elastic::latest_key(), "1");
  auto got = gathering.get();
  ASSERT_FALSE(got.ok());
  EXPECT_TRUE(elastic::superseded(got.error())) << got.error().to_string();
  EXPECT_NE(got.error().message().find("round 0 was superseded by round 1"), std::string::npos);
  EXPECT_LT(clock::now() - start, 2s) << "the wait went on past the new round";
}

}  // namespace
}  // namespace chorus
