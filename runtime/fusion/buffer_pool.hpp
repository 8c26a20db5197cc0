// The fusion buffer pool: host buffers for fused buckets, allocated once, pre-touched and
// reused. Fresh pages cost ~18 µs per 4 KiB on first touch on our machines, so a buffer is
// written page by page when it is allocated, never on the hot path.
//
// Thread-safety: every member function may be called from any thread. One mutex guards the
// pool; it is taken once per acquire() and once per lease release, i.e. per bucket, never per
// byte. A lease may be released on a different thread than the one that acquired it.
#pragma once

#include <cstddef>
#include <memory>
#include <utility>

#include "runtime/core/status.hpp"

namespace chorus {

struct buffer_pool_options {
  /// Upper bound on the bytes of all buffers the pool holds, leased or free. Acquiring past
  /// it fails with errc::invalid_argument instead of growing. 0 means no buffer at all.
  std::size_t max_bytes = std::size_t{256} << 20;
  /// The fusion threshold. Requests above half of it get a buffer of exactly this size
  /// (rounded up to whole pages) rather than the next power of two; 0: powers of two only.
  std::size_t fusion_threshold = std::size_t{64} << 20;
  /// Write every page once at allocation. Off only for tests that measure the difference.
  bool pre_touch = true;
};

class buffer_pool;

/// A buffer borrowed from the pool; returns it on destruction. Move-only. A lease keeps the
/// pool's state alive, so it may outlive the buffer_pool object that issued it.
class buffer_lease {
 public:
  buffer_lease() = default;
  buffer_lease(buffer_lease&& other) noexcept;
  buffer_lease& operator=(buffer_lease&& other) noexcept;
  buffer_lease(const buffer_lease&) = delete;
  buffer_lease& operator=(const buffer_lease&) = delete;
  ~buffer_lease();

  /// Start of the buffer, aligned to the page size; nullptr for an empty lease.
  std::byte* data() const { return data_; }
  /// Bytes asked for in acquire().
  std::size_t size() const { return size_; }
  /// Bytes usable: at least size(), the buffer's size class.
  std::size_t capacity() const { return capacity_; }
  explicit operator bool() const { return data_ != nullptr; }
  /// Returns the buffer to the pool now; the lease becomes empty.
  void reset();

 private:
  friend class buffer_pool;
  struct shared_state;
  buffer_lease(std::shared_ptr<shared_state> pool, std::byte* data, std::size_t size, std::size_t capacity)
      : pool_(std::move(pool)), data_(data), size_(size), capacity_(capacity) {}

  std::shared_ptr<shared_state> pool_;
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  std::size_t capacity_ = 0;
};

/// Point-in-time counters, for tests and metrics.
struct buffer_pool_stats {
  std::size_t allocated_bytes = 0;  ///< all buffers held, leased or free
  std::size_t leased_bytes = 0;     ///< capacity of buffers out on lease
  std::size_t buffers = 0;          ///< number of buffers held
  std::size_t allocations = 0;      ///< buffers ever allocated (each one pre-touched once)
  std::size_t reuses = 0;           ///< acquires served by a free buffer
};

class buffer_pool {
 public:
  explicit buffer_pool(buffer_pool_options options);
  ~buffer_pool();
  buffer_pool(const buffer_pool&) = delete;
  buffer_pool& operator=(const buffer_pool&) = delete;

  /// A buffer of at least `bytes` bytes (bytes > 0). In order of preference:
  /// 1. a free buffer of the request's size class;
  /// 2. a new buffer of that class, if the cap allows it;
  /// 3. the smallest free buffer of a larger class;
  /// 4. a new buffer after freeing unleased buffers of other classes, smallest first;
  /// otherwise errc::invalid_argument naming the request, the cap and what is leased.
  result<buffer_lease> acquire(std::size_t bytes);

  /// The size class of a request: the next power of two (at least one page), or the
  /// page-rounded fusion threshold when that is smaller and still fits the request.
  std::size_t size_class(std::size_t bytes) const;

  buffer_pool_stats stats() const;
  const buffer_pool_options& options() const;

 private:
  std::shared_ptr<buffer_lease::shared_state> state_;
};

}  // namespace chorus
