// Test helper: one blocking HTTP/1.0 GET over a plain socket (no library), with a deadline.
// Enough to scrape a /metrics endpoint or query Prometheus' HTTP API on 127.0.0.1.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdlib>
#include <optional>
#include <string>

namespace chorus::testing {

struct http_response {
  int code = 0;
  std::string body;
};

/// GET http://host:port<target>; nullopt when nothing answered within `timeout`.
inline std::optional<http_response> http_get(const std::string& host, int port, const std::string& target,
                                             std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return std::nullopt;
  timeval tv{static_cast<time_t>(timeout.count() / 1000), static_cast<suseconds_t>(timeout.count() % 1000 * 1000)};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, host.c_str(), &sa.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    ::close(fd);
    return std::nullopt;
  }
  std::string req = "GET " + target + " HTTP/1.0\r\nHost: " + host + "\r\nConnection: close\r\n\r\n";
  if (::send(fd, req.data(), req.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(req.size())) {
    ::close(fd);
    return std::nullopt;
  }
  std::string raw;
  char buf[8192];
  for (;;) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    raw.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  auto head_end = raw.find("\r\n\r\n");
  auto sp = raw.find(' ');
  if (head_end == std::string::npos || sp == std::string::npos) return std::nullopt;
  http_response r;
  r.code = std::atoi(raw.c_str() + sp + 1);
  r.body = raw.substr(head_end + 4);
  return r;
}

/// "%XX"-escapes everything but unreserved characters, for query strings.
inline std::string url_encode(const std::string& s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

}  // namespace chorus::testing
