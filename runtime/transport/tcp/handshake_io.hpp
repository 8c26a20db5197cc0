// Runs the handshake of runtime/wire/handshake.hpp over a blocking socket, with a deadline.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "runtime/core/status.hpp"
#include "runtime/transport/tcp/socket_util.hpp"

namespace chorus::tcp {

struct handshake_config {
  uint64_t job_id = 0;
  std::string secret;
  int rank = 0;
  int size = 1;
  int num_streams = 1;
};

/// Client side: identifies as (cfg.rank, stream), checks the server proves the secret and is
/// `server_rank`, then proves it too. errc::auth when either side lacks the secret.
status client_handshake(int fd, const handshake_config& cfg, int stream, int server_rank,
                        clock::time_point deadline);

/// Who a verified client is.
struct client_identity {
  int rank = -1;
  int stream = -1;
};

/// Server side: verifies the client's proof; `admit` may still refuse a verified client
/// (a rank or stream that is not expected). Refusals are sent to the client as a reason.
result<client_identity> server_handshake(int fd, const handshake_config& cfg, clock::time_point deadline,
                                         const std::function<status(const client_identity&)>& admit);

}  // namespace chorus::tcp
