// Building a job's mesh at init (blocking): listen, publish our endpoint at the rendezvous,
// connect to every lower rank and accept every higher one, each connection authenticated by
// the handshake (tcp/handshake_io.hpp). Per peer: S data streams and one more connection for
// the control link (tcp/control_link.hpp). Then the link table (transport/link_table.hpp) and
// the shared-memory lanes for the peers it gives shm (shm/lanes.hpp).
// What comes out are parts with no thread yet: the data streams and lanes go to the mesh
// transport (mesh_transport.hpp), the control connections to a control link, each its own
// object, both owned by the communicator.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "runtime/config/config.hpp"
#include "runtime/env/process_env.hpp"
#include "runtime/rendezvous/rendezvous.hpp"
#include "runtime/transport/host_groups.hpp"
#include "runtime/transport/shm/lanes.hpp"
#include "runtime/transport/tcp/acceptor.hpp"
#include "runtime/transport/tcp/control_link.hpp"
#include "runtime/transport/tcp/socket_util.hpp"
#include "runtime/wire/frame.hpp"

namespace chorus::mesh {

/// A rank's TCP receive scratches are touched at start while together they take at most this.
inline constexpr std::size_t pretouched_scratch_bytes = 64u << 20;

struct mesh_options {
  int num_streams = 8;                      ///< CHORUS_NUM_STREAMS: connections per peer
  /// CHORUS_SOCKET_BUFFER_BYTES: SO_SNDBUF/SO_RCVBUF; 0 keeps the kernel's autotuning, which
  /// measured about twice as fast on loopback as a fixed 1-16 MiB.
  int socket_buffer_bytes = 0;
  std::size_t scratch_bytes = 1 << 20;      ///< receive scratch per TCP connection
  /// CHORUS_SHM_BYTES: the shared-memory ring per stream and direction to a rank on the same
  /// host (transport/shm/ring.hpp); payloads then bypass the kernel's TCP path. 0: TCP only.
  std::size_t shm_bytes = 2u << 20;
  /// CHORUS_SHM_SPIN_US: with incoming rings, the I/O thread polls them this long after its last
  /// work before it sleeps in the socket wait (then a frame costs its sender a doorbell).
  std::chrono::microseconds shm_spin{50};
  uint32_t max_payload = 64u << 20;         ///< frames announcing more are refused
  std::chrono::milliseconds connect_timeout{60000};  ///< CHORUS_CONNECT_TIMEOUT_SECONDS
  /// CHORUS_HOST, else CHORUS_IFACE's address (IPv4, else global IPv6); empty: the address
  /// towards the rendezvous.
  std::string bind_host;
  std::string iface;  ///< CHORUS_IFACE: listen on this interface's address when bind_host is empty
  /// CHORUS_PEER_TIMEOUT_SECONDS: a peer whose runtime sent nothing for this long (no heartbeat
  /// on the control link, no acknowledgement on a socket) is declared lost.
  std::chrono::milliseconds peer_timeout{30000};
  /// The configured values of the variables above (runtime/config); the rest keep their defaults.
  static mesh_options from_config(const transport_config& c);
};

struct mesh_parts {
  int rank = 0;
  int size = 1;
  mesh_options options;
  wire::frame_limits limits;
  std::unique_ptr<tcp::acceptor> acceptor;        ///< stays open: refuses late or foreign connections
  std::vector<std::vector<tcp::unique_fd>> data;  ///< [peer][stream], tuned; empty for our rank
  /// One more authenticated connection to every peer, apart from the data plane, for whoever
  /// carries control messages (the pipeline's negotiators, a process group's point-to-point);
  /// not started (tcp::control_link::start).
  std::shared_ptr<tcp::control_link> control;
  shm::lane_set lanes;                            ///< rings, the link table, host identities
  host_groups hosts;                              ///< ranks grouped by host identity
  std::string endpoint;                           ///< where we listen
};

result<mesh_parts> connect_mesh(const process_env& env, rendezvous& rdv, const mesh_options& opts);

}  // namespace chorus::mesh
