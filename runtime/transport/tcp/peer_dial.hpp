// Dialling a lower rank while the mesh forms: connect, then the client handshake
// (handshake_io.hpp), again when the acceptor closed the connection during the handshake. A
// flooded acceptor evicts the connection that has waited longest in its handshake
// (acceptor.hpp), so a real client can lose its place once and must come back, within the
// connect timeout. Refusals (a wrong secret, an unexpected stream) are final.
#pragma once

#include "runtime/core/status.hpp"
#include "runtime/transport/tcp/handshake_io.hpp"
#include "runtime/transport/tcp/socket_util.hpp"

namespace chorus::tcp {

/// Connects to `ep` (rank `server_rank`) and runs the client handshake for `stream`. When the
/// connection breaks before the handshake ends (errc::connection_lost: closed, reset), it waits
/// a little (10 ms, doubling up to 500 ms) and starts again, until `deadline`. Every other
/// failure ends it at once: errc::auth (either side lacks the secret, or the server refused
/// the client), errc::protocol, errc::timeout. Errors name the rank and the address, and the
/// number of attempts when there was more than one.
result<unique_fd> dial_peer(const endpoint& ep, const handshake_config& cfg, int stream, int server_rank,
                            clock::time_point deadline);

}  // namespace chorus::tcp
