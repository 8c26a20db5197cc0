// torch.distributed's collectives on an ordered group: argument checks, contiguous stand-ins,
// scratch buffers for the list forms, and the copies back when a call ends.
#include "c10d/calls.hpp"

#include <cstring>
#include <stdexcept>

#include "c10d/work.hpp"
#include "runtime/collectives/reduce.hpp"

namespace chorus::python {

namespace {

using ::c10d::OpType;
using work_ptr = c10d_calls::work_ptr;

[[noreturn]] void refuse(const std::string& call, const std::string& why) {
  throw std::runtime_error("c10d." + call + " on the Chorus backend: " + why);
}

std::string describe(const at::Tensor& t) {
  std::string out = c10::toString(t.scalar_type());
  out += "[";
  for (int64_t i = 0; i < t.dim(); ++i) out += (i ? ", " : "") + std::to_string(t.size(i));
  return out + "]";
}

std::string describe(const std::vector<at::Tensor>& ts) {
  if (ts.size() == 1) return describe(ts[0]);
  std::string out = std::to_string(ts.size()) + " tensors";
  if (!ts.empty()) out += ", the first " + describe(ts[0]);
  return out;
}

/// Chorus's element type for a torch dtype; complex types count as pairs of their real type.
dtype element_type(const std::string& call, at::ScalarType s) {
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
std::size_t elements(const at::Tensor& t) {
  return static_cast<std::size_t>(t.numel()) * (t.is_complex() ? 2 : 1);
}

std::size_t bytes_of(const at::Tensor& t) { return static_cast<std::size_t>(t.numel()) * t.element_size(); }

void check_tensor(const std::string& call, const at::Tensor& t) {
  if (!t.defined()) refuse(call, "an undefined tensor");
  if (t.layout() != at::kStrided) refuse(call, "sparse tensors are not supported; pass a dense tensor");
  if (!t.device().is_cpu())
    refuse(call, "tensor on " + t.device().str() + ": the Chorus backend runs CPU tensors (use the NCCL backend for "
                 "CUDA tensors, or copy them to the CPU)");
  (void)element_type(call, t.scalar_type());
}

/// Every tensor of `ts` checked, all of the first one's dtype and shape.
void check_alike(const std::string& call, const std::vector<at::Tensor>& ts) {
  if (ts.empty()) refuse(call, "no tensors given");
  for (const auto& t : ts) {
    check_tensor(call, t);
    if (t.scalar_type() != ts[0].scalar_type() || t.sizes() != ts[0].sizes())
      refuse(call, "tensors of one call must have one dtype and shape: " + describe(ts[0]) + " and " + describe(t));
  }
}

void check_one(const std::string& call, const std::vector<at::Tensor>& ts) {
  if (ts.size() != 1)
    refuse(call, std::to_string(ts.size()) + " tensors (the multi-device form): the Chorus backend takes one per call");
  check_tensor(call, ts[0]);
}

reduce_op reduction(const std::string& call, const ::c10d::ReduceOp& r, const at::Tensor& t) {
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

void check_root(const std::string& call, int64_t root, int size) {
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
void copy_out(const at::Tensor& src, std::byte* dst) {
  const at::Tensor c = src.contiguous();
  if (c.numel()) std::memcpy(dst, c.data_ptr(), bytes_of(c));
}
void copy_in(const at::Tensor& dst, const std::byte* src) {
  if (dst.is_contiguous()) {
    if (dst.numel()) std::memcpy(dst.data_ptr(), src, bytes_of(dst));
    return;
  }
  at::Tensor c = at::empty_like(dst, at::MemoryFormat::Contiguous);
  if (c.numel()) std::memcpy(c.data_ptr(), src, bytes_of(c));
  dst.copy_(c);
}

at::Tensor scratch_bytes(std::size_t n) {
  return at::empty({static_cast<int64_t>(std::max<std::size_t>(n, 1))}, at::TensorOptions().dtype(at::kByte));
}
std::byte* bytes_ptr(const at::Tensor& t) { return static_cast<std::byte*>(t.data_ptr()); }

c10::intrusive_ptr<chorus_work> make_work(int rank, OpType type, std::vector<at::Tensor> outputs) {
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
ordered::ordered_group::done_fn plain_ender(const c10::intrusive_ptr<chorus_work>& work) {
  chorus_work* raw = c10::intrusive_ptr<chorus_work>(work).release();
  return [raw](const status& st) { c10::intrusive_ptr<chorus_work>::reclaim(raw)->complete(st); };
}

std::span<const int64_t> sizes_of(const at::Tensor& t) { return {t.sizes().data(), t.sizes().size()}; }
uint64_t code_of(const at::Tensor& t) { return static_cast<uint64_t>(t.scalar_type()); }

}  // namespace

c10d_calls::~c10d_calls() = default;

work_ptr c10d_calls::allreduce(std::vector<at::Tensor>& tensors, const ::c10d::AllreduceOptions& opts) {
  const std::string call = "all_reduce";
  check_alike(call, tensors);
  const at::Tensor& first = tensors[0];
  const dtype t = element_type(call, first.scalar_type());
  const reduce_op op = reduction(call, opts.reduceOp, first);
  ordered::call_info info{call, describe(tensors),
                          ordered::spec_digest({1, code_of(first), static_cast<uint64_t>(op), tensors.size()},
                                               sizes_of(first))};
  auto work = make_work(rank(), OpType::ALLREDUCE, tensors);
  const std::size_t count = elements(first);
  if (tensors.size() == 1) {
    if (first.is_contiguous()) {
      group_->allreduce(info, first.data_ptr(), count, t, op, plain_ender(work));
      return work;
    }
    stand_in b(first);
    group_->allreduce(info, b.data(), count, t, op, ender(work, [b] { b.finish(); }));
    return work;
  }
  // Several tensors (the multi-device form): reduced here first, then across the group; every
  // tensor gets the result. An average divides by every contribution.
  at::Tensor acc = first.contiguous().clone();
  const reduce_op local = op == reduce_op::average ? reduce_op::sum : op;
  for (std::size_t i = 1; i < tensors.size(); ++i)
    reduce_into(acc.data_ptr(), tensors[i].contiguous().data_ptr(), count, t, local);
  const int divisor = op == reduce_op::average ? size() * static_cast<int>(tensors.size()) : 0;
  group_->allreduce(info, acc.data_ptr(), count, t, local, ender(work, [acc, tensors, count, t, divisor] {
                      if (divisor) divide_by(acc.data_ptr(), count, t, divisor);
                      for (const auto& x : tensors) x.copy_(acc);
                    }));
  return work;
}

work_ptr c10d_calls::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                         const ::c10d::AllreduceCoalescedOptions& opts) {
  const std::string call = "all_reduce_coalesced";
  if (tensors.empty()) refuse(call, "no tensors given");
  std::vector<int64_t> shapes;
  for (const auto& x : tensors) {
    check_tensor(call, x);
    if (x.scalar_type() != tensors[0].scalar_type())
      refuse(call, "tensors of one call must have one dtype: " + describe(tensors[0]) + " and " + describe(x));
    shapes.push_back(x.dim());
    for (auto d : x.sizes()) shapes.push_back(d);
  }
  const dtype t = element_type(call, tensors[0].scalar_type());
  const reduce_op op = reduction(call, opts.reduceOp, tensors[0]);
  std::size_t total = 0;
  for (const auto& x : tensors) total += bytes_of(x);
  at::Tensor flat = scratch_bytes(total);
  std::size_t at = 0;
  for (const auto& x : tensors) {
    copy_out(x, bytes_ptr(flat) + at);
    at += bytes_of(x);
  }
  ordered::call_info info{call, describe(tensors),
                          ordered::spec_digest({2, code_of(tensors[0]), static_cast<uint64_t>(op)}, shapes)};
  auto work = make_work(rank(), OpType::ALLREDUCE_COALESCED, tensors);
  group_->allreduce(info, flat.data_ptr(), total / size_of(t), t, op, ender(work, [flat, tensors] {
                      std::size_t at = 0;
                      for (const auto& x : tensors) {
                        copy_in(x, bytes_ptr(flat) + at);
                        at += bytes_of(x);
                      }
                    }));
  return work;
}

work_ptr c10d_calls::reduce(std::vector<at::Tensor>& tensors, const ::c10d::ReduceOptions& opts) {
  const std::string call = "reduce";
  check_one(call, tensors);
  check_root(call, opts.rootRank, size());
  const at::Tensor& x = tensors[0];
  const dtype t = element_type(call, x.scalar_type());
  const reduce_op op = reduction(call, opts.reduceOp, x);
  // Every member ends with the result (the root's is the one torch specifies).
  ordered::call_info info{call, describe(x),
                          ordered::spec_digest({3, code_of(x), static_cast<uint64_t>(op),
                                                static_cast<uint64_t>(opts.rootRank)},
                                               sizes_of(x))};
  auto work = make_work(rank(), OpType::REDUCE, tensors);
  stand_in b(x);
  group_->allreduce(info, b.data(), elements(x), t, op, ender(work, [b] { b.finish(); }));
  return work;
}

work_ptr c10d_calls::broadcast(std::vector<at::Tensor>& tensors, const ::c10d::BroadcastOptions& opts) {
  const std::string call = "broadcast";
  check_alike(call, tensors);
  check_root(call, opts.rootRank, size());
  if (opts.rootTensor < 0 || opts.rootTensor >= static_cast<int64_t>(tensors.size()))
    refuse(call, "root tensor " + std::to_string(opts.rootTensor) + " of " + std::to_string(tensors.size()));
  const at::Tensor& x = tensors[static_cast<std::size_t>(opts.rootTensor)];
  const dtype t = element_type(call, x.scalar_type());
  ordered::call_info info{call, describe(tensors),
                          ordered::spec_digest({4, code_of(x), static_cast<uint64_t>(opts.rootRank)}, sizes_of(x))};
  auto work = make_work(rank(), OpType::BROADCAST, tensors);
  stand_in b(x);
  group_->broadcast(info, b.data(), elements(x), t, static_cast<int>(opts.rootRank), ender(work, [b, tensors] {
                      b.finish();
                      for (const auto& y : tensors)
                        if (!y.is_same(b.user)) y.copy_(b.flat);
                    }));
  return work;
}

work_ptr c10d_calls::allgather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs) {
  const std::string call = "all_gather";
  check_one(call, inputs);
  const at::Tensor& x = inputs[0];
  if (outputs.size() != 1 || outputs[0].size() != static_cast<std::size_t>(size()))
    refuse(call, "needs one output list of " + std::to_string(size()) + " tensors (one per rank)");
  for (const auto& y : outputs[0]) {
    check_tensor(call, y);
    if (y.scalar_type() != x.scalar_type() || y.numel() != x.numel())
      refuse(call, "output " + describe(y) + " does not match the input " + describe(x));
  }
  const std::size_t n = bytes_of(x);
  ordered::call_info info{call, describe(x), ordered::spec_digest({5, code_of(x)}, sizes_of(x))};
  auto work = make_work(rank(), OpType::ALLGATHER, outputs[0]);
  at::Tensor in = x.contiguous();
  at::Tensor out = scratch_bytes(n * static_cast<std::size_t>(size()));
  group_->allgather(info, in.data_ptr(), out.data_ptr(), std::vector<std::size_t>(static_cast<std::size_t>(size()), n),
                    dtype::u8, ender(work, [in, out, list = outputs[0], n] {
                      for (std::size_t r = 0; r < list.size(); ++r) copy_in(list[r], bytes_ptr(out) + r * n);
                    }));
  return work;
}

work_ptr c10d_calls::allgather_base(at::Tensor& output, at::Tensor& input) {
  const std::string call = "all_gather_into_tensor";
  check_tensor(call, input);
  check_tensor(call, output);
  if (output.scalar_type() != input.scalar_type() || output.numel() != input.numel() * size())
    refuse(call, "output " + describe(output) + " must hold " + std::to_string(size()) + " times the input " +
                     describe(input));
  const std::size_t n = bytes_of(input);
  ordered::call_info info{call, describe(input), ordered::spec_digest({5, code_of(input)}, sizes_of(input))};
  auto work = make_work(rank(), OpType::_ALLGATHER_BASE, {output});
  at::Tensor in = input.contiguous();
  stand_in out(output);
  group_->allgather(info, in.data_ptr(), out.data(), std::vector<std::size_t>(static_cast<std::size_t>(size()), n),
                    dtype::u8, ender(work, [in, out] { out.finish(); }));
  return work;
}

work_ptr c10d_calls::allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                         std::vector<at::Tensor>& inputs) {
  const std::string call = "all_gather_coalesced";
  if (inputs.empty()) refuse(call, "no tensors given");
  if (outputs.size() != static_cast<std::size_t>(size()))
    refuse(call, "needs one output list per rank (" + std::to_string(size()) + "), got " +
                     std::to_string(outputs.size()));
  std::vector<int64_t> shapes;
  std::size_t total = 0;
  for (const auto& x : inputs) {
    check_tensor(call, x);
    shapes.push_back(static_cast<int64_t>(x.scalar_type()));
    shapes.push_back(x.dim());
    for (auto d : x.sizes()) shapes.push_back(d);
    total += bytes_of(x);
  }
  for (const auto& list : outputs) {
    if (list.size() != inputs.size())
      refuse(call, "each rank's output list needs " + std::to_string(inputs.size()) + " tensors, like the input");
    for (std::size_t j = 0; j < list.size(); ++j)
      if (list[j].scalar_type() != inputs[j].scalar_type() || list[j].numel() != inputs[j].numel())
        refuse(call, "output " + describe(list[j]) + " does not match the input " + describe(inputs[j]));
  }
  at::Tensor in = scratch_bytes(total);
  std::size_t at = 0;
  for (const auto& x : inputs) {
    copy_out(x, bytes_ptr(in) + at);
    at += bytes_of(x);
  }
  at::Tensor out = scratch_bytes(total * static_cast<std::size_t>(size()));
  ordered::call_info info{call, describe(inputs), ordered::spec_digest({6}, shapes)};
  std::vector<at::Tensor> flat_outputs;
  for (const auto& list : outputs) flat_outputs.insert(flat_outputs.end(), list.begin(), list.end());
  auto work = make_work(rank(), OpType::ALLGATHER_COALESCED, flat_outputs);
  group_->allgather(info, in.data_ptr(), out.data_ptr(),
                    std::vector<std::size_t>(static_cast<std::size_t>(size()), total), dtype::u8,
                    ender(work, [in, out, outputs, total] {
                      for (std::size_t r = 0; r < outputs.size(); ++r) {
                        std::size_t at = r * total;
                        for (const auto& y : outputs[r]) {
                          copy_in(y, bytes_ptr(out) + at);
                          at += bytes_of(y);
                        }
                      }
                    }));
  return work;
}

work_ptr c10d_calls::gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                            const ::c10d::GatherOptions& opts) {
  const std::string call = "gather";
  check_one(call, inputs);
  check_root(call, opts.rootRank, size());
  const at::Tensor& x = inputs[0];
  const int root = static_cast<int>(opts.rootRank);
  const bool am_root = rank() == root;
  if (am_root) {
    if (outputs.size() != 1 || outputs[0].size() != static_cast<std::size_t>(size()))
      refuse(call, "the root needs one output list of " + std::to_string(size()) + " tensors");
    for (const auto& y : outputs[0]) {
      check_tensor(call, y);
      if (y.scalar_type() != x.scalar_type() || y.numel() != x.numel())
        refuse(call, "output " + describe(y) + " does not match the input " + describe(x));
    }
  } else if (!outputs.empty()) {
    refuse(call, "only the root (rank " + std::to_string(root) + ") takes output tensors");
  }
  const std::size_t n = bytes_of(x);
  const auto N = static_cast<std::size_t>(size());
  std::vector<std::size_t> send(N, 0), recv(N, 0);
  send[static_cast<std::size_t>(root)] = n;
  if (am_root) recv.assign(N, n);
  ordered::call_info info{call, describe(x),
                          ordered::spec_digest({7, code_of(x), static_cast<uint64_t>(root)}, sizes_of(x))};
  auto work = make_work(rank(), OpType::GATHER, am_root ? outputs[0] : std::vector<at::Tensor>{});
  at::Tensor in = x.contiguous();
  at::Tensor out = scratch_bytes(am_root ? n * N : 0);
  std::vector<at::Tensor> list = am_root ? outputs[0] : std::vector<at::Tensor>{};
  group_->alltoall(info, in.data_ptr(), send, out.data_ptr(), recv, dtype::u8, ender(work, [in, out, list, n] {
                     for (std::size_t r = 0; r < list.size(); ++r) copy_in(list[r], bytes_ptr(out) + r * n);
                   }));
  return work;
}

work_ptr c10d_calls::scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                             const ::c10d::ScatterOptions& opts) {
  const std::string call = "scatter";
  check_one(call, outputs);
  check_root(call, opts.rootRank, size());
  const at::Tensor& y = outputs[0];
  const int root = static_cast<int>(opts.rootRank);
  const bool am_root = rank() == root;
  const auto N = static_cast<std::size_t>(size());
  const std::size_t n = bytes_of(y);
  if (am_root) {
    if (inputs.size() != 1 || inputs[0].size() != N)
      refuse(call, "the root needs one input list of " + std::to_string(size()) + " tensors");
    for (const auto& x : inputs[0]) {
      check_tensor(call, x);
      if (x.scalar_type() != y.scalar_type() || x.numel() != y.numel())
        refuse(call, "input " + describe(x) + " does not match the output " + describe(y));
    }
  } else if (!inputs.empty()) {
    refuse(call, "only the root (rank " + std::to_string(root) + ") takes input tensors");
  }
  std::vector<std::size_t> send(N, 0), recv(N, 0);
  recv[static_cast<std::size_t>(root)] = n;
  at::Tensor in = scratch_bytes(am_root ? n * N : 0);
  if (am_root) {
    send.assign(N, n);
    for (std::size_t r = 0; r < N; ++r) copy_out(inputs[0][r], bytes_ptr(in) + r * n);
  }
  ordered::call_info info{call, describe(y),
                          ordered::spec_digest({8, code_of(y), static_cast<uint64_t>(root)}, sizes_of(y))};
  auto work = make_work(rank(), OpType::SCATTER, outputs);
  stand_in out(y);
  group_->alltoall(info, in.data_ptr(), send, out.data(), recv, dtype::u8, ender(work, [in, out] { out.finish(); }));
  return work;
}

