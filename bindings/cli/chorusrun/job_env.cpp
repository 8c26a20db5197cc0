// Job identity: rendezvous address (a free port), OpenSSL-random secret and id.
#include "bindings/cli/chorusrun/job_env.hpp"

#include "runtime/env/process_env.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/rand.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

#include "runtime/config/reader.hpp"

namespace chorus::chorusrun {
namespace {

std::string errno_text(const char* what) {
  return std::string(what) + ": " + std::strerror(errno);
}

// Binds a socket to 127.0.0.1:0, reads the port the kernel chose, closes the socket. Another
// process may take the port before rank 0 binds it; rank 0 reports that as a rendezvous error.
result<int> pick_free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return status{errc::internal, errno_text("socket")};
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = 0;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    status st{errc::internal, errno_text("picking a free port on 127.0.0.1")};
    ::close(fd);
    return st;
  }
  ::close(fd);
  return static_cast<int>(ntohs(addr.sin_port));
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

}  // namespace

result<job_identity> make_job_identity(const launch_options& opts, const std::vector<placement>& placements) {
  job_identity job;
  if (auto rdv = configured_text("CHORUS_RENDEZVOUS"); !rdv.empty()) {
    job.rendezvous = std::move(rdv);
  } else if (opts.rendezvous) {
    job.rendezvous = *opts.rendezvous;
  } else {
    auto port = pick_free_port();
    if (!port) return port.error();
    std::string host = opts.hosts.empty() || placements.empty() ? "127.0.0.1" : placements.front().host;
    job.rendezvous = format_host_port(host, static_cast<uint16_t>(*port));
  }
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
