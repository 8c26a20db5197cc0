// Mesh setup, the I/O thread, failure propagation and the goodbye exchange at close.
#include "runtime/transport/tcp/tcp_transport.hpp"

#include <algorithm>
#include <future>

#include "runtime/core/log.hpp"
#include "runtime/env/host_settings.hpp"
#include "runtime/transport/tcp/iface.hpp"
#include "runtime/transport/shm/lanes.hpp"

namespace chorus::tcp {

tcp_options tcp_options::from_config(const transport_config& c) {
  tcp_options o;
  o.num_streams = c.num_streams;
  o.socket_buffer_bytes = c.socket_buffer_bytes;
  o.connect_timeout = c.connect_timeout;
  o.shm_bytes = c.shm_bytes;
  o.shm_spin = c.shm_spin;
  o.bind_host = c.host;
  o.iface = c.iface;
  o.peer_timeout = c.peer_timeout;
  return o;
}

tcp_transport::tcp_transport(const process_env& env, const tcp_options& opts)
    : rank_(env.rank), size_(env.size), opts_(opts), work_(asio::make_work_guard(io_)) {
  limits_.job_id = env.session_id ? env.session_id : env.job_id;
  limits_.max_payload = opts.max_payload;
  conns_.resize(size_);
  peer_down_.assign(size_, false);
}

result<std::unique_ptr<tcp_transport>> tcp_transport::connect(const process_env& env, rendezvous& rdv,
                                                              const tcp_options& opts) {
  std::unique_ptr<tcp_transport> t(new tcp_transport(env, opts));
  auto deadline = clock::now() + opts.connect_timeout;
  // Streams 0..S-1 carry data; one more connection per peer is the control link.
  const int control_stream = opts.num_streams;
  const uint64_t id = env.session_id ? env.session_id : env.job_id;  // this attempt of the job
  handshake_config cfg{id, env.job_secret, env.rank, env.size, opts.num_streams + 1};
  if (auto st = require_secret_across_hosts(env); !st.ok()) return st;
  if (cfg.secret.empty()) {
    if (env.size > 1)
      CHORUS_LOG(warn, "tcp", "CHORUS_JOB_SECRET is not set: connections use a well-known default secret; "
                              "set it (chorusrun does) to keep other jobs out");
    cfg.secret = job_secret_or_default(env);
  }
  t->control_key_ = wire::control_key(cfg.secret, id);

  // 1. Listen and start accepting before anyone can learn our endpoint.
  std::string host = opts.bind_host;
  if (host.empty() && !opts.iface.empty()) {  // CHORUS_IFACE: that interface's address
    auto addr = interface_address(opts.iface);
    if (!addr) return addr.error();
    host = *addr;
  }
  if (host.empty()) host = local_address_towards(env.rendezvous_host);
  uint16_t port = 0;
  auto listener = listen_on(host, 0, &port);
  if (!listener) return listener.error();
  t->acceptor_ = std::make_unique<acceptor>(std::move(*listener), cfg);

  // 2. Publish our endpoint and learn everybody's.
  std::string me = endpoint{host, port}.to_string();
  auto st = rdv.publish("data/" + std::to_string(env.rank), me);
  if (!st.ok()) return st;
  auto eps = rdv.gather("data/", opts.connect_timeout);
  if (!eps) return eps.error();
  t->peer_endpoints_ = *eps;

  // 3. Connect to every lower rank; the acceptor takes connections from every higher one.
  std::vector<std::vector<unique_fd>> fds(env.size);
  for (int p = 0; p < env.rank; ++p) {
    auto ep = parse_endpoint(t->peer_endpoints_[p]);
    if (!ep) return ep.error();
    for (int s = 0; s <= control_stream; ++s) {
      auto fd = connect_to(*ep, deadline);
      if (!fd)
        return status{fd.error().code(), "rank " + std::to_string(env.rank) + " to rank " + std::to_string(p) +
                                             ": " + fd.error().message()};
      st = client_handshake(fd->get(), cfg, s, p, deadline);
      if (!st.ok())
        return status{st.code(), "handshake with rank " + std::to_string(p) + " at " + ep->to_string() + ": " +
                                     st.message()};
      fds[p].push_back(std::move(*fd));
    }
  }
  auto inbound = t->acceptor_->wait_inbound(deadline);
  if (!inbound) return inbound.error();
  for (int p = env.rank + 1; p < env.size; ++p) fds[p] = std::move((*inbound)[p]);

  // 4. The control connections to the control link, every other socket to Asio.
  std::vector<unique_fd> control(static_cast<std::size_t>(env.size));
  for (int p = 0; p < env.size; ++p) {
    if (fds[p].empty()) continue;
    tune_socket(fds[p][control_stream].get(), 0);
    set_liveness(fds[p][control_stream].get(), opts.peer_timeout);
    control[p] = std::move(fds[p][control_stream]);
    fds[p].pop_back();
  }
  t->control_link_ = std::make_shared<control_link>(env.rank, std::move(control), t->limits_, opts.peer_timeout);

  // 5. Shared-memory rings to the ranks on this host, then the data connections to Asio.
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now());
  std::vector<std::string> identities;
  auto lanes = shm::open_lanes(env, rdv, opts.num_streams, opts.shm_bytes,
                               std::max(left, std::chrono::milliseconds(1000)), t->limits_, &identities);
  if (!lanes) return lanes.error();
  t->hosts_ = group_by_host(identities);
  for (int p = 0; p < env.size; ++p) {
    for (int s = 0; s < static_cast<int>(fds[p].size()); ++s) {
      tune_socket(fds[p][s].get(), opts.socket_buffer_bytes);
      set_liveness(fds[p][s].get(), opts.peer_timeout);
      auto& lane = (*lanes)[p][s];
      if (lane.out) ++t->shm_streams_;
      t->conns_[p].push_back(std::make_unique<tcp_connection>(*t, fds[p][s].release(), p, s, opts.scratch_bytes,
                                                              std::move(lane.out), std::move(lane.in)));
    }
  }
  CHORUS_LOG(info, "tcp", "mesh ready endpoint=" << me << " peers=" << env.size - 1
                                                 << " streams=" << opts.num_streams
                                                 << " shm_streams=" << t->shm_streams_
                                                 << " hosts=" << t->hosts_.describe());
  return t;
}

