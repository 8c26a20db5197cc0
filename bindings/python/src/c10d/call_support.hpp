// What every c10d call (calls.hpp) shares: argument checks that raise naming the call, contiguous
// stand-ins and scratch bytes for the tensors, and the end functions that copy results back.
// Internal to calls*.cpp.
#pragma once

#include <cstring>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "c10d/calls.hpp"
#include "c10d/work.hpp"

namespace chorus::python::call_support {

using ::c10d::OpType;
using work_ptr = c10d_calls::work_ptr;

[[noreturn]] inline void refuse(const std::string& call, const std::string& why) {
  throw std::runtime_error("c10d." + call + " on the Chorus backend: " + why);
}

inline std::string describe(const at::Tensor& t) {
  std::string out = c10::toString(t.scalar_type());
  out += "[";
  for (int64_t i = 0; i < t.dim(); ++i) out += (i ? ", " : "") + std::to_string(t.size(i));
  return out + "]";
}

inline std::string describe(const std::vector<at::Tensor>& ts) {
  if (ts.size() == 1) return describe(ts[0]);
  std::string out = std::to_string(ts.size()) + " tensors";
  if (!ts.empty()) out += ", the first " + describe(ts[0]);
  return out;
}

/// Chorus's element type for a torch dtype; complex types count as pairs of their real type.
inline dtype element_type(const std::string& call, at::ScalarType s) {
  switch (s) {
    case at::kBool: return dtype::boolean;
    case at::kByte: return dtype::u8;
    case at::kChar: return dtype::i8;
    case at::kShort: return dtype::i16;
    case at::kInt: return dtype::i32;
    case at::kLong: return dtype::i64;
    case at::kHalf: return dtype::f16;
    case at::kBFloat16: return dtype::bf16;
    case at::kFloat:
    case at::kComplexFloat: return dtype::f32;
    case at::kDouble:
    case at::kComplexDouble: return dtype::f64;
    default: refuse(call, std::string("dtype ") + c10::toString(s) + " is not supported (bool, uint8, int8-int64, "
                                                                       "float16, bfloat16, float32, float64, complex)");
  }
}

/// Elements of Chorus's type in `t` (complex: two per element).
inline std::size_t elements(const at::Tensor& t) {
  return static_cast<std::size_t>(t.numel()) * (t.is_complex() ? 2 : 1);
}

inline std::size_t bytes_of(const at::Tensor& t) { return static_cast<std::size_t>(t.numel()) * t.element_size(); }

inline void check_tensor(const std::string& call, const at::Tensor& t) {
  if (!t.defined()) refuse(call, "an undefined tensor");
  if (t.layout() != at::kStrided) refuse(call, "sparse tensors are not supported; pass a dense tensor");
  if (!t.device().is_cpu())
    refuse(call, "tensor on " + t.device().str() + ": the Chorus backend runs CPU tensors (use the NCCL backend for "
                 "CUDA tensors, or copy them to the CPU)");
  (void)element_type(call, t.scalar_type());
}

/// Every tensor of `ts` checked, all of the first one's dtype and shape.
inline void check_alike(const std::string& call, const std::vector<at::Tensor>& ts) {
  if (ts.empty()) refuse(call, "no tensors given");
  for (const auto& t : ts) {
    check_tensor(call, t);
    if (t.scalar_type() != ts[0].scalar_type() || t.sizes() != ts[0].sizes())
      refuse(call, "tensors of one call must have one dtype and shape: " + describe(ts[0]) + " and " + describe(t));
  }
}

inline void check_one(const std::string& call, const std::vector<at::Tensor>& ts) {
  if (ts.size() != 1)
    refuse(call, std::to_string(ts.size()) + " tensors (the multi-device form): the Chorus backend takes one per call");
  check_tensor(call, ts[0]);
}

inline reduce_op reduction(const std::string& call, const ::c10d::ReduceOp& r, const at::Tensor& t) {
  const auto s = t.scalar_type();
  const bool integral = s == at::kBool || at::isIntegralType(s, /*includeBool=*/false);
  switch (r.op_) {
    case ::c10d::ReduceOp::SUM: return reduce_op::sum;
    case ::c10d::ReduceOp::AVG:
      if (s == at::kBool) refuse(call, "ReduceOp.AVG of a bool tensor is not defined; use SUM (or) or MIN (and)");
      return reduce_op::average;
    case ::c10d::ReduceOp::PRODUCT:
    case ::c10d::ReduceOp::MIN:
    case ::c10d::ReduceOp::MAX:
      if (t.is_complex()) refuse(call, "complex tensors reduce with SUM and AVG only");
      return r.op_ == ::c10d::ReduceOp::PRODUCT ? reduce_op::product
             : r.op_ == ::c10d::ReduceOp::MIN   ? reduce_op::min
                                                : reduce_op::max;
    case ::c10d::ReduceOp::BAND:
    case ::c10d::ReduceOp::BOR:
    case ::c10d::ReduceOp::BXOR:
      if (!integral)
        refuse(call, std::string("ReduceOp.") + (r.op_ == ::c10d::ReduceOp::BAND ? "BAND" : r.op_ == ::c10d::ReduceOp::BOR ? "BOR" : "BXOR") +
                         " needs an integer or bool tensor, not " + c10::toString(s));
      return r.op_ == ::c10d::ReduceOp::BAND ? reduce_op::band
             : r.op_ == ::c10d::ReduceOp::BOR ? reduce_op::bor
                                               : reduce_op::bxor;
    default:
      refuse(call, "ReduceOp " + std::to_string(static_cast<int>(r.op_)) +
                       " is not supported (SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR, BXOR; PREMUL_SUM is NCCL's)");
  }
}

inline void check_root(const std::string& call, int64_t root, int size) {
  if (root < 0 || root >= size)
    refuse(call, "root rank " + std::to_string(root) + " is not in the group (size " + std::to_string(size) + ")");
}

/// A contiguous stand-in for a caller's tensor: the tensor itself when it is contiguous, else a
/// copy, written back by finish().
struct stand_in {
  at::Tensor user, flat;
  explicit stand_in(const at::Tensor& t) : user(t), flat(t.is_contiguous() ? t : t.contiguous()) {}
  void* data() const { return flat.data_ptr(); }
  void finish() const {
    if (!flat.is_same(user)) user.copy_(flat);
  }
};

/// Copies the bytes of `src` (any strides) to `dst`, and back.
inline void copy_out(const at::Tensor& src, std::byte* dst) {
  const at::Tensor c = src.contiguous();
  if (c.numel()) std::memcpy(dst, c.data_ptr(), bytes_of(c));
}
inline void copy_in(const at::Tensor& dst, const std::byte* src) {
  if (dst.is_contiguous()) {
    if (dst.numel()) std::memcpy(dst.data_ptr(), src, bytes_of(dst));
    return;
  }
  at::Tensor c = at::empty_like(dst, at::MemoryFormat::Contiguous);
  if (c.numel()) std::memcpy(c.data_ptr(), src, bytes_of(c));
  dst.copy_(c);
}

inline at::Tensor scratch_bytes(std::size_t n) {
  return at::empty({static_cast<int64_t>(std::max<std::size_t>(n, 1))}, at::TensorOptions().dtype(at::kByte));
}
inline std::byte* bytes_ptr(const at::Tensor& t) { return static_cast<std::byte*>(t.data_ptr()); }

inline c10::intrusive_ptr<chorus_work> make_work(int rank, OpType type, std::vector<at::Tensor> outputs) {
  return c10::make_intrusive<chorus_work>(rank, type, std::move(outputs));
}

/// The end of a call: `after` (the copies back) when it succeeded, then the work.
template <class After>
auto ender(c10::intrusive_ptr<chorus_work> work, After after) {
  return [work = std::move(work), after = std::move(after)](const status& st) mutable {
    status out = st;
    if (st.ok()) {
      try {
        after();
      } catch (const std::exception& e) {
        out = status{errc::internal, std::string("copying the result back failed: ") + e.what()};
      }
    }
    work->complete(out);
  };
}

/// The end of a call with nothing to copy back. It holds a raw reference to the work, which fits
/// std::function's own storage (no allocation on the small calls' path); the group runs it
/// exactly once, which releases the reference.
inline ordered::ordered_group::done_fn plain_ender(const c10::intrusive_ptr<chorus_work>& work) {
  chorus_work* raw = c10::intrusive_ptr<chorus_work>(work).release();
  return [raw](const status& st) { c10::intrusive_ptr<chorus_work>::reclaim(raw)->complete(st); };
}

inline std::span<const int64_t> sizes_of(const at::Tensor& t) { return {t.sizes().data(), t.sizes().size()}; }
inline uint64_t code_of(const at::Tensor& t) { return static_cast<uint64_t>(t.scalar_type()); }

}  // namespace chorus::python::call_support
