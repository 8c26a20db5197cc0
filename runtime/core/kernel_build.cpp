#include "runtime/core/kernel_build.hpp"

#include <atomic>

namespace chorus {
namespace {
std::atomic<bool> g_portable{false};
}  // namespace

void force_portable_kernels(bool on) { g_portable.store(on, std::memory_order_relaxed); }
bool portable_kernels_forced() { return g_portable.load(std::memory_order_relaxed); }

}  // namespace chorus