work_ptr c10d_calls::reduce_scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                    const ::c10d::ReduceScatterOptions& opts) {
  const std::string call = "reduce_scatter";
  check_one(call, outputs);
  const at::Tensor& y = outputs[0];
  const auto N = static_cast<std::size_t>(size());
  if (inputs.size() != 1 || inputs[0].size() != N)
    refuse(call, "needs one input list of " + std::to_string(size()) + " tensors (one per rank)");
  for (const auto& x : inputs[0]) {
    check_tensor(call, x);
    if (x.scalar_type() != y.scalar_type() || x.numel() != y.numel())
      refuse(call, "input " + describe(x) + " does not match the output " + describe(y));
  }
  const dtype t = element_type(call, y.scalar_type());
  const reduce_op op = reduction(call, opts.reduceOp, y);
  const std::size_t n = bytes_of(y);
  at::Tensor buf = scratch_bytes(n * N);
  for (std::size_t r = 0; r < N; ++r) copy_out(inputs[0][r], bytes_ptr(buf) + r * n);
  ordered::call_info info{call, describe(y),
                          ordered::spec_digest({9, code_of(y), static_cast<uint64_t>(op)}, sizes_of(y))};
  auto work = make_work(rank(), OpType::REDUCE_SCATTER, outputs);
  group_->reducescatter(info, buf.data_ptr(), std::vector<std::size_t>(N, elements(y)), t, op,
                        ender(work, [buf, y, n, me = static_cast<std::size_t>(rank())] {
                          copy_in(y, bytes_ptr(buf) + me * n);
                        }));
  return work;
}

