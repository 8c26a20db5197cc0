// The control gate: the one actor of a rank that other processes can send to. The control
// plane publishes it (actors/control_plane.hpp) in place of the negotiator, so that a process
// that reaches the control port without the job secret cannot stop, confuse or kill the job.
//   1. Peers' negotiators send it sealed_control only (actors/protocol.hpp), sealed with a key
//      derived from the job secret (runtime/wire/control_seal.hpp).
//   2. It accepts a message only when the seal matches, the message is addressed to this rank,
//      comes from another rank of the job, and its counter is above the last one accepted from
//      that rank (no replays). It then hands its negotiator gossip_bytes, hello_atom or
//      gone_atom, the same messages an unguarded negotiator would have received.
//   3. It drops everything else and logs why, naming the rank the message claimed to come from
//      (the first 20 refusals, then every 1000th, with the running count), and counts it as an
//      error of kind "auth" (chorus_errors_total{kind="auth"}).
// It is a CAF actor_companion: it has no mailbox of its own and runs each check on the thread
// that delivers the message (CAF's multiplexer for remote ones), so it adds no hop and no
// wake-up. Exit and down messages reach the same check, so, unlike an ordinary actor, a forged
// exit(kill) cannot stop it. Only close() does, when the pipeline shuts down. Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include <caf/actor_companion.hpp>
#include <caf/scoped_execution_unit.hpp>
#include <caf/all.hpp>

#include "actors/protocol.hpp"
#include "runtime/core/status.hpp"
#include "runtime/wire/control_seal.hpp"

namespace chorus {

/// The seal and counter checks (steps 2 and 3 above), without an actor system.
class control_verifier {
 public:
  control_verifier(int rank, int size, const wire::mac& key);
  /// ok, or errc::auth naming the rank `m` claims to come from and what is wrong. An accepted
  /// message moves that rank's counter.
  status check(const sealed_control& m);

 private:
  int rank_;
  int size_;
  wire::sealing_key key_;
  std::vector<uint64_t> last_;  ///< last counter accepted, by sender rank
};

/// Seals messages from `rank` to its peers (step 1), one counter per receiver.
class control_sealer {
 public:
  control_sealer(int rank, int size, const wire::mac& key);
  sealed_control make(int to, control_kind kind, std::vector<uint8_t> data, int origin = -1);

 private:
  int rank_;
  wire::sealing_key key_;
  std::vector<uint64_t> next_;  ///< next counter, by receiver rank
};

class control_gate {
 public:
  /// A gate for `rank` that hands accepted messages to `negotiator`.
  /// `observer` (may be null) hears each refusal as on_error("auth", why): the metric
  /// chorus_errors_total{kind="auth"} and an error event in traces and timelines.
  static std::shared_ptr<control_gate> spawn(caf::actor_system& sys, int rank, int size, const wire::mac& key,
                                             caf::actor negotiator,
                                             std::shared_ptr<telemetry::observer> observer = nullptr);
  ~control_gate();
  control_gate(const control_gate&) = delete;
  control_gate& operator=(const control_gate&) = delete;

  /// The handle to publish and to hand peers.
  const caf::actor& handle() const { return handle_; }
  /// Messages refused so far.
  uint64_t refused() const { return refused_.load(std::memory_order_relaxed); }
  /// Stops the gate; peers that monitor it see `why`. Idempotent.
  void close(caf::exit_reason why = caf::exit_reason::user_shutdown);

 private:
  control_gate(int rank, int size, const wire::mac& key, caf::actor negotiator,
               std::shared_ptr<telemetry::observer> observer);
  void deliver(caf::mailbox_element& e);
  /// Counts a refusal and reports it to the observer; logs `why()` for the first 20, then
  /// every 1000th.
  void refuse(const std::function<status()>& why);

  std::mutex mu_;  ///< guards verifier_ (CAF may deliver from more than one thread)
  control_verifier verifier_;
  caf::actor negotiator_;
  std::shared_ptr<telemetry::observer> observer_;
  caf::actor handle_;
  std::atomic<uint64_t> refused_{0};
  bool closed_ = false;
};

}  // namespace chorus