tcp_transport::~tcp_transport() { close(std::chrono::seconds(5)); }

void tcp_transport::start(frame_sink* sink) {
  sink_ = sink;
  thread_ = std::thread([this] {
    for (auto& per_peer : conns_)
      for (auto& c : per_peer) c->start_reading();
    if (opts_.peer_timeout.count() > 0) {
      write_marks_.resize(conns_.size());
      for (std::size_t p = 0; p < conns_.size(); ++p) write_marks_[p].resize(conns_[p].size());
      write_watch_ = std::make_unique<asio::steady_timer>(io_);
      watch_writes();
    }
    run_io();
  });
}

void tcp_transport::run_io() {
  std::vector<tcp_connection*> rings;
  for (auto& per_peer : conns_)
    for (auto& c : per_peer)
      if (c->has_ring_in()) rings.push_back(c.get());
  if (rings.empty()) {
    io_.run();
    return;
  }
  auto poll_rings = [&] {
    std::size_t n = 0;
    for (auto* c : rings) n += c->poll_ring();
    return n;
  };
  using clock = std::chrono::steady_clock;
  auto last_work = clock::now();
  while (!io_.stopped()) {
    if (io_.poll() + poll_rings() > 0) {
      last_work = clock::now();
      continue;
    }
    if (clock::now() - last_work < opts_.shm_spin) continue;
    // Sleep (ring.hpp step 3): flag every ring, look once more, then wait for the next event;
    // a sender that publishes meanwhile sees a flag and rings the doorbell on TCP.
    for (auto* c : rings) c->ring_sleeping(true);
    if (poll_rings() == 0) io_.run_one();
    for (auto* c : rings) c->ring_sleeping(false);
    last_work = clock::now();
  }
}

