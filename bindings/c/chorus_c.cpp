// The C API (chorus.h) over the C++ session: a table of registered names (id → name), a table
// of handles (id → the operation's shared state) and a thread-local last-error text. Every
// enqueue goes through start(): a handle, then the session's submit (or join).
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "bindings/c/chorus.h"
#include "bindings/cpp/boundary.hpp"
#include "bindings/cpp/chorus.hpp"
#include "bindings/cpp/op_state.hpp"
#include "bindings/cpp/session.hpp"

namespace {

using chorus::errc;
using chorus::detail::op_state;

static_assert(CHORUS_OK == static_cast<int>(errc::ok) && CHORUS_ERR_INTERNAL == static_cast<int>(errc::internal) &&
              CHORUS_ERR_MISMATCH == static_cast<int>(errc::mismatch) &&
              CHORUS_ERR_SHUTDOWN == static_cast<int>(errc::shutdown));
static_assert(CHORUS_UINT8 == static_cast<int>(chorus::dtype::u8) && CHORUS_BOOL == static_cast<int>(chorus::dtype::boolean) &&
              CHORUS_BFLOAT16 == static_cast<int>(chorus::dtype::bf16));
static_assert(CHORUS_OP_PRODUCT == static_cast<int>(chorus::reduce_op::product) &&
              CHORUS_OP_AVERAGE == static_cast<int>(chorus::reduce_op::average));

struct tables {
  std::mutex mu;
  std::unordered_map<std::string, int64_t> ids;
  std::vector<std::string> names;
  std::vector<bool> transient;  ///< by id: registered with chorus_register_transient
  std::vector<int> sets;        ///< by id: the process set (chorus_register_in_process_set; 0: the job)
  std::unordered_map<int64_t, std::shared_ptr<op_state>> handles;
  int64_t next_handle = 0;
};

tables& tab() {
  static auto* t = new tables();  // leaked: callbacks may still run during static destruction
  return *t;
}

thread_local std::string last_error;

template <class T>
T fail(T value, std::string text) {
  last_error = std::move(text);
  return value;
}

std::shared_ptr<op_state> find(int64_t h) {
  std::lock_guard lk(tab().mu);
  auto it = tab().handles.find(h);
  return it == tab().handles.end() ? nullptr : it->second;
}

/// Done, successfully, and of a kind with result rows (allgather, alltoall, reducescatter).
bool has_rows(const op_state& s) {
  using chorus::collective_kind;
  const auto k = s.spec.kind;
  return s.done() && s.result.ok() &&
         (k == collective_kind::allgather || k == collective_kind::alltoall || k == collective_kind::reducescatter);
}

std::string unknown(const char* fn, int64_t h) {
  return std::string(fn) + ": handle " + std::to_string(h) + " is unknown or was released";
}

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

}  // namespace

// For chorus_c_sets.cpp (the process-set functions): sets chorus_last_error's text.
void chorus_c_set_last_error(std::string text) { last_error = std::move(text); }

