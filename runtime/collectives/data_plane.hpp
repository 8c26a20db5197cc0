// One job's data plane: the rendezvous it formed through, the transport to every peer (and its
// I/O thread), and the engine that runs chunk ops there; with run, abort and the counters. It
// knows nothing of collectives: chunking, algorithms and the front ends (communicator.hpp) sit
// above it, and the control link goes from connect_mesh to its user beside it.
// Thread-safety: every call may come from any thread; engine() is for the I/O thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>

#include "runtime/collectives/engine.hpp"
#include "runtime/collectives/stream_board.hpp"
#include "runtime/core/status.hpp"
#include "runtime/rendezvous/rendezvous.hpp"
#include "runtime/transport/host_groups.hpp"
#include "runtime/transport/transport.hpp"

namespace chorus {

class data_plane {
 public:
  using callback = std::function<void(const status&)>;

  /// Takes the connected transport; start() starts its I/O thread.
  data_plane(std::unique_ptr<rendezvous> rdv, std::unique_ptr<transport> t, host_groups hosts);
  ~data_plane();
  data_plane(const data_plane&) = delete;
  data_plane& operator=(const data_plane&) = delete;

  void start();

  int rank() const { return t_->rank(); }
  int size() const { return t_->size(); }
  int num_streams() const { return t_->num_streams(); }
  /// The ranks grouped by host identity, as every rank computed them from every rank's
  /// identity at connect (mesh_connect.hpp), identical on every rank.
  const host_groups& hosts() const { return hosts_; }
  /// The job's rendezvous store (rank 0 serves it for the job's lifetime).
  rendezvous& store() { return *rdv_; }
  /// The transport (mesh/mesh_transport.hpp), for posting to its I/O thread.
  transport& wire() { return *t_; }
  /// Runs chunk ops and routes frames to them: I/O thread only.
  engine& runner() { return *engine_; }
  /// Runs `fn` on the I/O thread.
  void post(std::function<void()> fn) { t_->post(std::move(fn)); }

  /// Runs one chunk op. Its sequence number must not collide with another's: the communicator
  /// numbers its own from 1, the pipeline from pipeline_sequence_base, point-to-point transfers
  /// with the top bit (p2p_sequence). `done` runs exactly once, on the I/O thread; `started`,
  /// when given, runs on the I/O thread right after the op started (so that a receiver can tell
  /// its sender to go once frames land in place).
  void run_chunk(std::unique_ptr<chunk_op> op, callback done, std::function<void()> started = {});
  static constexpr uint64_t pipeline_sequence_base = uint64_t{1} << 62;

  /// Bytes moved on `stream` so far (for metrics).
  stream_traffic traffic(int stream) const { return t_->traffic(stream); }
  /// The same, of `stream`'s connection to `peer` (transport::peer_traffic).
  stream_traffic peer_traffic(int stream, int peer) const { return t_->peer_traffic(stream, peer); }
  /// The kernel's count of `stream`'s TCP sending (transport::meter).
  stream_meter meter(int stream) const { return t_->meter(stream); }
  /// A board of this plane's streams for placement by speed (stream_board.hpp), fed on any
  /// thread with each stream's bytes sent and the kernel's acked bytes and busy time. The
  /// communicator's scheduler and the pipeline's senders each keep one; the plane must
  /// outlive it.
  std::shared_ptr<stream_board> speed_board();
  /// Local and remote port of `stream`'s connection to `peer` (transport::connection_ports).
  std::pair<int, int> connection_ports(int stream, int peer) const { return t_->connection_ports(stream, peer); }

  /// Fails what is pending with errc::shutdown, says goodbye to the peers (or, when the job
  /// broke, tells them why), stops the I/O thread. Idempotent.
  void close();
  /// Breaks the data plane because the job is broken (e.g. the control link lost rank k; `why`
  /// names k): every op in flight and every later one ends with `why`, and every peer gets an
  /// abort notice with it, so that their errors name k rather than this rank. No-op when it
  /// already broke (its first cause stands) or after close().
  void abort(const status& why);
  /// Why the data plane broke (ok while healthy).
  status failure() const { return engine_->broken_any_thread(); }

 private:
  std::unique_ptr<rendezvous> rdv_;
  std::unique_ptr<transport> t_;
  host_groups hosts_;
  std::unique_ptr<engine> engine_;
  bool closed_ = false;
};

}  // namespace chorus
