// chorusrun's side of an elastic job (--min-np/--max-np): the launcher serves the rendezvous
// store itself, so no rank is special, and forms the job in numbered rounds there
// (runtime/rendezvous/elastic_round.hpp lists the keys). The membership (elastic_membership.hpp)
// calls form_round when the workers change, and end_job when too few are left.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bindings/cli/chorusrun/elastic_policy.hpp"
#include "bindings/cli/chorusrun/job_env.hpp"
#include "runtime/core/status.hpp"

namespace chorus {
class kv_server;
class kv_client;
}  // namespace chorus

namespace chorus::chorusrun {

/// The store and the round counter. Not thread-safe: the supervisor's loop calls it.
class elastic_coordinator {
 public:
  /// Serves the store on job.store_listener (which chorusrun bound for the rendezvous address;
  /// no rank inherits it in elastic mode) and connects a client of its own to it.
  static result<std::unique_ptr<elastic_coordinator>> start(const job_identity& job);
  ~elastic_coordinator();

  /// A worker the launcher removed, told so in every round until it is gone, with why.
  struct leaving_worker {
    int id = -1;
    std::string why;
  };

  /// Forms the next round (the first call: round 0) of `workers` (ascending by id): each gets its
  /// place from round_places (rank i for workers[i], local rank and size on its host); each of
  /// `leaving` gets "leave <why>". Publishes
  /// the assignments, then latest, then next/<previous> (a worker that sees next/<r> finds latest
  /// at least as new).
  status form_round(const std::vector<worker_at>& workers, const std::vector<leaving_worker>& leaving = {});

  /// Forms a last round in which each of `workers` is told to stop, with `why`.
  status end_job(const std::vector<int>& workers, const std::string& why);

  /// True when some worker asked for a round after the current one (elastic/want/<round>) and
  /// has waited at least `settle` since this launcher first saw it: a death that caused the
  /// request gets reaped first, so the new round does not include the dead worker.
  bool wants_new_round(std::chrono::milliseconds settle);

  /// The current round; -1 before the first.
  int64_t round() const { return round_; }

 private:
  elastic_coordinator() = default;
  status set(const std::string& key, const std::string& value);

  std::unique_ptr<kv_server> server_;
  std::unique_ptr<kv_client> client_;
  int64_t round_ = -1;
  std::optional<std::chrono::steady_clock::time_point> want_seen_;  // for round_
};

}  // namespace chorus::chorusrun
