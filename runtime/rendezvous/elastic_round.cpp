// A worker's side of the elastic rounds (elastic_round.hpp): the launcher's keys, the
// assignment codec, and joining a round through one short-lived store connection.
#include "runtime/rendezvous/elastic_round.hpp"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <sstream>

#include "runtime/env/host_settings.hpp"
#include "runtime/rendezvous/kv_client.hpp"

namespace chorus::elastic {
namespace {

using clock = std::chrono::steady_clock;

std::string where(const process_env& env) {
  return "elastic rendezvous " + format_host_port(env.rendezvous_host, env.rendezvous_port);
}

kv_client make_client(const process_env& env) {
  return kv_client(env.rendezvous_host, env.rendezvous_port,
                   kv::credentials{job_secret_or_default(env), env.job_id},
                   static_cast<uint32_t>(env.elastic_worker));
}

// GET `key`, waiting until `deadline` for it to appear; `bound` is that wait's length as the
// message names it.
result<std::string> get(kv_client& c, const process_env& env, const std::string& key, clock::time_point deadline,
                        const std::string& waiting_for, std::chrono::milliseconds bound) {
  auto r = c.call(kv::request{kv::op::get, key, {}, 0, 0}, deadline);
  if (!r) return r.error();
  if (r->code == kv::reply_code::timeout)
    return status{errc::rendezvous, where(env) + ": worker " + std::to_string(env.elastic_worker) + " waited " +
                                        kv::format_duration(bound) + " for " + waiting_for +
                                        " ('" + key + "')"};
  if (r->code != kv::reply_code::ok || r->values.size() != 1)
    return status{errc::protocol, where(env) + ": unexpected reply to get of '" + key + "': " + r->message};
  return std::move(r->values.front());
}

result<int64_t> parse_round(const process_env& env, const std::string& key, const std::string& text) {
  int64_t k = -1;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), k);
  if (ec != std::errc() || end != text.data() + text.size() || k < 0)
    return status{errc::protocol, where(env) + ": '" + key + "' holds '" + text + "', not a round number"};
  return k;
}

}  // namespace

std::string latest_key() { return "elastic/latest"; }
std::string next_key(int64_t round) { return "elastic/next/" + std::to_string(round); }
std::string assign_key(int64_t round, int worker) {
  return "elastic/assign/" + std::to_string(round) + "/" + std::to_string(worker);
}
std::string want_key(int64_t round) { return "elastic/want/" + std::to_string(round); }

std::string encode_assignment(const assignment& a) {
  return "rank " + std::to_string(a.rank) + " size " + std::to_string(a.size) + " local_rank " +
         std::to_string(a.local_rank) + " local_size " + std::to_string(a.local_size);
}

std::string encode_stop(const std::string& why) { return "stop " + why; }
std::string encode_leave(const std::string& why) { return "leave " + why; }

result<assignment> decode_assignment(std::string_view text, int worker, int64_t round) {
  const std::string who = "worker " + std::to_string(worker) + " in round " + std::to_string(round);
  if (text.substr(0, 5) == "stop ") return status{errc::rendezvous, std::string(text.substr(5))};
  if (text.substr(0, 6) == "leave ")
    return status{errc::rendezvous, "worker " + std::to_string(worker) + " " + removed_phrase + " in round " +
                                        std::to_string(round) + ": " + std::string(text.substr(6))};
  std::istringstream in{std::string(text)};
  std::string w1, w2, w3, w4;
  assignment a;
  if (!(in >> w1 >> a.rank >> w2 >> a.size >> w3 >> a.local_rank >> w4 >> a.local_size) || w1 != "rank" ||
      w2 != "size" || w3 != "local_rank" || w4 != "local_size" || a.size < 1 || a.rank < 0 || a.rank >= a.size ||
      a.local_size < 1 || a.local_rank < 0 || a.local_rank >= a.local_size)
    return status{errc::protocol, "elastic assignment of " + who + " is malformed: '" + std::string(text) + "'"};
  return a;
}

result<process_env> join_round(const process_env& env, int64_t left_round) {
  if (env.elastic_worker < 0)
    return status{errc::config, "elastic join: this process has no CHORUS_ELASTIC_WORKER (not started by "
                                "chorusrun --min-np)"};
  auto deadline = clock::now() + env.rendezvous_timeout;
  auto client = make_client(env);
  if (auto st = client.connect(deadline); !st) return st;
  int64_t at_least = 0;
  // 1-2. Ask for a round after the one left, and wait until the launcher formed one. Below
  // --min-np it may wait up to its --elastic-timeout for slots first.
  if (left_round >= 0) {
    auto set = client.call(kv::request{kv::op::set, want_key(left_round), std::to_string(env.elastic_worker), 0, 0},
                           deadline);
    if (!set) return set.error();
    auto next = get(client, env, next_key(left_round), deadline + env.elastic_timeout,
                    "the launcher to form the round after round " + std::to_string(left_round),
                    env.rendezvous_timeout + env.elastic_timeout);
    if (!next) return next.error();
    deadline = clock::now() + env.rendezvous_timeout;
    auto after = parse_round(env, next_key(left_round), *next);
    if (!after) return after.error();
    at_least = *after;
  }
  // 3. The newest round.
  auto latest_text = get(client, env, latest_key(), deadline, "the launcher's first round", env.rendezvous_timeout);
  if (!latest_text) return latest_text.error();
  auto round = parse_round(env, latest_key(), *latest_text);
  if (!round) return round.error();
  if (*round < at_least)
    return status{errc::protocol, where(env) + ": latest round " + std::to_string(*round) + " is older than round " +
                                      std::to_string(at_least) + " that followed round " + std::to_string(left_round)};
  // 4. This worker's place in it.
  auto text = get(client, env, assign_key(*round, env.elastic_worker), deadline,
                  "its assignment in round " + std::to_string(*round), env.rendezvous_timeout);
  if (!text) return text.error();
  auto a = decode_assignment(*text, env.elastic_worker, *round);
  if (!a) return a.error();
  process_env out = env;
  out.rank = a->rank;
  out.size = a->size;
  out.local_rank = a->local_rank;
  out.local_size = a->local_size;
  out.elastic_round = *round;
  return out;
}

bool removed(const status& st) {
  return st.code() == errc::rendezvous && st.message().find(removed_phrase) != std::string::npos;
}

bool superseded(const status& st) {
  return st.code() == errc::rendezvous && st.message().find(superseded_phrase) != std::string::npos;
}

result<int64_t> latest_round(const process_env& env) {
  // The launcher sets the key before it starts any worker: the wait is only a bound.
  const auto deadline = clock::now() + std::min<std::chrono::milliseconds>(env.rendezvous_timeout,
                                                                           std::chrono::seconds(5));
  auto client = make_client(env);
  auto r = client.call(kv::request{kv::op::get, latest_key(), {}, 0, 0}, deadline);
  if (!r) return r.error();
  if (r->code != kv::reply_code::ok || r->values.size() != 1) return int64_t{-1};
  return parse_round(env, latest_key(), r->values.front());
}

}  // namespace chorus::elastic
