// A process_env for one rank of an in-process rendezvous test on 127.0.0.1, and a port that was
// free a moment ago there.
#pragma once

#include <asio.hpp>
#include <chrono>
#include <cstdint>

#include "runtime/env/process_env.hpp"

namespace chorus::testing {

inline uint16_t free_rendezvous_port() {
  asio::io_context io;
  asio::ip::tcp::acceptor acceptor(io, asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  return acceptor.local_endpoint().port();
}

inline process_env rendezvous_env(int rank, int size, uint16_t port,
                                  std::chrono::milliseconds timeout = std::chrono::milliseconds(1500)) {
  process_env env;
  env.rank = rank;
  env.size = size;
  env.local_rank = rank;
  env.local_size = size;
  env.rendezvous_port = port;
  env.rendezvous_timeout = timeout;
  env.source = "chorus";
  return env;
}

}  // namespace chorus::testing
