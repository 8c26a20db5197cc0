// getifaddrs(3) lookup of an interface's address for CHORUS_IFACE.
#include "runtime/transport/tcp/iface.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <set>

namespace chorus::tcp {

result<std::string> interface_address(const std::string& iface) {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return status{errc::config, "CHORUS_IFACE=" + iface + ": getifaddrs failed"};
  std::string v4, v6;
  std::set<std::string> names;
  for (ifaddrs* a = list; a; a = a->ifa_next) {
    if (!a->ifa_name) continue;
    names.insert(a->ifa_name);
    if (iface != a->ifa_name || !a->ifa_addr) continue;
    char buf[INET6_ADDRSTRLEN] = {};
    if (a->ifa_addr->sa_family == AF_INET && v4.empty()) {
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, buf, sizeof buf);
      v4 = buf;
    } else if (a->ifa_addr->sa_family == AF_INET6 && v6.empty()) {
      auto* sa = reinterpret_cast<sockaddr_in6*>(a->ifa_addr);
      if (IN6_IS_ADDR_LINKLOCAL(&sa->sin6_addr)) continue;  // needs a scope id: not publishable as is
      inet_ntop(AF_INET6, &sa->sin6_addr, buf, sizeof buf);
      v6 = buf;
    }
  }
  ::freeifaddrs(list);
  if (!v4.empty()) return v4;
  if (!v6.empty()) return v6;
  std::string have;
  for (const auto& n : names) have += (have.empty() ? "" : ", ") + n;
  return status{errc::config, "CHORUS_IFACE=" + iface + ": no such interface with an IPv4 or global IPv6 address (interfaces: " +
                                  have + ")"};
}

}  // namespace chorus::tcp
