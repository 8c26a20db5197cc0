// Finding this process's own TCP sockets to an endpoint without touching any other descriptor:
// for sockets a library opened and does not hand out (CAF 0.17's connections).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace chorus::tcp {

/// The descriptors of this process's TCP sockets whose remote end is host:port (host a numeric
/// IPv4 or IPv6 address; any other host matches on the port alone). The kernel's socket tables
/// (/proc/self/net/tcp, tcp6) give the sockets' inodes, and the links in /proc/self/fd give the
/// descriptors that hold them. No descriptor is used on the way (fstat or getpeername on every
/// descriptor of the process would race with other threads closing theirs). A descriptor may
/// still be closed by its owner after it was listed.
std::vector<int> sockets_connected_to(const std::string& host, uint16_t port);

}  // namespace chorus::tcp
