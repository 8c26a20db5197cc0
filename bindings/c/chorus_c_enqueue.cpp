// The C API's enqueue functions (chorus.h): each checks its arguments against the registered name,
// gives the operation a handle in the table (chorus_c_tables.hpp), then submits it to the session.
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "chorus/chorus.h"
#include "bindings/c/chorus_c_tables.hpp"
#include "bindings/cpp/api_checks.hpp"
#include "chorus/chorus.hpp"
#include "bindings/cpp/op_state.hpp"
#include "bindings/cpp/session.hpp"

namespace {

using chorus::c_api::fail;
using chorus::c_api::tab;
using chorus::detail::op_state;

/// The spec of an enqueue call on registered tensor `id`, or nullopt with last_error set.
/// `op` is checked for the reducing kinds only, `root` kept for broadcast only.
std::optional<chorus::tensor_spec> spec_of(const char* fn, chorus::collective_kind kind, int64_t id,
                                           const int64_t* shape, int ndim, int dtype, int op, int root) {
  chorus::tensor_spec spec;
  {
    std::lock_guard lk(tab().mu);
    if (id < 0 || id >= static_cast<int64_t>(tab().names.size()))
      return fail<std::optional<chorus::tensor_spec>>(std::nullopt,
                                                      std::string(fn) + ": tensor id " + std::to_string(id) +
                                                          " is not registered; get ids from chorus_register(name)");
    spec.name = tab().names[static_cast<std::size_t>(id)];
    spec.transient = tab().transient[static_cast<std::size_t>(id)];
    spec.process_set = tab().sets[static_cast<std::size_t>(id)];
    spec.priority = tab().priorities[static_cast<std::size_t>(id)];
  }
  spec.kind = kind;
  const bool reduces = kind == chorus::collective_kind::allreduce || kind == chorus::collective_kind::reducescatter;
  std::string what = std::string(fn) + "('" + spec.name + "'): ";
  auto reject = [&](const std::string& why) {
    return fail<std::optional<chorus::tensor_spec>>(std::nullopt, what + why);
  };
  if (ndim < 0) return reject("ndim " + std::to_string(ndim) + " is negative");
  if (ndim > 0 && shape == nullptr) return reject("shape is NULL but ndim is " + std::to_string(ndim));
  if (dtype < 0 || dtype >= chorus::dtype_count)
    return reject("dtype " + std::to_string(dtype) + " is not a chorus_dtype (0-" +
                  std::to_string(chorus::dtype_count - 1) + ")");
  if (reduces && (op < 0 || op >= chorus::arithmetic_reduce_op_count))
    return reject("op " + std::to_string(op) + " is not a chorus_op (0-" + std::to_string(chorus::arithmetic_reduce_op_count - 1) +
                  ")");
  spec.type = static_cast<chorus::dtype>(dtype);
  spec.shape.assign(shape, shape + ndim);
  spec.op = reduces ? static_cast<chorus::reduce_op>(op) : chorus::reduce_op::sum;
  spec.root = kind == chorus::collective_kind::broadcast ? root : -1;
  return spec;
}

/// Applies `wire` to `spec` (nullopt passes through); a bad enum value is a rejection.
std::optional<chorus::tensor_spec> with_wire(const char* fn, std::optional<chorus::tensor_spec> spec,
                                             const chorus_wire_options* wire) {
  if (!spec || !wire) return spec;
  const std::string what = std::string(fn) + "('" + spec->name + "'): ";
  if (wire->compression < -1 || wire->compression >= chorus::compression_count)
    return fail<std::optional<chorus::tensor_spec>>(
        std::nullopt, what + "compression " + std::to_string(wire->compression) + " is not a chorus_compression");
  if (wire->nan_check < -1 || wire->nan_check >= chorus::nan_check_count)
    return fail<std::optional<chorus::tensor_spec>>(
        std::nullopt, what + "nan_check " + std::to_string(wire->nan_check) + " is not a chorus_nan_check");
  if (wire->compression >= 0) spec->wire = static_cast<chorus::compression>(wire->compression);
  if (wire->nan_check >= 0) spec->check = static_cast<chorus::nan_check>(wire->nan_check);
  spec->prescale = wire->prescale;
  return spec;
}

/// Marks which wire options the caller chose (the session applies the job's defaults to the rest).
void mark_wire(op_state& s, const chorus_wire_options* wire) {
  s.wire_set = wire && wire->compression >= 0;
  s.check_set = wire && wire->nan_check >= 0;
}

using submit_fn = std::function<chorus::status(const std::shared_ptr<op_state>&)>;

/// A handle and its operation, in the table (before submission: the callback may run, and
/// release the handle, before the enqueue call returns).
std::pair<int64_t, std::shared_ptr<op_state>> new_handle(chorus::tensor_spec spec, std::string label,
                                                         chorus_callback cb, void* user_data) {
  int64_t h;
  {
    std::lock_guard lk(tab().mu);
    h = tab().next_handle++;
  }
  op_state::callback on_done;
  if (cb) {
    on_done = [cb, user_data, h](const op_state& s) {
      cb(h, static_cast<int>(s.result.code()), s.result.ok() ? nullptr : s.result.message().c_str(), user_data);
    };
  }
  auto state = std::make_shared<op_state>(std::move(spec), std::move(on_done), std::move(label));
  {
    std::lock_guard lk(tab().mu);
    tab().handles.emplace(h, state);
  }
  return {h, state};
}

/// Gives the operation a handle, then `submit`s it; a rejected one leaves the table again and
/// returns -1 with the error, without calling back.
int64_t start(chorus::tensor_spec spec, std::string label, chorus_callback cb, void* user_data,
              const submit_fn& submit) {
  auto [h, state] = new_handle(std::move(spec), std::move(label), cb, user_data);
  auto st = submit(state);
  if (!st.ok()) {
    std::lock_guard lk(tab().mu);
    tab().handles.erase(h);
    return fail<int64_t>(-1, st.message());
  }
  return h;
}

int64_t enqueue(const char* fn, chorus::collective_kind kind, int64_t id, const void* data, const int64_t* shape,
                int ndim, int dtype, int op, int root, chorus_callback cb, void* user_data) {
  auto spec = spec_of(fn, kind, id, shape, ndim, dtype, op, root);
  if (!spec) return -1;
  return start(std::move(*spec), {}, cb, user_data, [data](const std::shared_ptr<op_state>& s) {
    return chorus::detail::session::instance().submit(s, const_cast<void*>(data));
  });
}

/// Reducescatter: this rank's slice (chorus_reducescatter_rows of dim 0, then the other
/// dimensions) goes into the caller's `out` of `out_rows` rows (`into`, checked here) or into
/// the operation's own bytes. A scalar, a negative dim 0 or a job not running go to the
/// session unsized, which rejects them with the reason.
int64_t enqueue_reducescatter(const char* fn, std::optional<chorus::tensor_spec> spec, const void* data, bool into,
                              void* out, int64_t out_rows, chorus_callback cb, void* user_data,
                              const chorus_wire_options* wire = nullptr) {
  if (!spec) return -1;
  std::vector<int64_t> slice = spec->shape;
  const bool sized = !slice.empty() && slice[0] >= 0 && chorus::is_initialized();
  if (sized) {
    // Inside a process set the slices are the members' (a rank outside it fails at submit).
    int size = chorus::size(), rank = chorus::rank();
    if (spec->process_set != 0) {
      auto r = chorus::process_set_rank(spec->process_set);
      auto n = chorus::process_set_size(spec->process_set);
      if (r && n) {
        rank = *r;
        size = *n;
      }
    }
    slice[0] = chorus::reducescatter_rows(slice[0], size, rank);
    if (into && out_rows != slice[0])
      return fail<int64_t>(-1, std::string(fn) + "('" + spec->name + "'): out_rows is " + std::to_string(out_rows) +
                                   " but this rank's slice is " + chorus::format_shape(slice) +
                                   " (chorus_reducescatter_rows(" + std::to_string(spec->shape[0]) + ", " +
                                   std::to_string(size) + ", " + std::to_string(rank) + "))");
  }
  return start(std::move(*spec), {}, cb, user_data, [=](const std::shared_ptr<op_state>& s) {
    mark_wire(*s, wire);
    void* output = out;
    if (sized) {
      // The input's checks first: they bound the slice's size (no overflow below).
      if (auto st = chorus::detail::check_operation(s->spec, data); !st.ok()) return st;
      int64_t elems = 1;
      for (auto d : slice) elems *= d;
      if (!into) {
        const auto bytes = static_cast<std::size_t>(elems) * chorus::size_of(s->spec.type);
        try {
          s->gathered.assign(bytes, std::byte{0});
        } catch (const std::exception& e) {  // bad_alloc must not unwind into C
          return chorus::status{chorus::errc::invalid_argument, std::string(fn) + "('" + s->spec.name +
                                                                    "'): cannot allocate the slice's " +
                                                                    std::to_string(bytes) + " bytes: " + e.what()};
        }
        output = s->gathered.data();
      } else if (out == nullptr && elems > 0) {
        return chorus::status{chorus::errc::invalid_argument, std::string(fn) + "('" + s->spec.name +
                                                                  "'): out is NULL but this rank's slice " +
                                                                  chorus::format_shape(slice) + " has " +
                                                                  std::to_string(elems) + " elements"};
      }
      s->shape = slice;  // before submission: no other thread sees the state yet
    }
    return chorus::detail::session::instance().submit(s, const_cast<void*>(data), output);
  });
}

int64_t enqueue_on(const char* fn, chorus::collective_kind kind, int64_t id, void* data, const int64_t* shape,
                   int ndim, int dtype, int op, int root, chorus_device device, chorus_callback cb, void* user_data) {
  if (device.kind != CHORUS_DEVICE_CPU && device.kind != CHORUS_DEVICE_CUDA)
    return fail<int64_t>(-1, std::string(fn) + ": device kind " + std::to_string(static_cast<int>(device.kind)) +
                                 " is not CHORUS_DEVICE_CPU or CHORUS_DEVICE_CUDA");
  auto spec = spec_of(fn, kind, id, shape, ndim, dtype, op, root);
  if (!spec) return -1;
  spec->device = device.kind == CHORUS_DEVICE_CUDA ? chorus::device_kind::cuda : chorus::device_kind::cpu;
  return start(std::move(*spec), {}, cb, user_data, [data, device](const std::shared_ptr<op_state>& s) {
    s->device_index = device.index;
    s->cuda_stream = device.stream;
    return chorus::detail::session::instance().submit(s, data);
  });
}

}  // namespace

