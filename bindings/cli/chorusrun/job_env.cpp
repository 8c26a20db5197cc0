// Job identity: rendezvous address (a free port, held for rank 0 when it runs here),
// OpenSSL-random secret and id.
#include "bindings/cli/chorusrun/job_env.hpp"

#include "runtime/env/process_env.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/rand.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

#include "bindings/cli/chorusrun/launch_plan.hpp"
#include "runtime/transport/tcp/iface.hpp"
#include "runtime/transport/tcp/socket_util.hpp"
#include "runtime/config/reader.hpp"

namespace chorus::chorusrun {
namespace {

std::string errno_text(const char* what) {
  return std::string(what) + ": " + std::strerror(errno);
}

// A socket bound to host:0 (an IPv4 or IPv6 address) and listening: the kernel picks the port
// and nobody else can take it while the socket is open. Close-on-exec: only the rank that is
// handed it (spawn_rank's inherit_fd) gets it.
result<int> listen_on_free_port(const std::string& host) {
  sockaddr_storage addr{};
  socklen_t addr_len = 0;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&addr);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&addr);
  if (::inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    addr_len = sizeof *v4;
  } else if (::inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    addr_len = sizeof *v6;
  } else {
    return status{errc::invalid_argument, "cannot listen on '" + host + "': not a numeric address"};
  }
  int fd = ::socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return status{errc::internal, errno_text("socket")};
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), addr_len) != 0 || ::listen(fd, SOMAXCONN) != 0) {
    status st{errc::internal, errno_text(("listening on a free port of " + host).c_str())};
    ::close(fd);
    return st;
  }
  return fd;
}

uint16_t bound_port(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return 0;
  return addr.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6&>(addr).sin6_port)
                                    : ntohs(reinterpret_cast<sockaddr_in&>(addr).sin_port);
}

// For a rank 0 on another host: binds 127.0.0.1:0 here, reads the port, closes the socket. The
// port cannot be held there; rank 0 that finds it taken fails naming the port.
result<int> pick_free_port() {
  auto fd = listen_on_free_port("127.0.0.1");
  if (!fd) return fd.error();
  int port = bound_port(*fd);
  ::close(*fd);
  if (port == 0) return status{errc::internal, errno_text("reading the port of a socket on 127.0.0.1")};
  return port;
}

result<std::string> random_hex(size_t num_bytes) {
  std::vector<unsigned char> bytes(num_bytes);
  if (RAND_bytes(bytes.data(), static_cast<int>(bytes.size())) != 1) {
    return status{errc::internal, "OpenSSL RAND_bytes failed to produce " +
                                      std::to_string(num_bytes) + " random bytes"};
  }
  static constexpr char digits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * num_bytes);
  for (unsigned char b : bytes) {
    hex += digits[b >> 4];
    hex += digits[b & 0xf];
  }
  return hex;
}

// The launcher passes these on to its ranks; read through the config module like every
// CHORUS_ variable (runtime/config/variables.hpp), where they are text.
std::string configured_text(const char* name) {
  auto v = cfg::reader(cfg::process_lookup()).text(name);
  return v ? *v : std::string();
}

// torch.distributed's store: the environment's, else beside the rendezvous (job_identity).
status choose_master(const launch_options& opts, job_identity& job) {
  if (opts.elastic()) return {};
  const auto get = cfg::process_lookup();
  const char* addr = get("MASTER_ADDR");
  const char* port = get("MASTER_PORT");
  if (addr && *addr && port && *port) {
    job.master_addr = addr;
    job.master_port = port;
    return {};
  }
  const auto colon = job.rendezvous.rfind(':');
  if (colon == std::string::npos) return status{errc::config, "rendezvous '" + job.rendezvous + "' is not host:port"};
  std::string host = job.rendezvous.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  job.master_addr = host;
  if (job.store_listener >= 0) {
    auto free = pick_free_port();
    if (!free) return free.error();
    job.master_port = std::to_string(*free);
    return {};
  }
  int rdv_port = 0;
  const std::string text = job.rendezvous.substr(colon + 1);
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), rdv_port);
  if (ec != std::errc() || end != text.data() + text.size() || rdv_port < 2 || rdv_port > 65535)
    return status{errc::config, "rendezvous '" + job.rendezvous + "' has no port above 1 to put torch's store below"};
  job.master_port = std::to_string(rdv_port - 1);
  return {};
}

}  // namespace

