// One stream to one peer inside the mesh transport (mesh/mesh_transport.hpp): what carries a
// frame to that peer. Siblings, chosen per peer from one table (link_table.hpp):
//   - tcp::tcp_connection: a socket, frames written in batches;
//   - shm::shm_link: whole frames through rings in shared memory, with a TCP connection beside
//     them for what a ring cannot carry (doorbells, goodbye, abort, frames too big for it) and
//     to learn at once that the peer's process is gone.
// The in-process transport (local/local_transport.hpp) is the third data plane, whole rather
// than per peer: every rank of it lives in one process.
// A link lives on its transport's I/O thread; nothing may be called from another thread,
// except the counters (relaxed atomics, for metrics).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "runtime/core/status.hpp"
#include "runtime/transport/frame_sink.hpp"
#include "runtime/transport/tcp/tcp_meter.hpp"
#include "runtime/wire/frame.hpp"

namespace asio {
class io_context;
}

namespace chorus {

/// What a link needs of the transport that holds it: the I/O context, the job's frame limits,
/// the sink, and where to report that its peer failed or said goodbye.
class link_owner {
 public:
  virtual ~link_owner() = default;
  virtual asio::io_context& io() = 0;
  virtual const wire::frame_limits& limits() const = 0;
  virtual frame_sink* sink() const = 0;
  /// The peer is lost for `why`; with `tell_peer` (it sent a frame we refuse) it is told why
  /// before its links close.
  virtual void link_failed(int peer, const status& why, bool tell_peer = false) = 0;
  /// One of the peer's links received its goodbye.
  virtual void goodbye_from(int peer) = 0;
  /// A link finished writing what closing waits for.
  virtual void finish_close_if_done() = 0;
};

enum class link_kind { tcp, shm };
const char* name_of(link_kind k);

class stream_link {
 public:
  virtual ~stream_link() = default;
  virtual link_kind kind() const = 0;
  virtual int peer() const = 0;
  virtual int stream() const = 0;

  virtual void start_reading() = 0;
  /// Queues a frame; `payload` (h.length bytes) stays referenced until the sink's sent().
  virtual void send(const wire::frame_header& h, const std::byte* payload) = 0;
  /// Whether the I/O loop must poll this link (poll()) because frames arrive without a socket
  /// event; such a link is told before the loop sleeps (set_sleeping) and wakes it by a doorbell.
  virtual bool polled() const { return false; }
  /// Delivers frames that arrived without a socket event; returns how many.
  virtual std::size_t poll() { return 0; }
  virtual void set_sleeping(bool sleeping) { (void)sleeping; }
  /// Drops queued frames of `sequence` not being written yet (sink's sent() for each).
  virtual void cancel(uint64_t sequence) = 0;
  virtual void send_goodbye() = 0;
  /// Sends the reason the job is broken and closes once it is written.
  virtual void send_abort(const std::string& reason) = 0;
  virtual void close() = 0;

  virtual bool open() const = 0;
  virtual bool goodbye_sent() const = 0;
  virtual bool goodbye_received() const = 0;
  virtual std::size_t queued_frames() const = 0;

  // Counters; any thread.
  /// Bytes of frames (headers included) sent / received, whichever way they went.
  virtual uint64_t bytes_sent() const = 0;
  virtual uint64_t bytes_received() const = 0;
  /// Of bytes_sent: payload bytes that went through shared memory.
  virtual uint64_t shm_bytes_sent() const { return 0; }
  /// Data frames sent through shared memory / on TCP although a ring existed.
  virtual uint64_t shm_frames() const { return 0; }
  virtual uint64_t shm_misses() const { return 0; }
  /// The kernel's count of the link's TCP sending (zeros where none).
  virtual tcp::tcp_meter meter() const = 0;
  /// Local and remote port of the link's TCP connection ({0, 0}: none).
  virtual std::pair<int, int> ports() const = 0;
};

}  // namespace chorus
