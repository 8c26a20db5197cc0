// The fusion buffer pool (see buffer_pool.hpp). Free buffers sit in a multimap keyed by
// capacity. Allocation and pre-touch run outside the mutex: touching a 64 MiB buffer takes
// a few hundred milliseconds, and releases on other threads must not wait for it.
#include "runtime/fusion/buffer_pool.hpp"

#include <unistd.h>

#include <bit>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/core/log.hpp"

namespace chorus {

struct buffer_lease::shared_state {
  explicit shared_state(buffer_pool_options o) : options(o), page(static_cast<std::size_t>(::sysconf(_SC_PAGESIZE))) {}
  ~shared_state() {
    for (auto& [cap, ptr] : free_list) std::free(ptr);
  }

  const buffer_pool_options options;
  const std::size_t page;

  mutable std::mutex mu;
  std::multimap<std::size_t, std::byte*> free_list;  ///< capacity -> buffer
  std::size_t allocated = 0;   ///< held or being allocated, leased or free
  std::size_t free_bytes = 0;  ///< capacity sitting in free_list
  std::size_t buffers = 0;
  std::size_t allocations = 0;
  std::size_t reuses = 0;

  void release(std::byte* data, std::size_t capacity) {
    std::lock_guard lock(mu);
    free_list.emplace(capacity, data);
    free_bytes += capacity;
  }
};

namespace {

std::size_t round_up(std::size_t n, std::size_t a) { return (n + a - 1) / a * a; }

// Write one byte per page so the kernel backs every page now rather than on the hot path.
void touch_pages(std::byte* data, std::size_t bytes, std::size_t page) {
  volatile std::byte* p = data;
  for (std::size_t off = 0; off < bytes; off += page) p[off] = std::byte{0};
}

}  // namespace

buffer_lease::buffer_lease(buffer_lease&& other) noexcept
    : pool_(std::move(other.pool_)), data_(other.data_), size_(other.size_), capacity_(other.capacity_) {
  other.data_ = nullptr;
  other.size_ = other.capacity_ = 0;
}

buffer_lease& buffer_lease::operator=(buffer_lease&& other) noexcept {
  if (this != &other) {
    reset();
    pool_ = std::move(other.pool_);
    data_ = other.data_;
    size_ = other.size_;
    capacity_ = other.capacity_;
    other.data_ = nullptr;
    other.size_ = other.capacity_ = 0;
  }
  return *this;
}

buffer_lease::~buffer_lease() { reset(); }

void buffer_lease::reset() {
  if (data_ != nullptr) pool_->release(data_, capacity_);
  pool_.reset();
  data_ = nullptr;
  size_ = capacity_ = 0;
}

buffer_pool::buffer_pool(buffer_pool_options options)
    : state_(std::make_shared<buffer_lease::shared_state>(options)) {}

buffer_pool::~buffer_pool() = default;

const buffer_pool_options& buffer_pool::options() const { return state_->options; }

std::size_t buffer_pool::size_class(std::size_t bytes) const {
  const std::size_t page = state_->page;
  if (bytes > (std::size_t{1} << (sizeof(std::size_t) * 8 - 1))) return bytes;  // no power of two fits
  const std::size_t pow2 = std::bit_ceil(bytes < page ? page : bytes);
  const std::size_t threshold = round_up(state_->options.fusion_threshold, page);
  if (threshold > 0 && bytes <= threshold && threshold < pow2) return threshold;
  return pow2;
}

result<buffer_lease> buffer_pool::acquire(std::size_t bytes) {
  if (bytes == 0) return status{errc::invalid_argument, "fusion buffer pool: acquire(0) asks for no buffer"};
  auto& s = *state_;
  if (bytes > s.options.max_bytes) {
    return status{errc::invalid_argument, "fusion buffer pool: a buffer of " + std::to_string(bytes) +
                                              " bytes exceeds the pool cap of " + std::to_string(s.options.max_bytes) +
                                              " bytes; raise buffer_pool_options::max_bytes"};
  }
  const std::size_t cls = size_class(bytes);
  std::vector<std::byte*> to_free;
  {
    std::lock_guard lock(s.mu);
    auto take = [&](std::multimap<std::size_t, std::byte*>::iterator it) {
      buffer_lease lease{state_, it->second, bytes, it->first};
      s.free_bytes -= it->first;
      s.free_list.erase(it);
      ++s.reuses;
      return lease;
    };
    // 1. A free buffer of this class.
    if (auto it = s.free_list.find(cls); it != s.free_list.end()) return take(it);
    // 2. A new buffer, if the cap allows it.
    const std::size_t max = s.options.max_bytes;
    if (s.allocated + cls > max) {
      // 3. The smallest free buffer of a larger class.
      if (auto it = s.free_list.lower_bound(cls); it != s.free_list.end()) return take(it);
      // 4. Free unleased buffers of other classes, smallest first, until the new one fits.
      const std::size_t busy = s.allocated - s.free_bytes;
      if (busy + cls > max) {
        return status{errc::invalid_argument,
                      "fusion buffer pool: a buffer of " + std::to_string(bytes) + " bytes (size class " +
                          std::to_string(cls) + ") would exceed the pool cap of " + std::to_string(max) +
                          " bytes with " + std::to_string(busy) +
                          " bytes leased; raise buffer_pool_options::max_bytes, lower the fusion "
                          "threshold, or keep fewer buckets in flight"};
      }
      while (s.allocated + cls > max) {
        auto it = s.free_list.begin();
        to_free.push_back(it->second);
        s.allocated -= it->first;
        s.free_bytes -= it->first;
        --s.buffers;
        s.free_list.erase(it);
      }
    }
    s.allocated += cls;  // reserved now, so concurrent acquires respect the cap
    ++s.buffers;
  }
  for (std::byte* p : to_free) std::free(p);
  auto* data = static_cast<std::byte*>(std::aligned_alloc(s.page, cls));
  if (data == nullptr) {
    std::lock_guard lock(s.mu);
    s.allocated -= cls;
    --s.buffers;
    return status{errc::internal, "fusion buffer pool: the system refused " + std::to_string(cls) +
                                      " bytes of memory (request " + std::to_string(bytes) + " bytes)"};
  }
  if (s.options.pre_touch) touch_pages(data, cls, s.page);
  {
    std::lock_guard lock(s.mu);
    ++s.allocations;
  }
  CHORUS_LOG(debug, "fusion", "pool allocated bytes=" << cls << " request=" << bytes);
  return buffer_lease{state_, data, bytes, cls};
}

buffer_pool_stats buffer_pool::stats() const {
  const auto& s = *state_;
  std::lock_guard lock(s.mu);
  return {s.allocated, s.allocated - s.free_bytes, s.buffers, s.allocations, s.reuses};
}

}  // namespace chorus
