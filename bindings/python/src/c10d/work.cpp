// Work completion: the base class's state and condition variable, then the future.
#include "c10d/work.hpp"

#include <stdexcept>

namespace chorus::python {

chorus_work::chorus_work(int rank, ::c10d::OpType type, std::vector<at::Tensor> outputs)
    : ::c10d::Work(rank, type), outputs_(std::move(outputs)) {}

void chorus_work::complete(const status& st, int source) {
  {
    std::lock_guard lk(mutex_);
    source_ = source;
  }
  finish(st.ok() ? nullptr : std::make_exception_ptr(std::runtime_error(st.message())));
  c10::intrusive_ptr<c10::ivalue::Future> f;
  {
    std::lock_guard lk(mutex_);
    if (future_ && !future_marked_) {  // null: nobody asked yet; getFuture() marks it when made
      future_marked_ = true;
      f = future_;
    }
  }
  if (f) mark(f);
}

void chorus_work::mark(const c10::intrusive_ptr<c10::ivalue::Future>& f) const {
  std::exception_ptr e;
  {
    std::lock_guard lk(mutex_);
    e = exception_;
  }
  if (e)
    f->setError(e);
  else
    f->markCompleted(c10::IValue(outputs_));
}

c10::intrusive_ptr<c10::ivalue::Future> chorus_work::getFuture() {
  static const auto type = c10::ListType::create(c10::TensorType::get());
  c10::intrusive_ptr<c10::ivalue::Future> f;
  bool ended = false;
  {
    std::lock_guard lk(mutex_);
    if (future_) return future_;
    future_ = c10::make_intrusive<c10::ivalue::Future>(type);
    f = future_;
    ended = completed_;
    future_marked_ = ended;
  }
  // Ended before: complete() found no future (or will find it marked), so it is marked here. Not
  // ended: complete() will mark it (it looks after finish(), under the same lock).
  if (ended) mark(f);
  return f;
}

int chorus_work::sourceRank() const {
  std::lock_guard lk(mutex_);
  if (!completed_) throw std::runtime_error("sourceRank(): the receive has not ended yet; wait() first");
  if (source_ < 0) throw std::runtime_error("sourceRank(): this work is not a receive that ended with a sender");
  return source_;
}

}  // namespace chorus::python
