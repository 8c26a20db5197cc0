// The TCP data plane: S connections ("streams") to every other rank, one Asio I/O thread.
// Setup (blocking, at init): listen, publish our endpoint at the rendezvous, connect to every
// lower rank and accept every higher one, each connection authenticated by the handshake; one
// more connection per peer makes the control link (control_link.hpp), for whoever takes it.
// Rings in shared memory are set up for the streams to ranks on the same host (shm/lanes.hpp):
// their data frames skip the socket; the I/O thread polls the rings while there is work and
// for CHORUS_SHM_SPIN_US after, then sleeps until a socket, a timer, a post or a ring's doorbell
// wakes it. Then frames flow: send() queues a frame on (peer, stream); received payloads go to
// the frame_sink. A broken connection ends in peer_failed() for that peer, never a hang.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include <asio.hpp>

#include "runtime/collectives/hier_schedule.hpp"
#include "runtime/config/config.hpp"
#include "runtime/env/process_env.hpp"
#include "runtime/rendezvous/rendezvous.hpp"
#include "runtime/transport/frame_sink.hpp"
#include "runtime/transport/transport.hpp"
#include "runtime/transport/tcp/acceptor.hpp"
#include "runtime/transport/tcp/control_link.hpp"
#include "runtime/transport/tcp/tcp_connection.hpp"
#include "runtime/wire/control_seal.hpp"

namespace chorus::tcp {

struct tcp_options {
  int num_streams = 8;                      ///< CHORUS_NUM_STREAMS: connections per peer
  /// CHORUS_SOCKET_BUFFER_BYTES: SO_SNDBUF/SO_RCVBUF; 0 keeps the kernel's autotuning, which
  /// measured about twice as fast on loopback as a fixed 1-16 MiB.
  int socket_buffer_bytes = 0;
  std::size_t scratch_bytes = 1 << 20;      ///< receive scratch per connection (pre-touched)
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
  static tcp_options from_config(const transport_config& c);
};

class tcp_transport final : public transport {
 public:
  /// Builds the mesh. `rdv` is used during the call only.
  static result<std::unique_ptr<tcp_transport>> connect(const process_env& env, rendezvous& rdv,
                                                        const tcp_options& opts);
  ~tcp_transport();
  tcp_transport(const tcp_transport&) = delete;
  tcp_transport& operator=(const tcp_transport&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int num_streams() const override { return opts_.num_streams; }
  uint64_t job_id() const override { return limits_.job_id; }

  /// Starts the I/O thread; frames go to `sink` from then on.
  void start(frame_sink* sink) override;
  /// Runs `fn` on the I/O thread.
  void post(std::function<void()> fn) override { asio::post(io_, std::move(fn)); }
  bool on_io_thread() const { return std::this_thread::get_id() == thread_.get_id(); }

  // ---- I/O thread only ----
  void send(int peer, int stream, const wire::frame_header& h, const std::byte* payload) override;
  void cancel(uint64_t sequence) override;
  void abort(const status& why) override;

  /// Any thread (the connections' counters are relaxed atomics; the mesh is fixed after connect).
  stream_traffic traffic(int stream) const override;
  stream_traffic peer_traffic(int stream, int peer) const override;
  stream_meter meter(int stream) const override;
  std::pair<int, int> connection_ports(int stream, int peer) const override;

  /// Says goodbye to every peer, waits up to `grace` for theirs, closes, joins the I/O thread.
  /// Call from outside the I/O thread; idempotent.
  void close(std::chrono::milliseconds grace) override;
  void close() { close(std::chrono::seconds(5)); }
  /// The ranks grouped by host identity, as every rank computed them from every rank's
  /// identity at connect (shm/lanes.hpp round 1); fixed after connect, any thread.
  const host_groups& hosts() const { return hosts_; }
  /// Streams to peers whose data frames may go through a shared-memory ring (transport/shm).
  int shm_streams() const { return shm_streams_; }
  /// Data frames sent so far through the rings, and on TCP although a ring existed (too big for
  /// it, or it stayed full); any thread, relaxed.
  struct shm_use {
    uint64_t frames = 0;
    uint64_t missed = 0;
  };
  shm_use shm_counts() const;
  /// Connections the acceptor refused (e.g. a wrong job secret).
  int refused_connections() const { return acceptor_ ? acceptor_->refused() : 0; }
  /// The key that seals this job's control-plane messages (wire/control_seal.hpp), derived
  /// from the same job secret the handshake proves.
  const wire::mac& control_key() const { return control_key_; }
  /// The control link (control_link.hpp), built with the mesh: one more authenticated
  /// connection to every peer. The first call hands it over; later calls return null.
  std::shared_ptr<control_link> take_control_link() { return std::move(control_link_); }

 private:
  friend class tcp_connection;
  tcp_transport(const process_env& env, const tcp_options& opts);
  const wire::frame_limits& limits() const { return limits_; }
  frame_sink* sink() const { return sink_; }
  /// The peer of `c` is lost for `why`; with `tell_peer` (it sent a frame we refuse) it is
  /// told why before its connections close.
  void connection_failed(tcp_connection& c, const status& why, bool tell_peer = false);
  void goodbye_from(tcp_connection& c);
  void finish_close_if_done();
  /// Every peer_timeout / 4 on the I/O thread: a connection with frames waiting whose peer has
  /// taken no byte (TCP or ring) for peer_timeout fails naming the peer. Its heartbeats may
  /// still answer (the control link's own check does not see this): the peer is alive but its
  /// data plane does not read.
  void watch_writes();
  /// The I/O thread's loop: io_.run(), or with incoming rings the poll-and-spin loop above.
  void run_io();

  int rank_;
  int size_;
  tcp_options opts_;
  wire::frame_limits limits_;
  std::vector<std::string> peer_endpoints_;
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  std::thread thread_;
  frame_sink* sink_ = nullptr;
  std::unique_ptr<acceptor> acceptor_;
  wire::mac control_key_{};
  std::shared_ptr<control_link> control_link_;
  std::vector<std::vector<std::unique_ptr<tcp_connection>>> conns_;  // [peer][stream]
  std::vector<bool> peer_down_;
  int shm_streams_ = 0;
  host_groups hosts_;
  bool closing_ = false;
  bool closed_ = false;
  std::unique_ptr<asio::steady_timer> close_timer_;
  std::unique_ptr<asio::steady_timer> write_watch_;
  struct write_mark {
    uint64_t taken = 0;  // bytes the peer had taken when last seen moving
    std::chrono::steady_clock::time_point since{};
  };
  std::vector<std::vector<write_mark>> write_marks_;  // [peer][stream], I/O thread only
};

}  // namespace chorus::tcp
