// Joining a group in a framework's store: the attempt, the secret, the job id, then the
// endpoints' exchange by publish/gather like the job's own store.
#include "runtime/rendezvous/store_rendezvous.hpp"

#include <algorithm>
#include <cstring>

#include "runtime/core/log.hpp"
#include "runtime/rendezvous/kv_client.hpp"
#include "runtime/wire/handshake.hpp"

namespace chorus {

namespace {

using clock = std::chrono::steady_clock;
constexpr std::size_t max_key_bytes = 4096;
constexpr std::size_t max_value_bytes = 1u << 20;

std::chrono::milliseconds left(clock::time_point deadline) {
  return std::max(std::chrono::milliseconds(0),
                  std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now()));
}

}  // namespace

store_rendezvous::store_rendezvous(std::unique_ptr<external_store> store, int rank, int size,
                                   std::chrono::milliseconds timeout)
    : store_(std::move(store)), rank_(rank), size_(size), timeout_(timeout), shown_(store_->describe()) {}

result<std::unique_ptr<store_rendezvous>> store_rendezvous::open(std::unique_ptr<external_store> store, int rank,
                                                                 int size, process_env& env) {
  if (size < 1 || rank < 0 || rank >= size)
    return status{errc::invalid_argument, "rendezvous in " + store->describe() + ": rank " + std::to_string(rank) +
                                              " is not in a group of size " + std::to_string(size)};
  std::unique_ptr<store_rendezvous> r(new store_rendezvous(std::move(store), rank, size, env.rendezvous_timeout));
  const auto deadline = clock::now() + env.rendezvous_timeout;
  // 1. The attempt: every member adds one; members of one attempt all read a count in the same
  //    block of `size`, whatever their order.
  auto joined = r->store_->add("chorus/joined", 1);
  if (!joined) return joined.error();
  if (*joined < 1)
    return status{errc::rendezvous, "rendezvous in " + r->shown_ + ": 'chorus/joined' counts " +
                                        std::to_string(*joined) + " after an add of 1"};
  const int64_t attempt = (*joined - 1) / size;
  r->prefix_ = "chorus/" + std::to_string(attempt) + "/";
  // 2. Rank 0 draws what nobody set: the secret, the job id; always the nonce.
  if (rank == 0) {
    std::string secret = env.job_secret;
    if (secret.empty()) {
      auto fresh = wire::random_nonce();
      secret.assign(reinterpret_cast<const char*>(fresh.data()), fresh.size());
    }
    uint64_t job_id = env.job_id;
    auto fresh = wire::random_nonce();
    if (job_id == 0) std::memcpy(&job_id, fresh.data(), sizeof job_id);
    if (job_id == 0) job_id = 1;
    // Only a digest of a secret set by the environment travels: the others must hold it too.
    const bool given = !env.job_secret.empty();
    const std::string shared = given ? std::string("given:") + std::to_string(wire::session_id(secret, 0, {}))
                                     : "drawn:" + to_hex(secret.data(), secret.size());
    for (auto [key, value] : {std::pair<std::string, std::string>{"secret", shared},
                              {"job-id", std::to_string(job_id)},
                              {"nonce", to_hex(fresh.data(), fresh.size())}})
      if (auto st = r->store_->set(r->prefix_ + key, value); !st.ok()) return st;
  }
  auto read = [&](const std::string& key) -> result<std::string> {
    auto v = r->store_->get(r->prefix_ + key, left(deadline));
    if (!v && v.error().code() == errc::timeout)
      return status{errc::rendezvous, "rendezvous in " + r->shown_ + ": rank 0 of the group published no '" + key +
                                          "' within " + kv::format_duration(env.rendezvous_timeout)};
    return v;
  };
  auto secret = read("secret");
  if (!secret) return secret.error();
  if (secret->rfind("drawn:", 0) == 0) {
    if (!env.job_secret.empty())
      return status{errc::config, "rendezvous in " + r->shown_ + ": CHORUS_JOB_SECRET is set here but not on rank 0 "
                                      "of the group; set it on every rank or on none"};
    auto raw = from_hex(secret->substr(6));
    if (!raw || raw->empty())
      return status{errc::protocol, "rendezvous in " + r->shown_ + ": the group's secret is not hex"};
    env.job_secret = *raw;
  } else if (secret->rfind("given:", 0) == 0) {
    if (env.job_secret.empty() ||
        secret->substr(6) != std::to_string(wire::session_id(env.job_secret, 0, {})))
      return status{errc::config, "rendezvous in " + r->shown_ +
                                      ": CHORUS_JOB_SECRET differs from rank 0's (or is unset here); every rank of "
                                      "a group needs the same one"};
  } else {
    return status{errc::protocol, "rendezvous in " + r->shown_ + ": unreadable group secret entry"};
  }
  auto id = read("job-id");
  if (!id) return id.error();
  try {
    env.job_id = std::stoull(*id);
  } catch (...) {
    return status{errc::protocol, "rendezvous in " + r->shown_ + ": the group's job id '" + *id + "' is no number"};
  }
  auto nonce_text = read("nonce");
  if (!nonce_text) return nonce_text.error();
  auto raw = from_hex(*nonce_text);
  wire::nonce fresh{};
  if (!raw || raw->size() != fresh.size())
    return status{errc::protocol, "rendezvous in " + r->shown_ + ": the group's nonce is not " +
                                      std::to_string(fresh.size()) + " hex bytes"};
  std::memcpy(fresh.data(), raw->data(), fresh.size());
  r->session_id_ = wire::session_id(env.job_secret, env.job_id, fresh);
  CHORUS_LOG(info, "rendezvous", "joined " << r->shown_ << " rank=" << rank << " size=" << size
                                           << " attempt=" << attempt);
  return r;
}