result<job_identity> make_job_identity(const launch_options& opts, const std::vector<placement>& placements,
                                       const std::string& this_host) {
  job_identity job;
  std::string elastic_host = "127.0.0.1";  // where chorusrun serves an elastic job's store
  // CHORUS_HOST / CHORUS_IFACE name this host's address for the job (the local workers' data
  // plane listens there too): the store listens there, so hosts offered later reach it.
  const std::string bind_host = configured_text("CHORUS_HOST"), iface = configured_text("CHORUS_IFACE");
  if (opts.elastic() && !bind_host.empty()) {
    elastic_host = bind_host;
  } else if (opts.elastic() && !iface.empty()) {
    auto addr = tcp::interface_address(iface);
    if (!addr) return addr.error();
    elastic_host = *addr;
  } else if (opts.elastic()) {
    for (const auto& p : placements) {
      if (starts_directly(opts, p.host, this_host)) continue;
      auto addr = tcp::address_toward(p.host);
      if (!addr) return status{errc::config, "the elastic store must be reachable from host '" + p.host +
                                                 "': " + addr.error().message()};
      elastic_host = *addr;
      break;
    }
  }
  if (auto rdv = configured_text("CHORUS_RENDEZVOUS"); !rdv.empty()) {
    job.rendezvous = std::move(rdv);
  } else if (opts.rendezvous) {
    job.rendezvous = *opts.rendezvous;
  } else if (std::string host = opts.elastic()                               ? elastic_host
                                : opts.hosts.empty() || placements.empty() ? "127.0.0.1"
                                                                           : placements.front().host;
             opts.elastic() || starts_directly(opts, host, this_host)) {
    // Rank 0 runs here: hold the port from now until rank 0 inherits the socket (elastic:
    // until chorusrun serves the store on it).
    if (host == "localhost") host = "127.0.0.1";
    auto fd = listen_on_free_port(host);
    if (!fd) return fd.error();
    uint16_t port = bound_port(*fd);
    if (port == 0) {
      status st{errc::internal, errno_text(("reading the port of a socket on " + host).c_str())};
      ::close(*fd);
      return st;
    }
    job.store_listener = *fd;
    job.rendezvous = format_host_port(host, port);
  } else {
    auto port = pick_free_port();
    if (!port) return port.error();
    job.rendezvous = format_host_port(host, static_cast<uint16_t>(*port));
  }
  if (auto st = choose_master(opts, job); !st.ok()) return st;
  if (auto secret = configured_text("CHORUS_JOB_SECRET"); !secret.empty()) {
    job.secret = std::move(secret);
  } else if (opts.nnodes && *opts.nnodes > 1) {
    return status{errc::config,
                  "per-node mode (--nnodes " + std::to_string(*opts.nnodes) +
                      ") needs CHORUS_JOB_SECRET set to the same value on every node, e.g. "
                      "export CHORUS_JOB_SECRET=$(openssl rand -hex 32) before the scheduler starts the nodes"};
  } else {
    auto secret_hex = random_hex(32);
    if (!secret_hex) return secret_hex.error();
    job.secret = std::move(*secret_hex);
  }
  if (!opts.nnodes) {
    auto id_hex = random_hex(8);
    if (!id_hex) return id_hex.error();
    job.job_id = std::move(*id_hex);
  }
  return job;
}

}  // namespace chorus::chorusrun
