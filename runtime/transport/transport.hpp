// What the collective engine needs from a data plane. Implemented by mesh::mesh_transport (real
// processes, TCP and shared-memory links per peer) and, for tests and the simulator, by the
// in-process local::local_fabric.
// Threading: send() and cancel() only on the transport's I/O thread (where the sink is called);
// post() and traffic() from anywhere.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <utility>

#include "runtime/transport/frame_sink.hpp"
#include "runtime/wire/frame.hpp"

namespace chorus {

/// Bytes one stream moved so far over all its connections (frame headers included, payloads
/// through shared-memory rings too); monotonic.
struct stream_traffic {
  uint64_t sent = 0;
  uint64_t received = 0;
  uint64_t shm_sent = 0;  ///< of `sent`: payload bytes that went through a shared-memory ring
};

/// The kernel's count of a stream's TCP sending, all peers summed (tcp/tcp_meter.hpp): bytes
/// acknowledged and microseconds busy sending; monotonic; zeros where unknown.
struct stream_meter {
  uint64_t bytes_acked = 0;
  uint64_t busy_us = 0;
};

/// How a data plane's links were used so far (zeros for transports without such links).
struct link_use {
  int shm_streams = 0;          ///< streams to peers with an outgoing shared-memory ring
  uint64_t shm_frames = 0;      ///< data frames sent through the rings
  uint64_t shm_missed = 0;      ///< data frames sent on TCP although a ring existed
  int refused_connections = 0;  ///< connections refused after setup (e.g. a wrong job secret)
};

class transport {
 public:
  virtual ~transport() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual int num_streams() const = 0;
  virtual uint64_t job_id() const = 0;
  /// Starts delivering frames to `sink` on the I/O thread.
  virtual void start(frame_sink* sink) = 0;
  virtual void post(std::function<void()> fn) = 0;
  /// Queues a frame to (peer, stream); `payload` stays referenced until sink->sent(peer, h).
  virtual void send(int peer, int stream, const wire::frame_header& h, const std::byte* payload) = 0;
  /// Drops queued, not yet written frames of `sequence` (sink->sent() for each).
  virtual void cancel(uint64_t sequence) = 0;
  /// I/O thread only: tells every peer the job is broken (`why`), then closes. Peers end
  /// their operations with an error that carries the reason.
  virtual void abort(const status& why) { (void)why; }
  /// Bytes moved on `stream` so far, for metrics; any thread, relaxed reads (a concurrent
  /// frame may or may not be counted yet). Transports that do not count report zeros.
  virtual stream_traffic traffic(int stream) const {
    (void)stream;
    return {};
  }
  /// The same, of `stream`'s connection to `peer` alone (zeros for this rank and for transports
  /// that do not count): per-peer metrics, so that one slow connection shows.
  virtual stream_traffic peer_traffic(int stream, int peer) const {
    (void)stream;
    (void)peer;
    return {};
  }
  /// The kernel's view of `stream`'s sending (stream_meter); any thread.
  virtual stream_meter meter(int stream) const {
    (void)stream;
    return {};
  }
  /// Local and remote TCP port of `stream`'s connection to `peer` ({0, 0}: none), so that a
  /// slow connection in the metrics can be found with ss(8) or tc(8). Any thread.
  virtual std::pair<int, int> connection_ports(int stream, int peer) const {
    (void)stream;
    (void)peer;
    return {0, 0};
  }
  /// link_use above; any thread.
  virtual link_use links() const { return {}; }
  /// Ends the job's connections cleanly; blocks; idempotent.
  virtual void close(std::chrono::milliseconds grace) = 0;
};

}  // namespace chorus
