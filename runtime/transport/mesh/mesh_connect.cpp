// connect_mesh (mesh_connect.hpp): the blocking setup, in the order peers rely on.
#include "runtime/transport/mesh/mesh_connect.hpp"

#include <algorithm>

#include "runtime/core/log.hpp"
#include "runtime/env/host_settings.hpp"
#include "runtime/transport/tcp/handshake_io.hpp"
#include "runtime/transport/tcp/iface.hpp"
#include "runtime/transport/tcp/peer_dial.hpp"

namespace chorus::mesh {

mesh_options mesh_options::from_config(const transport_config& c) {
  return {.num_streams = c.num_streams, .socket_buffer_bytes = c.socket_buffer_bytes, .shm_bytes = c.shm_bytes,
          .shm_spin = c.shm_spin, .connect_timeout = c.connect_timeout, .bind_host = c.host, .iface = c.iface,
          .peer_timeout = c.peer_timeout};
}

result<mesh_parts> connect_mesh(const process_env& env, rendezvous& rdv, const mesh_options& opts) {
  using namespace chorus::tcp;
  mesh_parts m;
  m.rank = env.rank;
  m.size = env.size;
  m.options = opts;
  const uint64_t id = env.session_id ? env.session_id : env.job_id;  // this attempt of the job
  m.limits.job_id = id;
  m.limits.max_payload = opts.max_payload;
  auto deadline = clock::now() + opts.connect_timeout;
  // Streams 0..S-1 carry data; one more connection per peer is the control link.
  const int control_stream = opts.num_streams;
  handshake_config cfg{id, env.job_secret, env.rank, env.size, opts.num_streams + 1};
  if (auto st = require_secret_across_hosts(env); !st.ok()) return st;
  if (cfg.secret.empty()) {
    if (env.size > 1)
      CHORUS_LOG(warn, "tcp", "CHORUS_JOB_SECRET is not set: connections use a well-known default secret; "
                              "set it (chorusrun does) to keep other jobs out");
    cfg.secret = job_secret_or_default(env);
  }

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
  m.acceptor = std::make_unique<acceptor>(std::move(*listener), cfg);

  // 2. Publish our endpoint and learn everybody's.
  m.endpoint = endpoint{host, port}.to_string();
  auto st = rdv.publish("data/" + std::to_string(env.rank), m.endpoint);
  if (!st.ok()) return st;
  auto eps = rdv.gather("data/", opts.connect_timeout);
  if (!eps) return eps.error();

  // 3. Connect to every lower rank; the acceptor takes connections from every higher one.
  auto& fds = m.data;
  fds.resize(static_cast<std::size_t>(env.size));
  for (int p = 0; p < env.rank; ++p) {
    auto ep = parse_endpoint((*eps)[p]);
    if (!ep) return ep.error();
    for (int s = 0; s <= control_stream; ++s) {
      auto fd = dial_peer(*ep, cfg, s, p, deadline);  // again after an eviction, until the deadline
      if (!fd) return fd.error();
      fds[p].push_back(std::move(*fd));
    }
  }
  auto inbound = m.acceptor->wait_inbound(deadline);
  if (!inbound) return inbound.error();
  for (int p = env.rank + 1; p < env.size; ++p) fds[p] = std::move((*inbound)[p]);

  // 4. The control connections apart; every socket tuned.
  std::vector<tcp::unique_fd> control(static_cast<std::size_t>(env.size));
  for (int p = 0; p < env.size; ++p) {
    if (fds[p].empty()) continue;
    tune_socket(fds[p][control_stream].get(), 0);
    set_liveness(fds[p][control_stream].get(), opts.peer_timeout);
    control[p] = std::move(fds[p][control_stream]);
    fds[p].pop_back();
    for (auto& fd : fds[p]) {
      tune_socket(fd.get(), opts.socket_buffer_bytes);
      set_liveness(fd.get(), opts.peer_timeout);
    }
  }

  // 5. The link table and the shared-memory rings to the ranks it gives shm.
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now());
  auto lanes = shm::open_lanes(env, rdv, opts.num_streams, opts.shm_bytes,
                               std::max(left, std::chrono::milliseconds(1000)), m.limits);
  if (!lanes) return lanes.error();
  m.lanes = std::move(*lanes);
  m.hosts = group_by_host(m.lanes.identities);
  // In a job across hosts, errors about a peer name its host too (such a job is debugged by
  // node, and an error passed on to other hosts keeps it); on one host the rank says it all.
  std::vector<std::string> names;
  if (m.hosts.num_hosts() > 1)
    for (const auto& identity : m.lanes.identities) names.push_back(host_name_in(identity));
  m.control = std::make_shared<tcp::control_link>(env.rank, std::move(control), m.limits, opts.peer_timeout,
                                                  std::move(names));
  return m;
}

}  // namespace chorus::mesh
