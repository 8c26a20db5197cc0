// What the kernel knows of one TCP connection's sending (TCP_INFO): bytes the peer acknowledged
// and the time the connection was busy sending (had data in flight, or was held by the
// receive window or the send buffer). Their ratio is the connection's own rate, apart from the
// times the application had nothing to send: a flow capped by the network shows as slow even
// when a collective also waits on other connections.
#pragma once

#include <cstdint>

namespace chorus::tcp {

struct tcp_meter {
  uint64_t bytes_acked = 0;
  uint64_t busy_us = 0;
};

/// TCP_INFO of `fd`; zeros when the call fails (closed socket, a kernel without the fields).
tcp_meter read_tcp_meter(int fd);

}  // namespace chorus::tcp
