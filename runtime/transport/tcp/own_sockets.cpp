// /proc/self/net/tcp{,6} rows to inodes, /proc/self/fd links to descriptors (own_sockets.hpp).
#include "runtime/transport/tcp/own_sockets.hpp"

#include <arpa/inet.h>
#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace chorus::tcp {
namespace {

/// "0100007F:1F90" (IPv4) or 32 hex digits ":port" (IPv6): the address bytes as the kernel
/// prints them (each 32-bit word in host order) and the port. False when malformed.
bool parse_proc_endpoint(const std::string& s, std::vector<unsigned char>& addr, uint16_t& port) {
  auto colon = s.find(':');
  if (colon == std::string::npos || (colon != 8 && colon != 32) || s.size() != colon + 5) return false;
  addr.clear();
  for (std::size_t w = 0; w < colon; w += 8) {
    char* end = nullptr;
    std::string word = s.substr(w, 8);
    unsigned long v = std::strtoul(word.c_str(), &end, 16);
    if (*end != '\0') return false;
    uint32_t host_order = static_cast<uint32_t>(v);
    unsigned char b[4];
    std::memcpy(b, &host_order, 4);  // the kernel printed the word in host order
    addr.insert(addr.end(), b, b + 4);
  }
  char* end = nullptr;
  std::string p = s.substr(colon + 1);
  unsigned long v = std::strtoul(p.c_str(), &end, 16);
  if (*end != '\0' || v > 65535) return false;
  port = static_cast<uint16_t>(v);
  return true;
}

/// Inodes of the sockets in `table` whose remote end matches.
void matching_inodes(const char* table, const std::vector<unsigned char>* want4, const std::vector<unsigned char>* want6,
                     uint16_t port, std::vector<unsigned long>& out) {
  std::ifstream in(table);
  std::string line;
  std::getline(in, line);  // the header
  while (std::getline(in, line)) {
    std::istringstream row(line);
    std::string sl, local, remote, state, queues, timer, retransmits, uid, timeout;
    unsigned long inode = 0;
    if (!(row >> sl >> local >> remote >> state >> queues >> timer >> retransmits >> uid >> timeout >> inode)) continue;
    std::vector<unsigned char> addr;
    uint16_t p = 0;
    if (!parse_proc_endpoint(remote, addr, p) || p != port || inode == 0) continue;
    bool match = !want4 && !want6;  // a name: the port alone
    if (addr.size() == 4 && want4) match = addr == *want4;
    if (addr.size() == 16 && want6) match = addr == *want6;
    if (addr.size() == 16 && want4) {  // an IPv4-mapped IPv6 address
      static const unsigned char prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
      match = match || (std::equal(prefix, prefix + 12, addr.begin()) && std::equal(addr.begin() + 12, addr.end(), want4->begin()));
    }
    if (match) out.push_back(inode);
  }
}

}  // namespace

std::vector<int> sockets_connected_to(const std::string& host, uint16_t port) {
  std::vector<unsigned char> v4(4), v6(16);
  const bool is_v4 = inet_pton(AF_INET, host.c_str(), v4.data()) == 1;
  const bool is_v6 = !is_v4 && inet_pton(AF_INET6, host.c_str(), v6.data()) == 1;
  std::vector<unsigned long> inodes;
  matching_inodes("/proc/self/net/tcp", is_v4 ? &v4 : nullptr, is_v6 ? &v6 : nullptr, port, inodes);
  matching_inodes("/proc/self/net/tcp6", is_v4 ? &v4 : nullptr, is_v6 ? &v6 : nullptr, port, inodes);
  std::vector<int> fds;
  if (inodes.empty()) return fds;
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return fds;
  while (dirent* e = readdir(dir)) {
    char* end = nullptr;
    long fd = std::strtol(e->d_name, &end, 10);
    if (*end != '\0' || fd < 0) continue;
    char link[64] = {};
    std::string path = std::string("/proc/self/fd/") + e->d_name;
    ssize_t n = readlink(path.c_str(), link, sizeof link - 1);
    if (n <= 0) continue;
    unsigned long inode = 0;
    if (std::sscanf(link, "socket:[%lu]", &inode) != 1) continue;
    if (std::find(inodes.begin(), inodes.end(), inode) != inodes.end()) fds.push_back(static_cast<int>(fd));
  }
  closedir(dir);
  std::sort(fds.begin(), fds.end());
  return fds;
}

}  // namespace chorus::tcp
