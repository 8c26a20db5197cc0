// Publishing this rank's control gate and connecting to the lower ranks' gates.
#include "actors/control_plane.hpp"

#include "actors/protocol.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cstdlib>
#include <thread>

#include "runtime/collectives/communicator.hpp"
#include "runtime/core/log.hpp"
#include "runtime/transport/tcp/own_sockets.hpp"

namespace chorus {

bool split_host_port(const std::string& ep, std::string& host, uint16_t& port) {
  auto colon = ep.rfind(':');
  if (colon == std::string::npos || colon + 1 >= ep.size()) return false;
  host = ep.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  char* end = nullptr;
  unsigned long p = std::strtoul(ep.c_str() + colon + 1, &end, 10);
  if (*end != '\0' || p == 0 || p > 65535 || host.empty()) return false;
  port = static_cast<uint16_t>(p);
  return true;
}

namespace {

/// CAF 0.17 sets TCP_NODELAY on the sockets it accepts (inherited from its listener) but not
/// on those it connects: Nagle's algorithm then holds a small gossip behind an unacknowledged
/// one. Sets it on every TCP socket of this process whose peer is host:port (found without
/// touching other threads' descriptors); returns how many.
int set_nodelay_towards(const std::string& host, uint16_t port) {
  int set = 0, one = 1;
  for (int fd : tcp::sockets_connected_to(host, port))
    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) == 0) ++set;
  return set;
}

}  // namespace

result<std::vector<caf::actor>> connect_control_plane(caf::actor_system& sys, communicator& comm,
                                                      const caf::actor& gate, std::chrono::milliseconds timeout) {
  const int rank = comm.rank(), size = comm.size();
  std::vector<caf::actor> peers(static_cast<std::size_t>(size));
  if (size == 1) return peers;
  auto& store = comm.store();

  // 1. Listen where the data plane listens (it chose the address peers can reach).
  std::string host = "127.0.0.1";
  uint16_t unused = 0;
  if (auto ep = store.get("data/" + std::to_string(rank), timeout); ep) split_host_port(*ep, host, unused);
  auto port = sys.middleman().publish(gate, 0, host.c_str(), true);
  if (!port)
    return status{errc::connection_lost, "control plane: cannot publish the control gate on " + host + ": " +
                                             sys.render(port.error())};

  // 2. Exchange endpoints.
  std::string me = (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(*port);
  if (auto st = store.publish("ctrl/" + std::to_string(rank), me); !st.ok())
    return status{st.code(), "control plane: " + st.message()};
  auto eps = store.gather("ctrl/", timeout);
  if (!eps) return status{eps.error().code(), "control plane: " + eps.error().message()};

  // 3. Connect to every lower rank, retrying until the deadline (a peer may still be
  //    publishing). The negotiator introduces our gate over that one connection (a sealed
  //    hello): two nodes that connect to each other at the same time make CAF 0.17 drop one of
  //    the two links (remote_link_unreachable). Higher ranks introduce themselves the same way.
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (int r = 0; r < rank; ++r) {
    const auto& ep = (*eps)[static_cast<std::size_t>(r)];
    std::string h;
    uint16_t p = 0;
    if (!split_host_port(ep, h, p))
      return status{errc::rendezvous, "control plane: rank " + std::to_string(r) + " published '" + ep +
                                          "' under ctrl/" + std::to_string(r) + ", not host:port"};
    for (;;) {
      auto peer = sys.middleman().remote_actor(h, p);
      if (peer) {
        if (set_nodelay_towards(h, p) == 0)
          CHORUS_LOG(warn, "pipeline", "control plane: no socket to rank " << r << " at " << ep
                                                                           << " found for TCP_NODELAY");
        peers[static_cast<std::size_t>(r)] = *peer;
        break;
      }
      if (std::chrono::steady_clock::now() >= deadline)
        return status{errc::connection_lost, "control plane: cannot reach rank " + std::to_string(r) +
                                                 "'s control gate at " + ep + " within " +
                                                 std::to_string(timeout.count()) + " ms: " + sys.render(peer.error())};
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  CHORUS_LOG(debug, "pipeline", "control plane connected endpoint=" << me << " peers=" << size - 1);
  return peers;
}

}  // namespace chorus
