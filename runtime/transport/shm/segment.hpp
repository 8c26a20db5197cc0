// A POSIX shared-memory segment holding one ring (ring.hpp): created and pre-touched by the
// sending rank, opened by the receiving rank on the same host, which proves it found the right
// one by the nonce the creator wrote in it, then removes the name. Only the two mappings remain;
// the memory goes away with the last of them.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "runtime/core/status.hpp"

namespace chorus::shm {

class segment {
 public:
  /// A new segment named `name` ("/chorus-..."), mode 0600, with `capacity` ring bytes; the
  /// memory is reserved up front (a full /dev/shm is an error here, never a SIGBUS later) and
  /// touched. errc::config naming the segment on failure.
  static result<std::unique_ptr<segment>> create(const std::string& name, std::size_t capacity, uint64_t nonce);
  /// Maps the segment `name` and checks that it carries `nonce` and belongs to our user; then
  /// unlinks the name. errc::config when it cannot be opened (e.g. another host or IPC
  /// namespace), errc::protocol when it is not the segment announced.
  static result<std::unique_ptr<segment>> open(const std::string& name, uint64_t nonce);
  /// The bytes of /dev/shm a segment of `capacity` ring bytes takes (its header page included).
  static std::size_t footprint(std::size_t capacity);
  ~segment();
  segment(const segment&) = delete;
  segment& operator=(const segment&) = delete;

  std::byte* data() const { return data_; }
  std::size_t capacity() const { return capacity_; }
  /// Bytes the receiver has handed back so far (monotonic; written by the receiver only).
  std::atomic<uint64_t>& released() const { return *released_; }
  /// Bytes the sender has made visible so far (monotonic; written by the sender only).
  std::atomic<uint64_t>& published() const { return *published_; }
  /// 1 while the receiver sleeps and wants a doorbell for new frames (ring.hpp); both sides write it.
  std::atomic<uint32_t>& reader_sleeping() const { return *sleeping_; }
  const std::string& name() const { return name_; }
  /// Removes the name (the mappings stay); idempotent, errors ignored. The destructor calls it.
  void unlink();

 private:
  segment(std::string name, void* base, std::size_t mapped);
  std::string name_;
  void* base_;
  std::size_t mapped_;
  std::byte* data_ = nullptr;
  std::size_t capacity_ = 0;
  std::atomic<uint64_t>* released_ = nullptr;
  std::atomic<uint64_t>* published_ = nullptr;
  std::atomic<uint32_t>* sleeping_ = nullptr;
  bool linked_ = true;
};

}  // namespace chorus::shm