extern "C" {

int64_t chorus_enqueue_allreduce(int64_t id, void* data, const int64_t* shape, int ndim, chorus_dtype dtype,
                                 chorus_op op, chorus_callback cb, void* user_data) {
  return enqueue("chorus_enqueue_allreduce", chorus::collective_kind::allreduce, id, data, shape, ndim, dtype, op, -1,
                 cb, user_data);
}

int chorus_enqueue_allreduce_batch(int count, const int64_t* ids, void* const* data, const int64_t* const* shapes,
                                   const int* ndims, const chorus_dtype* dtypes, chorus_op op, int64_t* handles,
                                   chorus_callback cb, void* user_data) {
  const char* fn = "chorus_enqueue_allreduce_batch";
  if (count < 0) return fail<int>(-1, std::string(fn) + ": count " + std::to_string(count) + " is negative");
  if (count > 0 && (!ids || !data || !shapes || !ndims || !dtypes || !handles))
    return fail<int>(-1, std::string(fn) + ": ids, data, shapes, ndims, dtypes and handles must not be NULL");
  std::vector<std::shared_ptr<op_state>> ops;
  std::vector<void*> in_place;
  for (int i = 0; i < count; ++i) {
    auto spec = spec_of(fn, chorus::collective_kind::allreduce, ids[i], shapes[i], ndims[i], dtypes[i], op, -1);
    if (!spec) {
      handles[i] = -1;
      continue;
    }
    auto [h, state] = new_handle(std::move(*spec), {}, cb, user_data);
    handles[i] = h;
    ops.push_back(std::move(state));
    in_place.push_back(data[i]);
  }
  // What the runtime refuses (null data, not initialized, still pending) ends there, with its error.
  if (!ops.empty()) chorus::detail::session::instance().submit_all(ops, in_place);
  return static_cast<int>(ops.size());
}

int64_t chorus_enqueue_broadcast(int64_t id, void* data, const int64_t* shape, int ndim, chorus_dtype dtype, int root,
                                 chorus_callback cb, void* user_data) {
  return enqueue("chorus_enqueue_broadcast", chorus::collective_kind::broadcast, id, data, shape, ndim, dtype, 0, root,
                 cb, user_data);
}

int64_t chorus_enqueue_allreduce_on(int64_t id, void* data, const int64_t* shape, int ndim, chorus_dtype dtype,
                                    chorus_op op, chorus_device device, chorus_callback cb, void* user_data) {
  return enqueue_on("chorus_enqueue_allreduce_on", chorus::collective_kind::allreduce, id, data, shape, ndim, dtype,
                    op, -1, device, cb, user_data);
}

int64_t chorus_enqueue_broadcast_on(int64_t id, void* data, const int64_t* shape, int ndim, chorus_dtype dtype,
                                    int root, chorus_device device, chorus_callback cb, void* user_data) {
  return enqueue_on("chorus_enqueue_broadcast_on", chorus::collective_kind::broadcast, id, data, shape, ndim, dtype,
                    0, root, device, cb, user_data);
}

int64_t chorus_enqueue_allgather(int64_t id, const void* data, const int64_t* shape, int ndim, chorus_dtype dtype,
                                 chorus_callback cb, void* user_data) {
  return enqueue("chorus_enqueue_allgather", chorus::collective_kind::allgather, id, data, shape, ndim, dtype, 0, -1,
                 cb, user_data);
}

int64_t chorus_enqueue_allreduce_wire(int64_t id, void* data, const int64_t* shape, int ndim, chorus_dtype dtype,
                                      chorus_op op, const chorus_wire_options* wire, chorus_callback cb,
                                      void* user_data) {
  const char* fn = "chorus_enqueue_allreduce_wire";
  auto spec = with_wire(fn, spec_of(fn, chorus::collective_kind::allreduce, id, shape, ndim, dtype, op, -1), wire);
  if (!spec) return -1;
  return start(std::move(*spec), {}, cb, user_data, [data, wire](const std::shared_ptr<op_state>& s) {
    mark_wire(*s, wire);
    return chorus::detail::session::instance().submit(s, data);
  });
}

int64_t chorus_enqueue_allgather_wire(int64_t id, const void* data, const int64_t* shape, int ndim,
                                      chorus_dtype dtype, const chorus_wire_options* wire, chorus_callback cb,
                                      void* user_data) {
  const char* fn = "chorus_enqueue_allgather_wire";
  auto spec = with_wire(fn, spec_of(fn, chorus::collective_kind::allgather, id, shape, ndim, dtype, 0, -1), wire);
  if (!spec) return -1;
  return start(std::move(*spec), {}, cb, user_data, [data, wire](const std::shared_ptr<op_state>& s) {
    mark_wire(*s, wire);
    return chorus::detail::session::instance().submit(s, const_cast<void*>(data));
  });
}

int64_t chorus_enqueue_reducescatter_wire(int64_t id, const void* data, const int64_t* shape, int ndim,
                                          chorus_dtype dtype, chorus_op op, const chorus_wire_options* wire,
                                          chorus_callback cb, void* user_data) {
  const char* fn = "chorus_enqueue_reducescatter_wire";
  return enqueue_reducescatter(
      fn, with_wire(fn, spec_of(fn, chorus::collective_kind::reducescatter, id, shape, ndim, dtype, op, -1), wire), data,
      false, nullptr, 0, cb, user_data, wire);
}

int64_t chorus_reducescatter_rows(int64_t dim0, int size, int rank) {
  return chorus::reducescatter_rows(dim0, size, rank);
}

int64_t chorus_enqueue_reducescatter(int64_t id, const void* data, const int64_t* shape, int ndim, chorus_dtype dtype,
                                     chorus_op op, chorus_callback cb, void* user_data) {
  const char* fn = "chorus_enqueue_reducescatter";
  return enqueue_reducescatter(fn, spec_of(fn, chorus::collective_kind::reducescatter, id, shape, ndim, dtype, op, -1),
                               data, false, nullptr, 0, cb, user_data);
}

int64_t chorus_enqueue_reducescatter_into(int64_t id, const void* data, const int64_t* shape, int ndim,
                                          chorus_dtype dtype, chorus_op op, void* out, int64_t out_rows,
                                          chorus_callback cb, void* user_data) {
  const char* fn = "chorus_enqueue_reducescatter_into";
  return enqueue_reducescatter(fn, spec_of(fn, chorus::collective_kind::reducescatter, id, shape, ndim, dtype, op, -1),
                               data, true, out, out_rows, cb, user_data);
}

int64_t chorus_enqueue_alltoall(int64_t id, const void* data, const int64_t* shape, int ndim, chorus_dtype dtype,
                                const int64_t* splits, int nsplits, chorus_callback cb, void* user_data) {
  const char* fn = "chorus_enqueue_alltoall";
  auto spec = spec_of(fn, chorus::collective_kind::alltoall, id, shape, ndim, dtype, 0, -1);
  if (!spec) return -1;
  if (nsplits < 0 || (nsplits > 0 && splits == nullptr))
    return fail<int64_t>(-1, std::string(fn) + "('" + spec->name + "'): splits is " + (splits ? "given" : "NULL") +
                                 " but nsplits is " + std::to_string(nsplits) +
                                 "; give chorus_size() splits, the rows for each rank");
  std::vector<int64_t> rows(splits, splits + nsplits);
  return start(std::move(*spec), {}, cb, user_data, [data, rows](const std::shared_ptr<op_state>& s) {
    return chorus::detail::session::instance().submit(s, const_cast<void*>(data), nullptr, rows);
  });
}

int64_t chorus_enqueue_join(chorus_callback cb, void* user_data) {
  chorus::tensor_spec spec;
  spec.name = "join";
  return start(std::move(spec), "join on rank " + std::to_string(chorus::rank()), cb, user_data,
               [](const std::shared_ptr<op_state>& s) { return chorus::detail::session::instance().join(s); });
}

}  // extern "C"
