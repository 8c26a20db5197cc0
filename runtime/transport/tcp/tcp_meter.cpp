// read_tcp_meter: tcpi_bytes_acked and tcpi_busy_time through getsockopt(TCP_INFO). Its own
// file: <linux/tcp.h> (which has the fields) clashes with <netinet/tcp.h>.
#include "runtime/transport/tcp/tcp_meter.hpp"

#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>

namespace chorus::tcp {

tcp_meter read_tcp_meter(int fd) {
  tcp_info info{};
  socklen_t len = sizeof info;
  if (fd < 0 || ::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) return {};
  // Older kernels fill less of the struct: without tcpi_busy_time there is no meter.
  if (len < offsetof(tcp_info, tcpi_busy_time) + sizeof info.tcpi_busy_time) return {};
  return {info.tcpi_bytes_acked, info.tcpi_busy_time};
}

}  // namespace chorus::tcp
