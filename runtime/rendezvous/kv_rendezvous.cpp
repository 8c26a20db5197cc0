// The job's own rendezvous: starts rank 0's store, connects every rank, and turns the store's
// replies into statuses that name the address, the key and the ranks that never arrived.
#include "runtime/rendezvous/kv_rendezvous.hpp"

#include <algorithm>
#include <charconv>
#include <map>
#include <mutex>
#include <thread>

#include <asio.hpp>

#include "runtime/core/log.hpp"
#include "runtime/env/host_settings.hpp"
#include "runtime/rendezvous/elastic_round.hpp"
#include "runtime/rendezvous/inherited_listener.hpp"
#include "runtime/rendezvous/kv_client.hpp"
#include "runtime/rendezvous/kv_protocol.hpp"
#include "runtime/rendezvous/kv_server.hpp"
#include "runtime/wire/handshake.hpp"

namespace chorus {
namespace {

using clock = std::chrono::steady_clock;

bool is_loopback(const std::string& host) {
  if (host == "localhost") return true;
  asio::error_code ec;
  auto addr = asio::ip::make_address(host, ec);
  return !ec && addr.is_loopback();
}

status check_key(const char* what, const std::string& key) {
  if (key.empty() || key.size() > kv::max_key_bytes) {
    return {errc::invalid_argument, std::string("rendezvous ") + what + " of " +
                                        std::to_string(key.size()) + " bytes: must be 1-" +
                                        std::to_string(kv::max_key_bytes)};
  }
  return {};
}

status unexpected(const std::string& address, const kv::reply& r, const std::string& doing) {
  if (r.code == kv::reply_code::bad_request) {
    return {errc::rendezvous,
            "rendezvous " + address + ": the store refused " + doing + ": " + r.message};
  }
  return {errc::protocol, "rendezvous " + address + ": unexpected reply to " + doing + " (code " +
                              std::to_string(static_cast<int>(r.code)) + ", " +
                              std::to_string(r.values.size()) + " values)"};
}

// An elastic round's waits (kv_rendezvous.hpp: elastic) go in slices; between them the launcher's
// newest round is read, and a round that was superseded (a worker left or asked for a new round
// while this one gathered) ends the wait at once, naming both rounds.
result<kv::reply> sliced_call(kv_client& c, kv::request r, clock::time_point deadline, int64_t round,
                              const std::string& shown) {
  for (;;) {
    auto slice_end = std::min(deadline, clock::now() + std::chrono::milliseconds(250));
    auto reply = c.call(r, slice_end);
    if (!reply || reply->code != kv::reply_code::timeout || clock::now() >= deadline) return reply;
    auto latest = c.call(kv::request{kv::op::get, elastic::latest_key(), {}, 0, 0}, clock::now());
    if (!latest) return latest.error();
    if (latest->code == kv::reply_code::ok && latest->values.size() == 1) {
      int64_t k = -1;
      const auto& text = latest->values.front();
      std::from_chars(text.data(), text.data() + text.size(), k);
      if (k > round)
        return status{errc::rendezvous, "rendezvous " + shown + ": round " + std::to_string(round) + " " +
                                            elastic::superseded_phrase + " " + std::to_string(k) +
                                            " while it gathered ('" + r.key + "')"};
    }
  }
}

}  // namespace

kv_rendezvous::kv_rendezvous(process_env env, std::string address, std::unique_ptr<kv_server> server,
                             std::unique_ptr<kv_client> client)
    : env_(std::move(env)),
      address_(std::move(address)),
      server_(std::move(server)),
      client_(std::move(client)) {}

kv_rendezvous::~kv_rendezvous() {
  client_.reset();
  server_.reset();
}

result<std::unique_ptr<rendezvous>> rendezvous::open(const process_env& env) {
  auto r = kv_rendezvous::open(env);
  if (!r) return r.error();
  return std::unique_ptr<rendezvous>(std::move(*r));
}

result<std::unique_ptr<kv_rendezvous>> kv_rendezvous::open(const process_env& env) {
  std::string shown = format_host_port(env.rendezvous_host, env.rendezvous_port);
  if (env.size < 1 || env.rank < 0 || env.rank >= env.size) {
    return status{errc::config, "rendezvous " + shown + ": rank " + std::to_string(env.rank) +
                                    " is not in a job of size " + std::to_string(env.size)};
  }
  if (env.rendezvous_port == 0 && env.size > 1) {
    return status{errc::config, "rendezvous " + shown +
                                    ": port 0 (pick any) only works for a single rank, "
                                    "but the job has " +
                                    std::to_string(env.size) + "; set CHORUS_RENDEZVOUS=host:port"};
  }
  auto deadline = clock::now() + env.rendezvous_timeout;

  // 1. Rank 0 serves the store; it listens on every interface unless told a loopback address.
  //    Only clients that prove the job secret reach it (kv_auth.hpp).
  if (auto st = require_secret_across_hosts(env); !st.ok()) return st;
  const kv::credentials creds{job_secret_or_default(env), env.job_id};
  std::unique_ptr<kv_server> server;
  std::string connect_host = env.rendezvous_host;
  uint16_t port = env.rendezvous_port;
  // In an elastic job the launcher serves the store for every round; round k's keys live
  // under "round/<k>/" (elastic_round.hpp) and nobody but the launcher serves.
  const bool elastic = env.elastic_round >= 0;
  if (env.rank == 0 && !elastic) {
    server = std::make_unique<kv_server>(creds);
    // The launcher may hand over the port already bound (CHORUS_RENDEZVOUS_FD): then nobody
    // could take it since the launcher chose it. A descriptor that is not that socket (a
    // wrapper process closed it, the variable leaked to another process) is named in a warning
    // and the port is bound here, as without one.
    result<uint16_t> bound = status{errc::internal, "not started"};
    bool served = false;
    if (env.rendezvous_fd >= 0) {
      if (auto st = check_inherited_listener(env.rendezvous_fd, port); !st.ok()) {
        CHORUS_LOG(warn, "rendezvous", st.message() << "; binding " << shown << " instead");
      } else {
        bound = server->start_on(env.rendezvous_fd);
        served = true;
      }
    }
    if (!served) bound = server->start(is_loopback(env.rendezvous_host) ? env.rendezvous_host : "", port);
    if (!bound) {
      return status{errc::rendezvous, "rendezvous " + shown + ": rank 0 cannot serve the store: " +
                                          bound.error().message() +
                                          "; set CHORUS_RENDEZVOUS to a free port"};
    }
    port = *bound;
    connect_host = server->local_connect_host();
  }
  std::string address = format_host_port(env.rendezvous_host, port);

  // 2. Every rank connects, retrying until the deadline: rank 0 may start last. After
  //    shutdown() and init() again the address is the same, and rank 0's store of the last round
  //    may still be up while it shuts down: rank 0 marks its store with this process' round
  //    ("epoch"), and a rank that reached the store of another round reconnects until its own.
  //    Rounds are counted per rank and store address (tests run several ranks in one process).
  //    Only a round that connected counts: an init() that failed here (a wrong secret, a
  //    timeout) and is tried again keeps its number.
  static std::mutex rounds_mu;
  static std::map<std::string, uint64_t> rounds;
  const std::string round_key = shown + "#" + std::to_string(env.rank);
  uint64_t round = 0;
  {
    std::lock_guard lk(rounds_mu);
    round = rounds[round_key] + 1;
  }
  const std::string epoch = std::to_string(round);
  std::unique_ptr<kv_client> client;
  std::string seen;
  const std::string prefix = elastic ? "round/" + std::to_string(env.elastic_round) + "/" : "";
  if (elastic) {
    client = std::make_unique<kv_client>(connect_host, port, creds, static_cast<uint32_t>(env.rank));
    if (auto st = client->connect(deadline); !st) return st;
  }
  for (; !elastic;) {
    client = std::make_unique<kv_client>(connect_host, port, creds, static_cast<uint32_t>(env.rank));
    if (auto st = client->connect(deadline); !st) return st;
    if (env.rank == 0) {
      auto set = client->call(kv::request{kv::op::set, "epoch", epoch, 0, 0}, deadline);
      if (!set) return set.error();
    }
    auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now());
    auto got = client->call(kv::request{kv::op::get, "epoch", {}, 0, static_cast<uint32_t>(std::max<int64_t>(0, std::min<int64_t>(wait.count(), 1000)))},
                            deadline);
    if (got && got->code == kv::reply_code::ok && got->values.size() == 1) {
      seen = got->values.front();
      if (seen == epoch) break;
    }
    if (clock::now() >= deadline)
      return status{errc::rendezvous,
                    "rendezvous " + shown + ": the store there is of another round of this job (init() number " +
                        (seen.empty() ? std::string("unknown") : seen) + "; this is number " + epoch +
                        " in rank " + std::to_string(env.rank) +
                        "): every rank must call init() and shutdown() the same number of times"};
    client.reset();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // 3. This attempt's session id, from a nonce rank 0 draws for this round of its store.
  if (env.rank == 0) {
    auto fresh = wire::random_nonce();
    auto set = client->call(kv::request{kv::op::set, prefix + "session-nonce", to_hex(fresh.data(), fresh.size()), 0, 0},
                            deadline);
    if (!set) return set.error();
  }
  auto nonce_reply = elastic ? sliced_call(*client, kv::request{kv::op::get, prefix + "session-nonce", {}, 0, 0},
                                           deadline, env.elastic_round, shown)
                             : client->call(kv::request{kv::op::get, prefix + "session-nonce", {}, 0, 0}, deadline);
  if (!nonce_reply) return nonce_reply.error();
  wire::nonce fresh{};
  if (nonce_reply->code != kv::reply_code::ok || nonce_reply->values.size() != 1 ||
      nonce_reply->values.front().size() != 2 * fresh.size())
    return status{errc::rendezvous, "rendezvous " + shown + ": rank 0 published no session nonce in time"};
  auto raw = from_hex(nonce_reply->values.front());
  if (!raw) return status{errc::protocol, "rendezvous " + shown + ": the session nonce is not hex"};
  std::copy(raw->begin(), raw->end(), fresh.begin());
  {
    std::lock_guard lk(rounds_mu);
    rounds[round_key] = std::max(rounds[round_key], round);
  }
  CHORUS_LOG(info, "rendezvous",
             "connected rank=" << env.rank << " size=" << env.size << " store=" << address
                               << (server ? " serving=yes" : ""));
  std::unique_ptr<kv_rendezvous> out(new kv_rendezvous(env, address, std::move(server), std::move(client)));
  out->prefix_ = prefix;
  out->session_id_ = wire::session_id(creds.secret, env.job_id, fresh);
  return out;
}

status kv_rendezvous::publish(const std::string& key, const std::string& value) {
  if (auto st = check_key("key", key); !st) return st;
  if (value.size() > kv::max_value_bytes) {
    return {errc::invalid_argument, "rendezvous publish('" + key + "'): value of " +
                                        std::to_string(value.size()) + " bytes exceeds the limit " +
                                        std::to_string(kv::max_value_bytes)};
  }
  std::lock_guard<std::mutex> lock(mu_);
  kv::request r{kv::op::set, prefix_ + key, value, 0, 0};
  auto reply = client_->call(std::move(r), clock::now() + env_.rendezvous_timeout);
  if (!reply) return reply.error();
  if (reply->code != kv::reply_code::ok)
    return unexpected(address_, *reply, "publish of '" + key + "'");
  return {};
}

result<std::string> kv_rendezvous::get(const std::string& key, std::chrono::milliseconds timeout) {
  if (auto st = check_key("key", key); !st) return st;
  std::lock_guard<std::mutex> lock(mu_);
  kv::request r{kv::op::get, prefix_ + key, {}, 0, 0};
  auto reply = client_->call(std::move(r), clock::now() + timeout);
  if (!reply) return reply.error();
  if (reply->code == kv::reply_code::timeout) {
    return status{errc::rendezvous, "rendezvous " + address_ + ": no rank published '" + key +
                                        "' within " + kv::format_duration(timeout)};
  }
  if (reply->code != kv::reply_code::ok || reply->values.size() != 1) {
    return unexpected(address_, *reply, "get of '" + key + "'");
  }
  return std::move(reply->values.front());
}

result<std::vector<std::string>> kv_rendezvous::gather(const std::string& prefix,
                                                       std::chrono::milliseconds timeout) {
  if (auto st = check_key("prefix", prefix); !st) return st;
  std::lock_guard<std::mutex> lock(mu_);
  kv::request r{kv::op::gather, prefix_ + prefix, {}, static_cast<uint32_t>(env_.size), 0};
  auto reply = env_.elastic_round >= 0 ? sliced_call(*client_, std::move(r), clock::now() + timeout, env_.elastic_round,
                                                     address_)
                                       : client_->call(std::move(r), clock::now() + timeout);
  if (!reply) return reply.error();
  if (reply->code == kv::reply_code::timeout && !reply->missing.empty()) {
    const auto& missing = reply->missing;
    return status{errc::rendezvous,
                  "rendezvous " + address_ + ": " + (missing.size() == 1 ? "rank " : "ranks ") +
                      format_rank_list(missing) + " of " + std::to_string(env_.size) +
                      " never published '" + prefix + "' within " + kv::format_duration(timeout)};
  }
  if (reply->code != kv::reply_code::ok || reply->values.size() != static_cast<size_t>(env_.size)) {
    return unexpected(address_, *reply, "gather of '" + prefix + "'");
  }
  return std::move(reply->values);
}

}  // namespace chorus