void tcp_transport::watch_writes() {
  if (closing_ || closed_) return;
  const auto now = std::chrono::steady_clock::now();
  for (std::size_t p = 0; p < conns_.size(); ++p) {
    for (std::size_t s = 0; s < conns_[p].size(); ++s) {
      auto& c = conns_[p][s];
      if (!c || !c->open()) continue;
      auto& m = write_marks_[p][s];
      const uint64_t taken = c->bytes_sent() + c->shm_bytes_sent();
      if (c->queued_frames() == 0 || taken != m.taken || m.since == std::chrono::steady_clock::time_point{}) {
        m = {taken, now};
        continue;
      }
      if (now - m.since < opts_.peer_timeout) continue;
      auto secs = std::chrono::duration_cast<std::chrono::seconds>(now - m.since).count();
      connection_failed(*c, status{errc::connection_lost,
                                   "rank " + std::to_string(c->peer()) + " has taken no data on stream " +
                                       std::to_string(c->stream()) + " for " + std::to_string(secs) + " s while " +
                                       std::to_string(c->queued_frames()) +
                                       " frames wait for it: its data plane does not read (alive, "
                                       "but stuck); CHORUS_PEER_TIMEOUT_SECONDS=" +
                                       std::to_string(opts_.peer_timeout.count() / 1000) + " sets this bound"});
      break;  // the peer's connections are closed now
    }
  }
  write_watch_->expires_after(std::max<std::chrono::milliseconds>(opts_.peer_timeout / 4, std::chrono::milliseconds(10)));
  write_watch_->async_wait([this](const asio::error_code& ec) {
    if (!ec) watch_writes();
  });
}

void tcp_transport::send(int peer, int stream, const wire::frame_header& h, const std::byte* payload) {
  auto& c = conns_[peer][stream];
  c->send(h, payload);
}

void tcp_transport::abort(const status& why) {
  for (auto& per_peer : conns_)
    for (auto& c : per_peer)
      if (c->open()) c->send_abort(why.to_string());
}

void tcp_transport::cancel(uint64_t sequence) {
  for (auto& per_peer : conns_)
    for (auto& c : per_peer) c->cancel(sequence);
}

stream_traffic tcp_transport::traffic(int stream) const {
  stream_traffic t;
  for (auto& per_peer : conns_)
    if (stream >= 0 && stream < static_cast<int>(per_peer.size())) {
      t.sent += per_peer[stream]->bytes_sent();
      t.received += per_peer[stream]->bytes_received();
      t.shm_sent += per_peer[stream]->shm_bytes_sent();
    }
  return t;
}

stream_traffic tcp_transport::peer_traffic(int stream, int peer) const {
  stream_traffic t;
  if (peer < 0 || peer >= static_cast<int>(conns_.size())) return t;
  const auto& per_peer = conns_[static_cast<std::size_t>(peer)];
  if (stream < 0 || stream >= static_cast<int>(per_peer.size())) return t;
  const auto& c = per_peer[static_cast<std::size_t>(stream)];
  t.sent = c->bytes_sent();
  t.received = c->bytes_received();
  t.shm_sent = c->shm_bytes_sent();
  return t;
}

stream_meter tcp_transport::meter(int stream) const {
  stream_meter m;
  for (auto& per_peer : conns_)
    if (stream >= 0 && stream < static_cast<int>(per_peer.size())) {
      auto k = per_peer[static_cast<std::size_t>(stream)]->meter();
      m.bytes_acked += k.bytes_acked;
      m.busy_us += k.busy_us;
    }
  return m;
}

std::pair<int, int> tcp_transport::connection_ports(int stream, int peer) const {
  if (peer < 0 || peer >= static_cast<int>(conns_.size())) return {0, 0};
  const auto& per_peer = conns_[static_cast<std::size_t>(peer)];
  if (stream < 0 || stream >= static_cast<int>(per_peer.size())) return {0, 0};
  return per_peer[static_cast<std::size_t>(stream)]->ports();
}

