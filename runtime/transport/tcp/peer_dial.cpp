// dial_peer (peer_dial.hpp): connect and handshake, again after a connection the acceptor closed.
#include "runtime/transport/tcp/peer_dial.hpp"

#include <algorithm>
#include <thread>

#include "runtime/core/log.hpp"

namespace chorus::tcp {

result<unique_fd> dial_peer(const endpoint& ep, const handshake_config& cfg, int stream, int server_rank,
                            clock::time_point deadline) {
  const std::string peer = "rank " + std::to_string(server_rank) + " at " + ep.to_string();
  auto backoff = std::chrono::milliseconds(10);
  for (int attempt = 1;; ++attempt) {
    auto fd = connect_to(ep, deadline);
    if (!fd)
      return status{fd.error().code(), "rank " + std::to_string(cfg.rank) + " to rank " +
                                           std::to_string(server_rank) + ": " + fd.error().message()};
    auto st = client_handshake(fd->get(), cfg, stream, server_rank, deadline);
    if (st.ok()) return std::move(*fd);
    const std::string tries = attempt > 1 ? " (attempt " + std::to_string(attempt) + ")" : std::string();
    // Only a connection that broke is worth another try: the acceptor evicted it to make room,
    // or shed it under load. A refusal or a wrong secret would only be repeated.
    if (st.code() != errc::connection_lost || clock::now() + backoff >= deadline)
      return status{st.code(), "handshake with " + peer + " stream " + std::to_string(stream) + ": " + st.message() +
                                   tries};
    CHORUS_LOG(debug, "tcp", "handshake with " << peer << " stream " << stream << " broke (" << st.message()
                                               << "); again in " << backoff.count() << " ms" << tries);
    fd->reset();
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(500));
  }
}

}  // namespace chorus::tcp
