// Work completion: the base class's state and condition variable, then the future.
#include "c10d/work.hpp"

#include <stdexcept>

namespace chorus::python {

chorus_work::chorus_work(int rank, ::c10d::OpType type, std::vector<at::Tensor> outputs)
    : ::c10d::Work(rank, type), outputs_(std::move(outputs)),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {}

void chorus_work::complete(const status& st, int source) {
  {
    std::lock_guard lk(mutex_);
    source_ = source;
  }
  if (st.ok()) {
    finish();
    future_->markCompleted(c10::IValue(outputs_));
  } else {
    auto e = std::make_exception_ptr(std::runtime_error(st.message()));
    finish(e);
    future_->setError(e);
  }
}

int chorus_work::sourceRank() const {
  std::lock_guard lk(mutex_);
  if (!completed_) throw std::runtime_error("sourceRank(): the receive has not ended yet; wait() first");
  if (source_ < 0) throw std::runtime_error("sourceRank(): this work is not a receive that ended with a sender");
  return source_;
}

}  // namespace chorus::python
