// shm_open / fallocate / mmap of a ring segment, and the header that identifies it.
#include "runtime/transport/shm/segment.hpp"

#include <cerrno>
#include <cstring>
#include <new>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace chorus::shm {
namespace {

constexpr uint64_t segment_magic = 0x474e495253524843;  // "CHRSRING"
// Header page: magic u64 | nonce u64 | capacity u64, then the released counter, the published
// counter and the reader's sleeping flag, each on its own cache line; the ring's bytes start
// at the next page.
constexpr std::size_t header_bytes = 4096;
constexpr std::size_t released_at = 64;
constexpr std::size_t published_at = 128;
constexpr std::size_t sleeping_at = 192;

struct header {
  uint64_t magic;
  uint64_t nonce;
  uint64_t capacity;
};

status io_error(const std::string& what, const std::string& name) {
  return status{errc::config, what + " shared-memory segment " + name + ": " + std::strerror(errno)};
}

}  // namespace

segment::segment(std::string name, void* base, std::size_t mapped)
    : name_(std::move(name)), base_(base), mapped_(mapped) {
  auto* bytes = static_cast<std::byte*>(base_);
  data_ = bytes + header_bytes;
  capacity_ = mapped_ - header_bytes;
  released_ = reinterpret_cast<std::atomic<uint64_t>*>(bytes + released_at);
  published_ = reinterpret_cast<std::atomic<uint64_t>*>(bytes + published_at);
  sleeping_ = reinterpret_cast<std::atomic<uint32_t>*>(bytes + sleeping_at);
}

result<std::unique_ptr<segment>> segment::create(const std::string& name, std::size_t capacity, uint64_t nonce) {
  int fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0) return io_error("cannot create", name);
  std::size_t mapped = header_bytes + capacity;
  // posix_fallocate returns the error instead of setting errno.
  if (int e = ::posix_fallocate(fd, 0, static_cast<off_t>(mapped)); e != 0) {
    errno = e;
    auto st = io_error("cannot reserve " + std::to_string(mapped) + " bytes for", name);
    ::close(fd);
    ::shm_unlink(name.c_str());
    return st;
  }
  void* base = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (base == MAP_FAILED) {
    auto st = io_error("cannot map", name);
    ::shm_unlink(name.c_str());
    return st;
  }
  std::unique_ptr<segment> s(new segment(name, base, mapped));
  std::memset(base, 0, mapped);  // pre-touch: the first frames must not pay for fresh pages
  new (s->released_) std::atomic<uint64_t>(0);
  new (s->published_) std::atomic<uint64_t>(0);
  new (s->sleeping_) std::atomic<uint32_t>(0);
  header h{segment_magic, nonce, capacity};
  std::memcpy(base, &h, sizeof h);
  return s;
}

result<std::unique_ptr<segment>> segment::open(const std::string& name, uint64_t nonce) {
  int fd = ::shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0) return io_error("cannot open", name);
  struct stat st {};
  if (::fstat(fd, &st) != 0 || st.st_size < static_cast<off_t>(header_bytes)) {
    ::close(fd);
    return status{errc::protocol, "shared-memory segment " + name + " is too small"};
  }
  // The rendezvous store that announced the name is not authenticated: accept only a segment
  // created by our own user (a peer rank runs as that user; anyone else could only inject).
  if (st.st_uid != ::geteuid()) {
    ::close(fd);
    return status{errc::protocol, "shared-memory segment " + name + " belongs to uid " + std::to_string(st.st_uid) +
                                      ", not to this process's uid " + std::to_string(::geteuid())};
  }
  auto mapped = static_cast<std::size_t>(st.st_size);
  void* base = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (base == MAP_FAILED) return io_error("cannot map", name);
  std::unique_ptr<segment> s(new segment(name, base, mapped));
  header h{};
  std::memcpy(&h, base, sizeof h);
  if (h.magic != segment_magic || h.nonce != nonce || h.capacity != s->capacity_) {
    s->linked_ = false;  // not ours to remove
    return status{errc::protocol, "shared-memory segment " + name + " is not the one announced"};
  }
  s->unlink();
  // Pre-touch our mapping too (reads: the creator's zeros stay).
  volatile const std::byte* p = s->data_;
  for (std::size_t i = 0; i < s->capacity_; i += 4096) (void)p[i];
  return s;
}

std::size_t segment::footprint(std::size_t capacity) { return header_bytes + capacity; }

void segment::unlink() {
  if (!linked_) return;
  linked_ = false;
  ::shm_unlink(name_.c_str());
}

segment::~segment() {
  unlink();
  ::munmap(base_, mapped_);
}

}  // namespace chorus::shm
