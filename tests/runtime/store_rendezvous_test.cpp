// The rendezvous in a framework's store (runtime/rendezvous/store_rendezvous.hpp) over an
// in-memory store shared by threads: every member agrees on one session, a secret is drawn when
// none is set and checked when one is, a store met again counts a new attempt, and a member that
// never comes is named.
#include <gtest/gtest.h>

#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "runtime/rendezvous/store_rendezvous.hpp"

namespace chorus {
namespace {

using namespace std::chrono_literals;

struct memory {
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::string, std::string> kv;
};

class memory_store final : public external_store {
 public:
  explicit memory_store(std::shared_ptr<memory> m) : m_(std::move(m)) {}
  status set(const std::string& key, const std::string& value) override {
    std::lock_guard lk(m_->mu);
    m_->kv[key] = value;
    m_->cv.notify_all();
    return {};
  }
  result<std::string> get(const std::string& key, std::chrono::milliseconds timeout) override {
    std::unique_lock lk(m_->mu);
    if (!m_->cv.wait_for(lk, timeout, [&] { return m_->kv.count(key) > 0; }))
      return status{errc::timeout, "no " + key};
    return m_->kv[key];
  }
  result<int64_t> add(const std::string& key, int64_t delta) override {
    std::lock_guard lk(m_->mu);
    int64_t v = m_->kv.count(key) ? std::stoll(m_->kv[key]) : 0;
    m_->kv[key] = std::to_string(v + delta);
    m_->cv.notify_all();
    return v + delta;
  }
  result<bool> check(const std::string& key) override {
    std::lock_guard lk(m_->mu);
    return m_->kv.count(key) > 0;
  }
  std::string describe() const override { return "the test's store"; }

 private:
  std::shared_ptr<memory> m_;
};

struct joined {
  std::vector<std::unique_ptr<store_rendezvous>> rdv;
  std::vector<process_env> env;
  std::vector<status> errors;
};

joined join_all(const std::shared_ptr<memory>& m, int n, std::vector<std::string> secrets = {},
                std::chrono::milliseconds timeout = 5s) {
  joined j;
  j.rdv.resize(n);
  j.env.resize(n);
  j.errors.resize(n);
  std::vector<std::thread> ts;
  for (int r = 0; r < n; ++r) {
    j.env[r].rendezvous_timeout = timeout;
    if (!secrets.empty()) j.env[r].job_secret = secrets[r];
    ts.emplace_back([&, r] {
      auto got = store_rendezvous::open(std::make_unique<memory_store>(m), r, n, j.env[r]);
      if (got)
        j.rdv[r] = std::move(*got);
      else
        j.errors[r] = got.error();
    });
  }
  for (auto& t : ts) t.join();
  return j;
}

TEST(store_rendezvous, members_agree_on_a_session_a_drawn_secret_and_a_job_id) {
  auto m = std::make_shared<memory>();
  auto j = join_all(m, 3);
  for (int r = 0; r < 3; ++r) ASSERT_TRUE(j.rdv[r]) << j.errors[r].to_string();
  EXPECT_EQ(j.env[0].job_secret.size(), 32u);
  for (int r = 1; r < 3; ++r) {
    EXPECT_EQ(j.rdv[r]->session_id(), j.rdv[0]->session_id());
    EXPECT_EQ(j.env[r].job_secret, j.env[0].job_secret);
    EXPECT_EQ(j.env[r].job_id, j.env[0].job_id);
  }
  EXPECT_NE(j.env[0].job_id, 0u);
  // Values travel like the job's own store's.
  std::vector<std::thread> ts;
  std::vector<std::vector<std::string>> seen(3);
  for (int r = 0; r < 3; ++r)
    ts.emplace_back([&, r] {
      ASSERT_TRUE(j.rdv[r]->publish("ep/" + std::to_string(r), "e" + std::to_string(r)).ok());
      auto all = j.rdv[r]->gather("ep/", 5s);
      ASSERT_TRUE(all) << all.error().to_string();
      seen[r] = *all;
    });
  for (auto& t : ts) t.join();
  for (int r = 0; r < 3; ++r) EXPECT_EQ(seen[r], (std::vector<std::string>{"e0", "e1", "e2"}));
}

TEST(store_rendezvous, a_store_met_again_is_a_new_attempt_with_a_new_session) {
  auto m = std::make_shared<memory>();
  auto first = join_all(m, 2);
  auto second = join_all(m, 2);
  ASSERT_TRUE(first.rdv[0] && second.rdv[0] && second.rdv[1]);
  EXPECT_NE(first.rdv[0]->session_id(), second.rdv[0]->session_id());
  EXPECT_EQ(second.rdv[0]->session_id(), second.rdv[1]->session_id());
}

TEST(store_rendezvous, a_given_secret_must_be_every_members) {
  auto m = std::make_shared<memory>();
  auto same = join_all(m, 2, {"s3cr3t", "s3cr3t"});
  ASSERT_TRUE(same.rdv[0] && same.rdv[1]);
  EXPECT_EQ(same.env[1].job_secret, "s3cr3t");
  auto differ = join_all(m, 2, {"s3cr3t", "other"});
  ASSERT_FALSE(differ.rdv[1]);
  EXPECT_EQ(differ.errors[1].code(), errc::config);
  EXPECT_NE(differ.errors[1].message().find("CHORUS_JOB_SECRET differs"), std::string::npos);
  auto missing = join_all(m, 2, {"", "s3cr3t"});
  ASSERT_FALSE(missing.rdv[1]);
  EXPECT_NE(missing.errors[1].message().find("not on rank 0"), std::string::npos) << missing.errors[1].to_string();
}

TEST(store_rendezvous, a_member_that_never_comes_is_named) {
  auto m = std::make_shared<memory>();
  process_env env;
  env.rendezvous_timeout = 300ms;
  // Rank 0 of 3 alone: it publishes and gathers; ranks 1 and 2 never come.
  auto r0 = store_rendezvous::open(std::make_unique<memory_store>(m), 0, 3, env);
  ASSERT_TRUE(r0) << r0.error().to_string();
  ASSERT_TRUE((*r0)->publish("data/0", "x").ok());
  auto all = (*r0)->gather("data/", 200ms);
  ASSERT_FALSE(all);
  EXPECT_EQ(all.error().code(), errc::rendezvous);
  EXPECT_NE(all.error().message().find("ranks 1,2 of 3 never published 'data/'"), std::string::npos)
      << all.error().to_string();
  process_env late;
  late.rendezvous_timeout = 100ms;
  auto out_of_range = store_rendezvous::open(std::make_unique<memory_store>(m), 3, 3, late);
  ASSERT_FALSE(out_of_range);
  EXPECT_EQ(out_of_range.error().code(), errc::invalid_argument);
}

}  // namespace
}  // namespace chorus
