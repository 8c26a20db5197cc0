// The mesh's I/O thread, failure propagation and the goodbye exchange at close
// (mesh_transport.hpp).
#include "runtime/transport/mesh/mesh_transport.hpp"

#include <algorithm>

#include "runtime/core/log.hpp"
#include "runtime/transport/shm/shm_link.hpp"
#include "runtime/transport/tcp/tcp_connection.hpp"

namespace chorus::mesh {

mesh_transport::mesh_transport(mesh_parts& parts)
    : rank_(parts.rank),
      size_(parts.size),
      opts_(parts.options),
      limits_(parts.limits),
      work_(asio::make_work_guard(io_)),
      acceptor_(std::move(parts.acceptor)),
      table_(parts.lanes.table) {
  links_.resize(static_cast<std::size_t>(size_));
  peer_down_.assign(static_cast<std::size_t>(size_), false);
  link_owner& owner = *this;
  // Receive scratches are touched up front while they all fit in pretouched_scratch_bytes; in a
  // larger job (1 MiB x 8 streams x 63 peers would be 504 MiB per rank) each is made on its
  // first frame to reduce, so memory follows the connections a collective uses.
  std::size_t connections = 0;
  for (const auto& fds : parts.data) connections += fds.size();
  const bool pretouch = connections * opts_.scratch_bytes <= mesh::pretouched_scratch_bytes;
  for (int p = 0; p < size_; ++p) {
    auto& fds = parts.data[static_cast<std::size_t>(p)];
    for (int s = 0; s < static_cast<int>(fds.size()); ++s) {
      auto c = std::make_unique<tcp::tcp_connection>(owner, fds[s].release(), p, s, opts_.scratch_bytes, pretouch);
      auto& lane = parts.lanes.lanes[static_cast<std::size_t>(p)][static_cast<std::size_t>(s)];
      if (!lane.out && !lane.in) {
        links_[p].push_back(std::move(c));
        continue;
      }
      if (lane.out) ++shm_streams_;
      links_[p].push_back(std::make_unique<shm::shm_link>(owner, std::move(c), std::move(lane.out), std::move(lane.in)));
    }
  }
  CHORUS_LOG(info, "tcp", "mesh ready endpoint=" << parts.endpoint << " peers=" << size_ - 1
                                                 << " streams=" << opts_.num_streams
                                                 << " shm_streams=" << shm_streams_ << " hosts=" << parts.hosts.describe()
                                                 << " links: " << table_.describe(rank_));
}

mesh_transport::~mesh_transport() { close(std::chrono::seconds(5)); }

void mesh_transport::start(frame_sink* sink) {
  sink_ = sink;
  thread_ = std::thread([this] {
    for (auto& per_peer : links_)
      for (auto& c : per_peer) c->start_reading();
    if (opts_.peer_timeout.count() > 0) {
      write_marks_.resize(links_.size());
      for (std::size_t p = 0; p < links_.size(); ++p) write_marks_[p].resize(links_[p].size());
      write_watch_ = std::make_unique<asio::steady_timer>(io_);
      watch_writes();
    }
    run_io();
  });
}

void mesh_transport::run_io() {
  std::vector<stream_link*> rings;
  for (auto& per_peer : links_)
    for (auto& c : per_peer)
      if (c->polled()) rings.push_back(c.get());
  if (rings.empty()) {
    io_.run();
    return;
  }
  auto poll_rings = [&] {
    std::size_t n = 0;
    for (auto* c : rings) n += c->poll();
    return n;
  };
  using clock = std::chrono::steady_clock;
  auto last_work = clock::now();
  while (!io_.stopped()) {
    if (io_.poll() + poll_rings() > 0) {
      last_work = clock::now();
      continue;
    }
    if (clock::now() - last_work < opts_.shm_spin) {
      // Polling, but a thread that waits to run here (the caller, a peer rank on a busy core)
      // gets the core first.
      std::this_thread::yield();
      continue;
    }
    // Sleep (ring.hpp step 3): flag every ring, look once more, then wait for the next event;
    // a sender that publishes meanwhile sees a flag and rings the doorbell on TCP.
    for (auto* c : rings) c->set_sleeping(true);
    if (poll_rings() == 0) io_.run_one();
    for (auto* c : rings) c->set_sleeping(false);
    last_work = clock::now();
  }
}

void mesh_transport::watch_writes() {
  if (closing_ || closed_) return;
  const auto now = std::chrono::steady_clock::now();
  for (std::size_t p = 0; p < links_.size(); ++p) {
    for (std::size_t s = 0; s < links_[p].size(); ++s) {
      auto& c = links_[p][s];
      if (!c || !c->open()) continue;
      auto& m = write_marks_[p][s];
      const uint64_t taken = c->bytes_sent();
      if (c->queued_frames() == 0 || taken != m.taken || m.since == std::chrono::steady_clock::time_point{}) {
        m = {taken, now};
        continue;
      }
      if (now - m.since < opts_.peer_timeout) continue;
      auto secs = std::chrono::duration_cast<std::chrono::seconds>(now - m.since).count();
      link_failed(c->peer(), status{errc::connection_lost,
                                   "rank " + std::to_string(c->peer()) + " has taken no data on stream " +
                                       std::to_string(c->stream()) + " for " + std::to_string(secs) + " s while " +
                                       std::to_string(c->queued_frames()) +
                                       " frames wait for it: its data plane does not read (alive, "
                                       "but stuck); CHORUS_PEER_TIMEOUT_SECONDS=" +
                                       std::to_string(opts_.peer_timeout.count() / 1000) + " sets this bound"},
                  false);
      break;  // the peer's connections are closed now
    }
  }
  write_watch_->expires_after(std::max<std::chrono::milliseconds>(opts_.peer_timeout / 4, std::chrono::milliseconds(10)));
  write_watch_->async_wait([this](const asio::error_code& ec) {
    if (!ec) watch_writes();
  });
}

void mesh_transport::send(int peer, int stream, const wire::frame_header& h, const std::byte* payload) {
  links_[static_cast<std::size_t>(peer)][static_cast<std::size_t>(stream)]->send(h, payload);
}

void mesh_transport::abort(const status& why) {
  for (auto& per_peer : links_)
    for (auto& c : per_peer)
      if (c->open()) c->send_abort(why.to_string());
}

void mesh_transport::cancel(uint64_t sequence) {
  for (auto& per_peer : links_)
    for (auto& c : per_peer) c->cancel(sequence);
}

const stream_link* mesh_transport::link(int stream, int peer) const {
  if (peer < 0 || peer >= static_cast<int>(links_.size())) return nullptr;
  const auto& per_peer = links_[static_cast<std::size_t>(peer)];
  if (stream < 0 || stream >= static_cast<int>(per_peer.size())) return nullptr;
  return per_peer[static_cast<std::size_t>(stream)].get();
}

stream_traffic mesh_transport::traffic(int stream) const {
  stream_traffic t;
  for (int p = 0; p < size_; ++p) {
    auto u = peer_traffic(stream, p);
    t.sent += u.sent;
    t.received += u.received;
    t.shm_sent += u.shm_sent;
  }
  return t;
}

stream_traffic mesh_transport::peer_traffic(int stream, int peer) const {
  stream_traffic t;
  if (const auto* c = link(stream, peer)) {
    t.sent = c->bytes_sent();
    t.received = c->bytes_received();
    t.shm_sent = c->shm_bytes_sent();
  }
  return t;
}

stream_meter mesh_transport::meter(int stream) const {
  stream_meter m;
  for (int p = 0; p < size_; ++p)
    if (const auto* c = link(stream, p)) {
      auto k = c->meter();
      m.bytes_acked += k.bytes_acked;
      m.busy_us += k.busy_us;
    }
  return m;
}

std::pair<int, int> mesh_transport::connection_ports(int stream, int peer) const {
  const auto* c = link(stream, peer);
  return c ? c->ports() : std::pair<int, int>{0, 0};
}

link_use mesh_transport::links() const {
  link_use u;
  u.shm_streams = shm_streams_;
  for (auto& per_peer : links_)
    for (auto& c : per_peer) {
      u.shm_frames += c->shm_frames();
      u.shm_missed += c->shm_misses();
    }
  u.refused_connections = acceptor_ ? acceptor_->refused() : 0;
  return u;
}

void mesh_transport::link_failed(int p, const status& why, bool tell_peer) {
  // Fail the ops first: closing releases queued frames (sent()), and an op whose last frames
  // were queued to the dead peer must not look finished.
  if (!peer_down_[p]) {
    peer_down_[p] = true;
    if (!closing_) {
      CHORUS_LOG(error, "tcp", why.message());
      sink_->peer_failed(p, why);
    }
  }
  for (auto& other : links_[p]) {
    // A refused frame: the peer gets the reason as an abort notice (its error then says what
    // was wrong with what it sent, not just that we hung up); the connection closes once that
    // is written.
    if (tell_peer && other->open()) other->send_abort(why.to_string());
    else other->close();
  }
  finish_close_if_done();
}

void mesh_transport::goodbye_from(int p) {
  for (auto& s : links_[p])
    if (!s->goodbye_received()) return;
  if (!closing_ && !peer_down_[p]) {
    peer_down_[p] = true;
    sink_->peer_failed(p, status{errc::shutdown, "rank " + std::to_string(p) + " shut down"});
  }
  finish_close_if_done();
}

void mesh_transport::finish_close_if_done() {
  if (!closing_ || closed_) return;
  for (auto& per_peer : links_)
    for (auto& c : per_peer)
      if (c->open() && !(c->goodbye_sent() && c->queued_frames() == 0 && c->goodbye_received())) return;
  closed_ = true;
  for (auto& per_peer : links_)
    for (auto& c : per_peer) c->close();
  if (close_timer_) close_timer_->cancel();
  if (write_watch_) write_watch_->cancel();
  work_.reset();
  io_.stop();
}

void mesh_transport::close(std::chrono::milliseconds grace) {
  if (!thread_.joinable()) {
    for (auto& per_peer : links_)
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
      for (auto& per_peer : links_)
        for (auto& c : per_peer)
          if (c->open() && !(c->goodbye_sent() && c->queued_frames() == 0 && c->goodbye_received()))
            waiting += " rank " + std::to_string(c->peer()) + " stream " + std::to_string(c->stream()) +
                       (c->goodbye_sent() ? "" : " (goodbye not sent)") +
                       (c->queued_frames() ? " (" + std::to_string(c->queued_frames()) + " frames queued)" : "") +
                       (c->goodbye_received() ? "" : " (no goodbye from it)") + ";";
      CHORUS_LOG(warn, "tcp", "goodbye exchange did not finish in time; closing anyway; waiting for" << waiting);
      for (auto& per_peer : links_)
        for (auto& c : per_peer) c->close();
      finish_close_if_done();
    });
    for (auto& per_peer : links_)
      for (auto& c : per_peer)
        if (c->open()) c->send_goodbye();
    finish_close_if_done();
  });
  thread_.join();
  acceptor_.reset();
  if (shm_streams_ == 0) return;
  auto use = links();
  CHORUS_LOG(info, "tcp", "data frames through shared memory: " << use.shm_frames
                              << ", on TCP although a ring existed: " << use.shm_missed);
}

}  // namespace chorus::mesh