work_ptr c10d_calls::reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                         const ::c10d::ReduceScatterOptions& opts) {
  const std::string call = "reduce_scatter_tensor";
  check_tensor(call, input);
  check_tensor(call, output);
  const auto N = static_cast<std::size_t>(size());
  if (output.scalar_type() != input.scalar_type() || input.numel() != output.numel() * size())
    refuse(call, "input " + describe(input) + " must hold " + std::to_string(size()) + " times the output " +
                     describe(output));
  const dtype t = element_type(call, output.scalar_type());
  const reduce_op op = reduction(call, opts.reduceOp, output);
  const std::size_t n = bytes_of(output);
  at::Tensor buf = scratch_bytes(n * N);
  copy_out(input, bytes_ptr(buf));
  ordered::call_info info{call, describe(output),
                          ordered::spec_digest({9, code_of(output), static_cast<uint64_t>(op), static_cast<uint64_t>(output.numel())})};
  auto work = make_work(rank(), OpType::_REDUCE_SCATTER_BASE, {output});
  group_->reducescatter(info, buf.data_ptr(), std::vector<std::size_t>(N, elements(output)), t, op,
                        ender(work, [buf, output, n, me = static_cast<std::size_t>(rank())] {
                          copy_in(output, bytes_ptr(buf) + me * n);
                        }));
  return work;
}