extern "C" {

int chorus_init(void) {
  auto st = chorus::init();
  if (!st.ok()) return fail(static_cast<int>(st.code()), st.message());
  return CHORUS_OK;
}

void chorus_shutdown(void) { chorus::shutdown(); }
int chorus_is_initialized(void) { return chorus::is_initialized() ? 1 : 0; }
int chorus_rank(void) { return chorus::rank(); }
int chorus_size(void) { return chorus::size(); }
int chorus_local_rank(void) { return chorus::local_rank(); }
int chorus_local_size(void) { return chorus::local_size(); }

int chorus_start_timeline(const char* path, int mark_cycles) {
  if (path == nullptr)
    return fail(static_cast<int>(CHORUS_ERR_INVALID_ARGUMENT),
                std::string("chorus_start_timeline: path is NULL; give the file to write the timeline to"));
  auto st = chorus::start_timeline(path, mark_cycles != 0);
  if (!st.ok()) return fail(static_cast<int>(st.code()), "chorus_start_timeline: " + st.message());
  return CHORUS_OK;
}

int chorus_stop_timeline(void) {
  auto st = chorus::stop_timeline();
  if (!st.ok()) return fail(static_cast<int>(st.code()), "chorus_stop_timeline: " + st.message());
  return CHORUS_OK;
}

namespace {
int64_t register_name(const char* fn, const char* name, bool transient, int set = 0) {
  if (name == nullptr || *name == '\0')
    return fail<int64_t>(-1, std::string(fn) + ": " + (name ? "empty" : "NULL") +
                                 " tensor name; every gradient needs a unique, non-empty name");
  if (set < 0) return fail<int64_t>(-1, std::string(fn) + "('" + name + "'): negative process set " + std::to_string(set));
  std::lock_guard lk(tab().mu);
  // A process set has names of its own: (name, set) is the key.
  auto [it, fresh] = tab().ids.emplace(chorus::negotiated_name(name, set), static_cast<int64_t>(tab().names.size()));
  if (fresh) {
    tab().names.emplace_back(name);
    tab().transient.push_back(transient);
    tab().sets.push_back(set);
  } else if (tab().transient[static_cast<std::size_t>(it->second)] != transient) {
    return fail<int64_t>(-1, std::string(fn) + "('" + name + "'): already registered with " +
                                 (transient ? "chorus_register" : "chorus_register_transient") +
                                 "; a name is transient or not for the life of the process");
  }
  return it->second;
}
}  // namespace

int64_t chorus_register(const char* name) { return register_name("chorus_register", name, false); }

int64_t chorus_register_transient(const char* name) {
  return register_name("chorus_register_transient", name, true);
}

int64_t chorus_register_in_process_set(const char* name, int process_set) {
  return register_name("chorus_register_in_process_set", name, false, process_set);
}

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

namespace {
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

int chorus_nonfinite_ranks(int64_t handle, int* ranks, int capacity) {
  auto s = find(handle);
  if (!s) return fail(-1, unknown("chorus_nonfinite_ranks", handle));
  const auto list = chorus::handle(s).nonfinite_ranks();
  for (int i = 0; i < capacity && i < static_cast<int>(list.size()); ++i) ranks[i] = list[static_cast<std::size_t>(i)];
  return static_cast<int>(list.size());
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

int chorus_poll(int64_t handle) {
  auto s = find(handle);
  if (!s) return fail(-1, unknown("chorus_poll", handle));
  return s->done() ? 1 : 0;
}

int chorus_wait(int64_t handle, int64_t timeout_ms) {
  auto s = find(handle);
  if (!s) return fail(static_cast<int>(CHORUS_ERR_INVALID_ARGUMENT), unknown("chorus_wait", handle));
  if (auto st = chorus::detail::check_wait_allowed(*s, timeout_ms != 0, "chorus_wait"); !st.ok())
    return fail(static_cast<int>(CHORUS_ERR_INVALID_ARGUMENT), st.message());
  auto timeout = timeout_ms < 0 ? chorus::forever : std::chrono::milliseconds(timeout_ms);
  if (!s->wait_for(timeout))
    return fail(static_cast<int>(CHORUS_ERR_TIMEOUT), chorus::describe(s->spec) + ": not done after " +
                                                          std::to_string(timeout_ms) + " ms; the operation continues");
  return static_cast<int>(s->result.code());
}

const char* chorus_error_string(int64_t handle) {
  auto s = find(handle);
  if (!s) {
    last_error = unknown("chorus_error_string", handle);
    return last_error.c_str();
  }
  // The state outlives this call: the table holds it until chorus_release().
  return s->done() && !s->result.ok() ? s->result.message().c_str() : "";
}

const char* chorus_last_error(void) { return last_error.c_str(); }

const void* chorus_gathered_data(int64_t handle) {
  auto s = find(handle);
  if (!s) return fail<const void*>(nullptr, unknown("chorus_gathered_data", handle));
  return has_rows(*s) && !s->gathered.empty() ? s->gathered.data() : nullptr;
}

int64_t chorus_gathered_bytes(int64_t handle) {
  auto s = find(handle);
  if (!s) return fail<int64_t>(-1, unknown("chorus_gathered_bytes", handle));
  return has_rows(*s) ? static_cast<int64_t>(s->gathered.size()) : -1;
}

int chorus_gathered_shape(int64_t handle, int64_t* shape, int max_ndim) {
  auto s = find(handle);
  if (!s) return fail(-1, unknown("chorus_gathered_shape", handle));
  if (shape == nullptr && max_ndim > 0) return fail(-1, std::string("chorus_gathered_shape: shape is NULL"));
  if (!has_rows(*s)) return -1;
  for (int i = 0; i < max_ndim && i < static_cast<int>(s->shape.size()); ++i) shape[i] = s->shape[i];
  return static_cast<int>(s->shape.size());
}

int chorus_received_splits(int64_t handle, int64_t* splits, int max) {
  auto s = find(handle);
  if (!s) return fail(-1, unknown("chorus_received_splits", handle));
  if (splits == nullptr && max > 0) return fail(-1, std::string("chorus_received_splits: splits is NULL"));
  if (!s->done() || !s->result.ok() || s->spec.kind != chorus::collective_kind::alltoall) return -1;
  for (int i = 0; i < max && i < static_cast<int>(s->first_dims.size()); ++i) splits[i] = s->first_dims[i];
  return static_cast<int>(s->first_dims.size());
}

int chorus_last_rank(int64_t handle) {
  auto s = find(handle);
  if (!s) return fail(-1, unknown("chorus_last_rank", handle));
  return s->done() && s->result.ok() ? s->last_rank : -1;  // only a join sets it
}

void chorus_release(int64_t handle) {
  std::shared_ptr<op_state> keep;  // destroyed outside the lock
  std::lock_guard lk(tab().mu);
  auto it = tab().handles.find(handle);
  if (it == tab().handles.end()) return;
  keep = std::move(it->second);
  tab().handles.erase(it);
}

const char* chorus_status_name(int status) {
  if (status < 0 || status > static_cast<int>(errc::internal)) return "unknown";
  return chorus::to_string(static_cast<errc>(status));
}

}  // extern "C"
