// The elastic store and its rounds: a kv_server on the launcher's held rendezvous socket, and a
// client of its own that writes each round's keys in the order elastic_round.hpp promises.
#include "bindings/cli/chorusrun/elastic_coordinator.hpp"

#include <charconv>

#include "runtime/core/hex.hpp"
#include "runtime/core/log.hpp"
#include "runtime/rendezvous/elastic_round.hpp"
#include "runtime/rendezvous/kv_client.hpp"
#include "runtime/rendezvous/kv_server.hpp"

namespace chorus::chorusrun {
namespace {

using clock = std::chrono::steady_clock;
constexpr std::chrono::seconds store_call_bound{5};  // loopback calls; a bound, not a wait

// The job's credentials as the ranks derive them (runtime/env/process_env.cpp): the secret's
// bytes from its hex, the id from its hex.
result<kv::credentials> credentials_of(const job_identity& job) {
  kv::credentials c;
  if (job.secret.size() % 2 != 0) return status{errc::config, "the job secret has an odd number of hex digits"};
  for (size_t i = 0; i < job.secret.size(); i += 2) {
    int hi = hex_digit(job.secret[i]), lo = hex_digit(job.secret[i + 1]);
    if (hi < 0 || lo < 0) return status{errc::config, "the job secret is not hex (value not shown)"};
    c.secret.push_back(static_cast<char>(hi * 16 + lo));
  }
  auto [end, ec] = std::from_chars(job.job_id.data(), job.job_id.data() + job.job_id.size(), c.job_id, 16);
  if (ec != std::errc() || end != job.job_id.data() + job.job_id.size())
    return status{errc::config, "the job id '" + job.job_id + "' is not hex"};
  return c;
}

}  // namespace

elastic_coordinator::~elastic_coordinator() {
  client_.reset();
  server_.reset();
}

result<std::unique_ptr<elastic_coordinator>> elastic_coordinator::start(const job_identity& job) {
  if (job.store_listener < 0)
    return status{errc::config, "elastic mode needs the rendezvous port held by chorusrun (CHORUS_RENDEZVOUS and "
                                "--rendezvous cannot be used with --min-np/--max-np)"};
  auto creds = credentials_of(job);
  if (!creds) return creds.error();
  std::unique_ptr<elastic_coordinator> c(new elastic_coordinator());
  c->server_ = std::make_unique<kv_server>(*creds);
  auto port = c->server_->start_on(job.store_listener);
  if (!port) return port.error();
  c->client_ = std::make_unique<kv_client>(c->server_->local_connect_host(), *port, *creds, 0xFFFFFFFEu);
  if (auto st = c->client_->connect(clock::now() + store_call_bound); !st) return st;
  return c;
}

status elastic_coordinator::set(const std::string& key, const std::string& value) {
  auto r = client_->call(kv::request{kv::op::set, key, value, 0, 0}, clock::now() + store_call_bound);
  if (!r) return r.error();
  if (r->code != kv::reply_code::ok) return {errc::rendezvous, "the elastic store refused '" + key + "': " + r->message};
  return {};
}

status elastic_coordinator::form_round(const std::vector<worker_at>& workers,
                                       const std::vector<leaving_worker>& leaving) {
  const int64_t next = round_ + 1;
  const int n = static_cast<int>(workers.size());
  const auto places = round_places(workers);
  for (size_t i = 0; i < workers.size(); ++i) {
    const auto& p = places[i];
    auto st = set(elastic::assign_key(next, workers[i].id),
                  elastic::encode_assignment(elastic::assignment{p.rank, n, p.local_rank, p.local_size}));
    if (!st) return st;
  }
  for (const auto& w : leaving)
    if (auto st = set(elastic::assign_key(next, w.id), elastic::encode_leave(w.why)); !st) return st;
  if (auto st = set(elastic::latest_key(), std::to_string(next)); !st) return st;
  if (round_ >= 0)
    if (auto st = set(elastic::next_key(round_), std::to_string(next)); !st) return st;
  round_ = next;
  want_seen_.reset();
  CHORUS_LOG(info, "chorusrun", "elastic round formed round=" << round_ << " size=" << n
                                                                << " leaving=" << leaving.size());
  return {};
}

status elastic_coordinator::end_job(const std::vector<int>& workers, const std::string& why) {
  const int64_t next = round_ + 1;
  for (int w : workers)
    if (auto st = set(elastic::assign_key(next, w), elastic::encode_stop(why)); !st) return st;
  if (auto st = set(elastic::latest_key(), std::to_string(next)); !st) return st;
  if (round_ >= 0)
    if (auto st = set(elastic::next_key(round_), std::to_string(next)); !st) return st;
  round_ = next;
  want_seen_.reset();
  return {};
}

bool elastic_coordinator::wants_new_round(std::chrono::milliseconds settle) {
  if (round_ < 0) return false;
  if (!want_seen_) {
    auto r = client_->call(kv::request{kv::op::get, elastic::want_key(round_), {}, 0, 0}, clock::now());
    if (!r || r->code != kv::reply_code::ok) return false;
    want_seen_ = clock::now();
  }
  return clock::now() - *want_seen_ >= settle;
}

}  // namespace chorus::chorusrun
