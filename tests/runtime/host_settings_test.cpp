// Host identity (boot id, host name, /dev/shm device; CHORUS_HOST_ID), the CHORUS_HOST_ID /
// CHORUS_IFACE / CHORUS_HOST reader, interface addresses and IPv6 endpoints.
#include "runtime/env/host_settings.hpp"

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <gtest/gtest.h>
#include <unistd.h>

#include <map>

#include "runtime/transport/tcp/iface.hpp"
#include "runtime/transport/tcp/socket_util.hpp"

using namespace chorus;

namespace {
env_lookup lookup(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}
}  // namespace

TEST(host_settings, reads_the_three_variables) {
  auto s = read_host_settings(lookup({{"CHORUS_HOST_ID", "rack1-node7"}, {"CHORUS_IFACE", "eth0"}, {"CHORUS_HOST", "10.0.0.5"}}));
  EXPECT_EQ(s.host_id, "rack1-node7");
  EXPECT_EQ(s.iface, "eth0");
  EXPECT_EQ(s.bind_host, "10.0.0.5");
  auto none = read_host_settings(lookup({}));
  EXPECT_TRUE(none.host_id.empty() && none.iface.empty() && none.bind_host.empty());
}

TEST(host_identity, includes_the_device_of_dev_shm) {
  struct stat st {};
  ASSERT_EQ(::stat("/dev/shm", &st), 0);
  auto id = host_identity(host_settings{});
  auto want = "/shm=" + std::to_string(major(st.st_dev)) + ":" + std::to_string(minor(st.st_dev));
  EXPECT_NE(id.find(want), std::string::npos) << id;
  EXPECT_EQ(id, host_identity(host_settings{}));  // stable
}

TEST(host_identity, chorus_host_id_overrides) {
  host_settings s;
  s.host_id = "node-a";
  EXPECT_EQ(host_identity(s), "id:node-a");
  s.host_id = "node-b";
  EXPECT_NE(host_identity(s), "id:node-a");
}

TEST(host_identity, the_host_name_comes_back_out_for_messages) {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  EXPECT_EQ(host_name_in(host_identity(host_settings{})), name);
  host_settings s;
  s.host_id = "node-a";
  EXPECT_EQ(host_name_in(host_identity(s)), "node-a");
  EXPECT_EQ(host_name_in("garbage"), "");
  EXPECT_EQ(host_name_in(""), "");
}

TEST(iface, loopback_has_an_address_and_unknown_interfaces_are_named) {
  auto lo = tcp::interface_address("lo");
  ASSERT_TRUE(lo) << lo.error().message();
  EXPECT_EQ(*lo, "127.0.0.1");
  auto bad = tcp::interface_address("no-such-if0");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message().find("CHORUS_IFACE=no-such-if0"), std::string::npos);
  EXPECT_NE(bad.error().message().find("lo"), std::string::npos);
}

TEST(endpoints, ipv6_round_trips_and_connects) {
  auto ep = tcp::parse_endpoint("[::1]:4242");
  ASSERT_TRUE(ep);
  EXPECT_EQ(ep->host, "::1");
  EXPECT_EQ(ep->port, 4242);
  EXPECT_EQ(ep->to_string(), "[::1]:4242");
  uint16_t port = 0;
  auto l = tcp::listen_on("::1", 0, &port);
  if (!l) GTEST_SKIP() << "no IPv6 loopback here: " << l.error().message();
  auto c = tcp::connect_to({"::1", port}, tcp::clock::now() + std::chrono::seconds(5));
  ASSERT_TRUE(c) << c.error().message();
  EXPECT_EQ(tcp::local_address_towards("::1"), "::1");
  EXPECT_EQ(tcp::peer_name(c->get()), "[::1]:" + std::to_string(port));
}

TEST(host_settings, a_job_across_hosts_needs_a_secret) {
  process_env env;
  env.size = 4;
  env.local_size = 2;
  env.rank = 3;
  auto st = require_secret_across_hosts(env);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("CHORUS_JOB_SECRET"), std::string::npos) << st.message();
  env.job_secret = "k";
  EXPECT_TRUE(require_secret_across_hosts(env).ok());
  env.job_secret.clear();
  env.local_size = 4;  // one host
  EXPECT_TRUE(require_secret_across_hosts(env).ok());
  env.local_size = 1;
  env.local_assumed = true;  // no launcher said otherwise: one host assumed
  EXPECT_TRUE(require_secret_across_hosts(env).ok());
}