work_ptr c10d_calls::alltoall_base(at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_splits,
                                   std::vector<int64_t>& input_splits) {
  const std::string call = "all_to_all_single";
  check_tensor(call, input);
  check_tensor(call, output);
  if (output.scalar_type() != input.scalar_type())
    refuse(call, "output " + describe(output) + " and input " + describe(input) + " differ in dtype");
  const auto N = static_cast<std::size_t>(size());
  // Rows of dim 0, each of `row` bytes; equal splits when none are given.
  auto counts = [&](const at::Tensor& t, const std::vector<int64_t>& splits, const char* which) {
    const int64_t rows = t.dim() ? t.size(0) : 1;
    const std::size_t row = rows ? bytes_of(t) / static_cast<std::size_t>(rows) : 0;
    std::vector<std::size_t> out(N, 0);
    if (splits.empty()) {
      if (rows % size() != 0)
        refuse(call, std::string(which) + " " + describe(t) + ": dim 0 does not split evenly over " +
                         std::to_string(size()) + " ranks; give split sizes");
      for (auto& c : out) c = static_cast<std::size_t>(rows / size()) * row;
      return out;
    }
    if (splits.size() != N) refuse(call, std::string(which) + " split sizes need " + std::to_string(N) + " entries");
    int64_t sum = 0;
    for (std::size_t i = 0; i < N; ++i) {
      if (splits[i] < 0) refuse(call, std::string(which) + " split sizes must not be negative");
      sum += splits[i];
      out[i] = static_cast<std::size_t>(splits[i]) * row;
    }
    if (sum != rows)
      refuse(call, std::string(which) + " split sizes sum to " + std::to_string(sum) + ", but dim 0 of " +
                       describe(t) + " is " + std::to_string(rows));
    return out;
  };
  auto send = counts(input, input_splits, "input");
  auto recv = counts(output, output_splits, "output");
  std::vector<int64_t> row_shape = input.sizes().vec();
  if (!row_shape.empty()) row_shape.erase(row_shape.begin());
  ordered::call_info info{call, describe(input), ordered::spec_digest({10, code_of(input)}, row_shape)};
  auto work = make_work(rank(), OpType::ALLTOALL_BASE, {output});
  at::Tensor in = input.contiguous();
  stand_in out(output);
  group_->alltoall(info, in.data_ptr(), send, out.data(), recv, dtype::u8, ender(work, [in, out] { out.finish(); }));
  return work;
}

