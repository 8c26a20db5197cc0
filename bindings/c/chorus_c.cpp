// The C API (chorus.h) over the C++ session: init and shutdown, the registered names (id → name),
// the handles' queries and release (the table: chorus_c_tables.hpp), and a thread-local
// last-error text. The enqueue functions are in chorus_c_enqueue.cpp.
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "chorus/chorus.h"
#include "bindings/c/chorus_c_tables.hpp"
#include "bindings/cpp/api_checks.hpp"
#include "chorus/chorus.hpp"
#include "bindings/cpp/op_state.hpp"

namespace chorus::c_api {

tables& tab() {
  static auto* t = new tables();  // leaked: callbacks may still run during static destruction
  return *t;
}

}  // namespace chorus::c_api

namespace {

using chorus::errc;
using chorus::detail::op_state;
using chorus::c_api::fail;
using chorus::c_api::tab;

static_assert(CHORUS_OK == static_cast<int>(errc::ok) && CHORUS_ERR_INTERNAL == static_cast<int>(errc::internal) &&
              CHORUS_ERR_MISMATCH == static_cast<int>(errc::mismatch) &&
              CHORUS_ERR_SHUTDOWN == static_cast<int>(errc::shutdown));
static_assert(CHORUS_UINT8 == static_cast<int>(chorus::dtype::u8) && CHORUS_BOOL == static_cast<int>(chorus::dtype::boolean) &&
              CHORUS_BFLOAT16 == static_cast<int>(chorus::dtype::bf16));
static_assert(CHORUS_OP_PRODUCT == static_cast<int>(chorus::reduce_op::product) &&
              CHORUS_OP_AVERAGE == static_cast<int>(chorus::reduce_op::average));

thread_local std::string last_error;

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

}  // namespace

// For fail() (chorus_c_tables.hpp) and chorus_c_sets.cpp (the process-set functions): sets
// chorus_last_error's text.
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
    tab().priorities.push_back(0);
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

int chorus_set_priority(int64_t id, int priority) {
  std::lock_guard lk(tab().mu);
  if (id < 0 || id >= static_cast<int64_t>(tab().names.size()))
    return fail(static_cast<int>(CHORUS_ERR_INVALID_ARGUMENT), "chorus_set_priority: tensor id " + std::to_string(id) +
                                                 " is not registered; get ids from chorus_register(name)");
  tab().priorities[static_cast<std::size_t>(id)] = priority;
  return CHORUS_OK;
}

int chorus_nonfinite_ranks(int64_t handle, int* ranks, int capacity) {
  auto s = find(handle);
  if (!s) return fail(-1, unknown("chorus_nonfinite_ranks", handle));
  const auto list = chorus::handle(s).nonfinite_ranks();
  for (int i = 0; i < capacity && i < static_cast<int>(list.size()); ++i) ranks[i] = list[static_cast<std::size_t>(i)];
  return static_cast<int>(list.size());
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