void tcp_transport::connection_failed(tcp_connection& c, const status& why, bool tell_peer) {
  int p = c.peer();
  // Fail the ops first: closing releases queued frames (sent()), and an op whose last frames
  // were queued to the dead peer must not look finished.
  if (!peer_down_[p]) {
    peer_down_[p] = true;
    if (!closing_) {
      CHORUS_LOG(error, "tcp", why.message());
      sink_->peer_failed(p, why);
    }
  }
  for (auto& other : conns_[p]) {
    // A refused frame: the peer gets the reason as an abort notice (its error then says what
    // was wrong with what it sent, not just that we hung up); the connection closes once that
    // is written.
    if (tell_peer && other->open()) other->send_abort(why.to_string());
    else other->close();
  }
  finish_close_if_done();
}

void tcp_transport::goodbye_from(tcp_connection& c) {
  int p = c.peer();
  for (auto& s : conns_[p])
    if (!s->goodbye_received()) return;
  if (!closing_ && !peer_down_[p]) {
    peer_down_[p] = true;
    sink_->peer_failed(p, status{errc::shutdown, "rank " + std::to_string(p) + " shut down"});
  }
  finish_close_if_done();
}

void tcp_transport::finish_close_if_done() {
  if (!closing_ || closed_) return;
  for (auto& per_peer : conns_)
    for (auto& c : per_peer)
      if (c->open() && !(c->goodbye_sent() && c->queued_frames() == 0 && c->goodbye_received())) return;
  closed_ = true;
  for (auto& per_peer : conns_)
    for (auto& c : per_peer) c->close();
  if (close_timer_) close_timer_->cancel();
  if (write_watch_) write_watch_->cancel();
  work_.reset();
  io_.stop();
}

void tcp_transport::close(std::chrono::milliseconds grace) {
  if (!thread_.joinable()) {
    for (auto& per_peer : conns_)
      for (auto& c : per_peer) c->close();
    acceptor_.reset();
    return;
  }
  post([this, grace] {
    closing_ = true;
    close_timer_ = std::make_unique<asio::steady_timer>(io_, grace);
    close_timer_->async_wait([this](const asio::error_code& ec) {
      if (ec || closed_) return;
      std::string waiting;
      for (auto& per_peer : conns_)
        for (auto& c : per_peer)
          if (c->open() && !(c->goodbye_sent() && c->queued_frames() == 0 && c->goodbye_received()))
            waiting += " rank " + std::to_string(c->peer()) + " stream " + std::to_string(c->stream()) +
                       (c->goodbye_sent() ? "" : " (goodbye not sent)") +
                       (c->queued_frames() ? " (" + std::to_string(c->queued_frames()) + " frames queued)" : "") +
                       (c->goodbye_received() ? "" : " (no goodbye from it)") + ";";
      CHORUS_LOG(warn, "tcp", "goodbye exchange did not finish in time; closing anyway; waiting for" << waiting);
      for (auto& per_peer : conns_)
        for (auto& c : per_peer) c->close();
      finish_close_if_done();
    });
    for (auto& per_peer : conns_)
      for (auto& c : per_peer)
        if (c->open()) c->send_goodbye();
    finish_close_if_done();
  });
  thread_.join();
  acceptor_.reset();
  if (shm_streams_ == 0) return;
  auto use = shm_counts();
  CHORUS_LOG(info, "tcp", "data frames through shared memory: " << use.frames
                              << ", on TCP although a ring existed: " << use.missed);
}

tcp_transport::shm_use tcp_transport::shm_counts() const {
  shm_use u;
  for (auto& per_peer : conns_)
    for (auto& c : per_peer) {
      u.frames += c->shm_frames();
      u.missed += c->shm_misses();
    }
  return u;
}

}  // namespace chorus::tcp