work_ptr c10d_calls::alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs) {
  const std::string call = "all_to_all";
  const auto N = static_cast<std::size_t>(size());
  if (inputs.size() != N || outputs.size() != N)
    refuse(call, "needs " + std::to_string(N) + " input and output tensors (one per rank), got " +
                     std::to_string(inputs.size()) + " and " + std::to_string(outputs.size()));
  std::vector<std::size_t> send(N), recv(N);
  std::size_t in_total = 0, out_total = 0;
  for (std::size_t i = 0; i < N; ++i) {
    check_tensor(call, inputs[i]);
    check_tensor(call, outputs[i]);
    if (inputs[i].scalar_type() != inputs[0].scalar_type() || outputs[i].scalar_type() != inputs[0].scalar_type())
      refuse(call, "every tensor of one call needs one dtype: " + describe(inputs[0]) + ", " + describe(inputs[i]) +
                       ", " + describe(outputs[i]));
    send[i] = bytes_of(inputs[i]);
    recv[i] = bytes_of(outputs[i]);
    in_total += send[i];
    out_total += recv[i];
  }
  if (send[static_cast<std::size_t>(rank())] != recv[static_cast<std::size_t>(rank())])
    refuse(call, "the input for this rank itself (" + describe(inputs[static_cast<std::size_t>(rank())]) +
                     ") and its output (" + describe(outputs[static_cast<std::size_t>(rank())]) + ") differ in size");
  at::Tensor in = scratch_bytes(in_total), out = scratch_bytes(out_total);
  std::size_t at = 0;
  for (std::size_t i = 0; i < N; ++i) {
    copy_out(inputs[i], bytes_ptr(in) + at);
    at += send[i];
  }
  ordered::call_info info{call, describe(inputs), ordered::spec_digest({11, code_of(inputs[0])})};
  auto work = make_work(rank(), OpType::ALLTOALL, outputs);
  group_->alltoall(info, in.data_ptr(), send, out.data_ptr(), recv, dtype::u8,
                   ender(work, [in, out, outputs] {
                     std::size_t at = 0;
                     for (const auto& y : outputs) {
                       copy_in(y, bytes_ptr(out) + at);
                       at += bytes_of(y);
                     }
                   }));
  return work;
}

