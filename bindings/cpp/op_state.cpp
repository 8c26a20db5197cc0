// Completion of one operation: first outcome wins, waiters wake, the callback runs once.
#include "bindings/cpp/op_state.hpp"

#include <exception>

#include "runtime/core/log.hpp"

namespace chorus::detail {
namespace {

thread_local int callback_depth = 0;

struct callback_scope {
  callback_scope() { ++callback_depth; }
  ~callback_scope() { --callback_depth; }
};

}  // namespace

bool in_callback() { return callback_depth > 0; }

status check_wait_allowed(const op_state& s, bool may_block, const char* fn) {
  if (!may_block || !in_callback()) return {};
  return {errc::invalid_argument, std::string(fn) + "(" + s.label +
                                      "): called from a completion callback, which runs on the thread that completes "
                                      "operations: the wait could never end; poll instead, or wait from your own thread"};
}

op_state::op_state(tensor_spec s, callback on_done, std::string l)
    : spec(std::move(s)),
      label(l.empty() ? describe(spec) : std::move(l)),
      pending_status(errc::timeout, label + " is still pending"),
      on_done_(std::move(on_done)) {}

bool op_state::complete(status st, std::vector<std::byte> g, std::vector<int64_t> dims) {
  callback cb;
  {
    std::lock_guard lk(mu_);
    if (done_.load(std::memory_order_relaxed)) return false;
    result = std::move(st);
    const bool rows_received = spec.kind == collective_kind::allgather || spec.kind == collective_kind::alltoall;
    if (result.ok() && rows_received) {
      gathered = std::move(g);
      first_dims = std::move(dims);
      int64_t rows = 0;
      for (auto d : first_dims) rows += d;
      shape = spec.shape;
      if (!shape.empty()) shape[0] = rows;
    }
    // Allreduce and reducescatter with the NaN/Inf check in skip mode: the ranks that held
    // NaN/Inf (handle::nonfinite_ranks).
    if (result.ok() && !rows_received) first_dims = std::move(dims);
    if (!result.ok() && spec.kind == collective_kind::reducescatter) {
      gathered = {};
      shape = {};
    }
    cb = std::move(on_done_);
    done_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
  if (cb) {
    callback_scope scope;
    try {
      cb(*this);
    } catch (const std::exception& e) {
      CHORUS_LOG(error, "api", "completion callback of " << label << " threw: " << e.what());
    } catch (...) {
      CHORUS_LOG(error, "api", "completion callback of " << label << " threw a non-exception");
    }
  }
  return true;
}

bool op_state::wait_for(std::chrono::milliseconds timeout) {
  if (done()) return true;
  std::unique_lock lk(mu_);
  auto is_done = [this] { return done_.load(std::memory_order_acquire); };
  if (timeout >= std::chrono::hours(24 * 365 * 100)) {
    cv_.wait(lk, is_done);
    return true;
  }
  if (timeout.count() < 0) timeout = std::chrono::milliseconds(0);
  return cv_.wait_for(lk, timeout, is_done);
}

}  // namespace chorus::detail