status store_rendezvous::check_key(const std::string& key) const {
  if (key.empty() || key.size() > max_key_bytes)
    return {errc::invalid_argument, "rendezvous key of " + std::to_string(key.size()) + " bytes: must be 1-" +
                                        std::to_string(max_key_bytes)};
  return {};
}

status store_rendezvous::publish(const std::string& key, const std::string& value) {
  if (auto st = check_key(key); !st.ok()) return st;
  if (value.size() > max_value_bytes)
    return {errc::invalid_argument, "rendezvous publish('" + key + "'): value of " + std::to_string(value.size()) +
                                        " bytes exceeds the limit " + std::to_string(max_value_bytes)};
  return store_->set(prefix_ + key, value);
}

result<std::string> store_rendezvous::get(const std::string& key, std::chrono::milliseconds timeout) {
  if (auto st = check_key(key); !st.ok()) return st;
  auto v = store_->get(prefix_ + key, timeout);
  if (!v && v.error().code() == errc::timeout)
    return status{errc::rendezvous, "rendezvous in " + shown_ + ": no rank published '" + key + "' within " +
                                        kv::format_duration(timeout)};
  return v;
}

result<std::vector<std::string>> store_rendezvous::gather(const std::string& prefix,
                                                          std::chrono::milliseconds timeout) {
  if (auto st = check_key(prefix); !st.ok()) return st;
  const auto deadline = clock::now() + timeout;
  std::vector<std::string> out(static_cast<std::size_t>(size_));
  for (int r = 0; r < size_; ++r) {
    auto v = store_->get(prefix_ + prefix + std::to_string(r), left(deadline));
    if (v) {
      out[static_cast<std::size_t>(r)] = std::move(*v);
      continue;
    }
    if (v.error().code() != errc::timeout) return v.error();
    std::vector<uint32_t> missing;
    for (int q = r; q < size_; ++q) {
      auto there = store_->check(prefix_ + prefix + std::to_string(q));
      if (!there || !*there) missing.push_back(static_cast<uint32_t>(q));
    }
    return status{errc::rendezvous, "rendezvous in " + shown_ + ": " + (missing.size() == 1 ? "rank " : "ranks ") +
                                        format_rank_list(missing) + " of " + std::to_string(size_) +
                                        " never published '" + prefix + "' within " + kv::format_duration(timeout)};
  }
  return out;
}

}  // namespace chorus