work_ptr c10d_calls::barrier() {
  ordered::call_info info{"barrier", "", ordered::spec_digest({12})};
  auto work = make_work(rank(), OpType::BARRIER, {});
  group_->barrier(info, [work](const status& st) { work->complete(st); });
  return work;
}

work_ptr c10d_calls::send(std::vector<at::Tensor>& tensors, int dst, int tag) {
  const std::string call = "send";
  check_one(call, tensors);
  const at::Tensor& x = tensors[0];
  ordered::call_info info{call, describe(x) + " to rank " + std::to_string(dst) + " tag " + std::to_string(tag), 0};
  auto work = make_work(rank(), OpType::SEND, tensors);
  at::Tensor in = x.contiguous();
  group_->send(info, in.data_ptr(), bytes_of(in), dst, tag, ender(work, [in] {}));
  return work;
}

work_ptr c10d_calls::recv(std::vector<at::Tensor>& tensors, int src, int tag) {
  const std::string call = "recv";
  check_one(call, tensors);
  const at::Tensor& y = tensors[0];
  ordered::call_info info{call, describe(y) + (src < 0 ? std::string(" from any rank") : " from rank " + std::to_string(src)) +
                                    " tag " + std::to_string(tag),
                          0};
  auto work = make_work(rank(), src < 0 ? OpType::RECVANYSOURCE : OpType::RECV, tensors);
  stand_in out(y);
  group_->recv(info, out.data(), bytes_of(y), src, tag, [work, out](const status& st, int source) {
    status result = st;
    if (st.ok()) {
      try {
        out.finish();
      } catch (const std::exception& e) {
        result = status{errc::internal, std::string("copying the result back failed: ") + e.what()};
      }
    }
    work->complete(result, source);
  });
  return work;
}

}  // namespace chorus::python
