// chorusrun's --host-discovery-script: the parse of what a script prints, one bounded run of a
// real script (its output, a failing one, one that outlives its bound), and the wait for
// --min-np slots at the start of a job.
#include "bindings/cli/chorusrun/host_discovery.hpp"

#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <thread>

using namespace chorus::chorusrun;
using namespace std::chrono_literals;

TEST(host_discovery, hosts_in_order_with_this_hosts_names_as_one) {
  auto d = parse_discovery("localhost:2\n\nnode7:4\n  here  \n[::1]:3\n10.0.0.9\nnode7:1\n", "here");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->size(), 3u);
  EXPECT_EQ(d->at(0).host, "here");
  EXPECT_EQ(d->at(0).slots, 2 + 1 + 3);
  EXPECT_EQ(d->at(1).host, "node7");
  EXPECT_EQ(d->at(1).slots, 4 + 1);
  EXPECT_EQ(d->at(2).host, "10.0.0.9");
  EXPECT_EQ(d->at(2).slots, 1);
  EXPECT_EQ(total_slots(*d), 12);
  auto bad = parse_discovery("localhost:zero\n", "here");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message().find("'localhost:zero'"), std::string::npos);
  EXPECT_FALSE(parse_discovery("localhost:0\n", "here"));
}

TEST(host_discovery, a_script_runs_within_its_bound) {
  auto out = run_discovery_script("echo localhost:3", 5s);
  ASSERT_TRUE(out) << out.error().message();
  EXPECT_EQ(*out, "localhost:3\n");
  auto failed = run_discovery_script("echo no >&2; exit 3", 5s);
  ASSERT_FALSE(failed);
  EXPECT_NE(failed.error().message().find("exit status 3"), std::string::npos);
  EXPECT_NE(failed.error().message().find("no"), std::string::npos);
  auto start = std::chrono::steady_clock::now();
  auto slow = run_discovery_script("sleep 5", 200ms);
  ASSERT_FALSE(slow);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  EXPECT_NE(slow.error().message().find("longer than 200 ms"), std::string::npos);
}

TEST(host_discovery, offered_hosts_are_every_host_and_failures_are_said) {
  std::vector<std::string> said;
  auto say = [&](const std::string& m) { said.push_back(m); };
  auto both = offered_hosts("echo localhost:4; echo far:2", "here", 5s, say);
  ASSERT_TRUE(both);
  EXPECT_EQ(both->size(), 2u);
  EXPECT_EQ(both->at(1).host, "far");
  EXPECT_EQ(both->at(1).slots, 2);
  EXPECT_TRUE(said.empty());
  EXPECT_EQ(offered_hosts("exit 1", "here", 5s, say), std::nullopt);
  EXPECT_NE(said.back().find("keeping the workers"), std::string::npos);
  EXPECT_EQ(offered_hosts("echo localhost:x", "here", 5s, say), std::nullopt);
  EXPECT_NE(said.back().find("'localhost:x'"), std::string::npos);
}

TEST(host_discovery, the_start_waits_for_min_np_slots_or_names_the_timeout) {
  char name[] = "/tmp/chorus-discovery-XXXXXX";
  int fd = ::mkstemp(name);
  ASSERT_GE(fd, 0);
  ::close(fd);
  const std::string file = name;
  const std::string script = "cat " + file;
  std::vector<std::string> said;
  auto say = [&](const std::string& m) { said.push_back(m); };
  { std::ofstream(file) << "a:1\nb:1\n"; }
  auto ready = wait_for_slots(script, "here", 2, 5s, 10ms, 2s, say);
  ASSERT_TRUE(ready) << ready.error().message();
  EXPECT_EQ(total_slots(*ready), 2);
  EXPECT_TRUE(said.empty()) << "no wait when the slots are there";
  // One slot short: it waits (and says so once), then fails naming the timeout.
  { std::ofstream(file) << "a:1\n"; }
  auto start = std::chrono::steady_clock::now();
  auto short_of = wait_for_slots(script, "here", 2, 300ms, 20ms, 2s, say);
  const auto waited = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(short_of);
  EXPECT_GE(waited, 250ms);
  EXPECT_LT(waited, 3s);
  EXPECT_NE(short_of.error().message().find("within --elastic-timeout 0.3 s (last: 1 slot(s))"), std::string::npos)
      << short_of.error().message();
  ASSERT_EQ(said.size(), 1u);
  EXPECT_NE(said[0].find("waiting up to --elastic-timeout 0.3 s"), std::string::npos) << said[0];
  // Slots that come during the wait end it.
  std::thread later([&] {
    std::this_thread::sleep_for(100ms);
    std::ofstream(file + ".new") << "a:1\nc:2\n";
    std::rename((file + ".new").c_str(), file.c_str());
  });
  auto came = wait_for_slots(script, "here", 2, 5s, 20ms, 2s, say);
  later.join();
  ASSERT_TRUE(came) << came.error().message();
  EXPECT_EQ(total_slots(*came), 3);
  std::remove(file.c_str());
}
