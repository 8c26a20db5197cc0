// The public C++ API (chorus.hpp): free functions over the session, the handle, and the
// translation of a tensor_view into the tensor_spec every rank negotiates.
#include "chorus/chorus.hpp"

#include <algorithm>

#include "bindings/cpp/api_checks.hpp"
#include "bindings/cpp/op_state.hpp"
#include "bindings/cpp/session.hpp"

namespace chorus {
namespace {

using detail::op_state;
using detail::session;

// Wire options asked for explicitly (check_operation refuses what cannot apply, naming the
// tensor); the job's defaults are applied by the session where they can apply.
void apply_wire(tensor_spec& s, const op_options& o) {
  if (o.wire) s.wire = *o.wire;
  if (o.check) s.check = *o.check;
  s.prescale = o.prescale;
}

tensor_spec spec_of(collective_kind kind, const op_name& name, const tensor_view& v, reduce_op op, int root,
                    const op_options& o = {}) {
  tensor_spec s;
  s.name = name.name;
  s.transient = name.transient;
  s.process_set = name.process_set;
  s.priority = name.priority;
  s.kind = kind;
  s.type = v.type;
  s.shape = v.shape;
  s.op = kind == collective_kind::allreduce || kind == collective_kind::reducescatter ? op : reduce_op::sum;
  s.root = kind == collective_kind::broadcast ? root : -1;
  s.device = v.device;
  apply_wire(s, o);
  return s;
}

/// Submits; a rejected operation still ends exactly once: its state completes with the error
/// (running `on_done` on this thread) and the handle reports it.
handle submit(collective_kind kind, const op_name& name, const tensor_view& v, reduce_op op, int root,
              op_state::callback on_done, const op_options& o = {}) {
  auto state = std::make_shared<op_state>(spec_of(kind, name, v, op, root, o), std::move(on_done));
  state->wire_set = o.wire.has_value();
  state->check_set = o.check.has_value();
  state->device_index = v.device_index;
  state->cuda_stream = v.stream;
  if (auto st = session::instance().submit(state, v.data); !st.ok()) state->complete(std::move(st));
  return handle(std::move(state));
}

/// This rank's slice of a reducescatter of `v`: its shape, or an error naming the tensor.
result<std::vector<int64_t>> slice_shape(const tensor_spec& s) {
  int n = session::instance().size(), r = session::instance().rank();
  if (n <= 0)
    return status{errc::invalid_argument, describe(s) + ": Chorus is not initialized; call chorus::init() first"};
  if (s.process_set != 0) {  // the slice of this rank among the set's members
    auto rank = process_set_rank(s.process_set);
    auto members = process_set_size(s.process_set);
    if (rank && members) {  // else the submit refuses the op, naming the set and this rank
      r = *rank;
      n = *members;
    }
  }
  if (s.shape.empty() || s.shape[0] < 0) return std::vector<int64_t>{};  // check_operation names the problem
  auto shape = s.shape;
  shape[0] = reducescatter_rows(s.shape[0], n, r);
  return shape;
}

/// Reducescatter into `out` (a caller buffer) or, when `out` is null, into a buffer the
/// operation owns (handle::gathered()).
handle submit_reducescatter(const op_name& name, const tensor_view& v, const tensor_view* out, reduce_op op,
                            op_state::callback on_done, const op_options& o = {}) {
  auto state =
      std::make_shared<op_state>(spec_of(collective_kind::reducescatter, name, v, op, -1, o), std::move(on_done));
  state->wire_set = o.wire.has_value();
  state->check_set = o.check.has_value();
  auto fail = [&](status st) {
    state->complete(std::move(st));
    return handle(state);
  };
  // The spec first: the slice is sized from it (a shape like [3,-2] must be an error, not a throw).
  if (auto st = detail::check_operation(state->spec, v.data); !st.ok()) return fail(std::move(st));
  auto shape = slice_shape(state->spec);
  if (!shape) return fail(shape.error());
  void* output = nullptr;
  if (!shape->empty()) {
    int64_t elems = 1;
    for (auto d : *shape) elems *= d;
    auto bytes = static_cast<std::size_t>(elems) * size_of(v.type);
    if (out) {
      if (out->type != v.type || out->shape != *shape)
        return fail({errc::invalid_argument,
                     describe(state->spec) + ": output buffer is " + std::string(name_of(out->type)) + " " +
                         format_shape(out->shape) + " but this rank's slice is " + std::string(name_of(v.type)) +
                         " " + format_shape(*shape) + " (see chorus::reducescatter_rows)"});
      if (!out->data && bytes)
        return fail({errc::invalid_argument, describe(state->spec) + ": output buffer is null but the slice " +
                                                 format_shape(*shape) + " has " + std::to_string(elems) +
                                                 " elements"});
      output = out->data;
    } else {
      state->gathered.assign(bytes, std::byte{0});
      output = state->gathered.data();
    }
    state->shape = *shape;  // before submission: no other thread sees the state yet
  }
  if (auto st = session::instance().submit(state, v.data, output); !st.ok()) state->complete(std::move(st));
  return handle(std::move(state));
}

handle submit_alltoall(const op_name& name, const tensor_view& v, std::vector<int64_t> splits,
                       op_state::callback on_done) {
  auto state = std::make_shared<op_state>(spec_of(collective_kind::alltoall, name, v, reduce_op::sum, -1),
                                          std::move(on_done));
  if (auto st = session::instance().submit(state, v.data, nullptr, std::move(splits)); !st.ok())
    state->complete(std::move(st));
  return handle(std::move(state));
}

op_state::callback adapt(done_callback done) {
  if (!done) return {};
  return [done = std::move(done)](const op_state& s) { done(s.result); };
}

std::shared_ptr<op_state> empty_state() {
  static const std::shared_ptr<op_state> empty = [] {
    tensor_spec s;
    auto st = std::make_shared<op_state>(s, nullptr);
    st->complete({errc::invalid_argument, "empty handle: it was not returned by an operation"});
    return st;
  }();
  return empty;
}

}  // namespace

status init() { return session::instance().init(); }
void shutdown() { session::instance().shutdown(); }
bool is_initialized() { return session::instance().initialized(); }
int rank() { return session::instance().rank(); }
int size() { return session::instance().size(); }
int local_rank() { return session::instance().local_rank(); }
int local_size() { return session::instance().local_size(); }
int64_t elastic_round() { return session::instance().elastic_round(); }
result<int64_t> elastic_latest_round() { return session::instance().elastic_latest_round(); }
result<settings_in_force> settings() { return session::instance().settings(); }

status start_timeline(const std::string& path, bool mark_cycles) {
  return session::instance().start_timeline(path, mark_cycles);
}
status stop_timeline() { return session::instance().stop_timeline(); }

handle allreduce_async(const op_name& name, tensor_view v, reduce_op op) {
  return submit(collective_kind::allreduce, name, v, op, -1, {});
}

handle allreduce_async(const op_name& name, tensor_view v, reduce_op op, const op_options& opts) {
  return submit(collective_kind::allreduce, name, v, op, -1, {}, opts);
}

std::vector<handle> allreduce_async(const std::vector<op_name>& names, const std::vector<tensor_view>& views,
                                    reduce_op op) {
  return allreduce_async(names, views, op, op_options{});
}

std::vector<handle> allreduce_async(const std::vector<op_name>& names, const std::vector<tensor_view>& views,
                                    reduce_op op, const op_options& opts) {
  std::vector<std::shared_ptr<op_state>> states;
  std::vector<void*> data;
  const std::size_t n = std::max(names.size(), views.size());
  for (std::size_t i = 0; i < n; ++i) {
    tensor_view v = i < views.size() ? views[i] : tensor_view{};
    op_name name = i < names.size() ? names[i] : op_name{std::string()};
    states.push_back(std::make_shared<op_state>(spec_of(collective_kind::allreduce, name, v, op, -1, opts), nullptr));
    states.back()->wire_set = opts.wire.has_value();
    states.back()->check_set = opts.check.has_value();
    states.back()->device_index = v.device_index;
    states.back()->cuda_stream = v.stream;
    data.push_back(v.data);
  }
  if (names.size() != views.size()) {
    for (auto& st : states)
      st->complete({errc::invalid_argument, describe(st->spec) + ": allreduce_async got " +
                                                std::to_string(names.size()) + " names for " +
                                                std::to_string(views.size()) + " tensors"});
  } else {
    session::instance().submit_all(states, data);
  }
  return {states.begin(), states.end()};
}

handle broadcast_async(const op_name& name, tensor_view v, int root) {
  return submit(collective_kind::broadcast, name, v, reduce_op::sum, root, {});
}

handle allgather_async(const op_name& name, tensor_view v) {
  return submit(collective_kind::allgather, name, v, reduce_op::sum, -1, {});
}

handle allgather_async(const op_name& name, tensor_view v, const op_options& opts) {
  return submit(collective_kind::allgather, name, v, reduce_op::sum, -1, {}, opts);
}

namespace {
handle submit_join(op_state::callback on_done) {
  tensor_spec s;
  s.name = "join";
  auto state = std::make_shared<op_state>(s, std::move(on_done), "join on rank " + std::to_string(rank()));
  if (auto st = session::instance().join(state); !st.ok()) state->complete(std::move(st));
  return handle(std::move(state));
}
}  // namespace

handle join_async() { return submit_join({}); }

void join_async(std::function<void(const status&, int last_rank)> done) {
  op_state::callback cb;
  if (done) cb = [done = std::move(done)](const op_state& s) { done(s.result, s.last_rank); };
  submit_join(std::move(cb));
}

int handle::last_rank() const { return s_->done() && s_->result.ok() ? s_->last_rank : -1; }

std::vector<int> handle::nonfinite_ranks() const {
  const auto& spec = s_->spec;
  // The pipeline hands the ranks over in first_dims, which allreduce and reducescatter use for
  // nothing else (the check may be the job's default: spec.check need not say skip).
  if (!s_->done() || !s_->result.ok() ||
      (spec.kind != collective_kind::allreduce && spec.kind != collective_kind::reducescatter))
    return {};
  return {s_->first_dims.begin(), s_->first_dims.end()};
}

int64_t reducescatter_rows(int64_t dim0, int size, int r) {
  if (dim0 < 0 || size <= 0 || r < 0 || r >= size) return 0;
  return dim0 / size + (r < dim0 % size ? 1 : 0);
}

handle reducescatter_async(const op_name& name, tensor_view v, reduce_op op) {
  return submit_reducescatter(name, v, nullptr, op, {});
}

handle reducescatter_async(const op_name& name, tensor_view v, reduce_op op, const op_options& opts) {
  return submit_reducescatter(name, v, nullptr, op, {}, opts);
}

handle reducescatter_async(const op_name& name, tensor_view v, tensor_view out, reduce_op op) {
  return submit_reducescatter(name, v, &out, op, {});
}

handle alltoall_async(const op_name& name, tensor_view v, std::vector<int64_t> splits) {
  return submit_alltoall(name, v, std::move(splits), {});
}

void reducescatter_async(const op_name& name, tensor_view v, reduce_op op, gather_callback done) {
  op_state::callback cb;
  if (done) cb = [done = std::move(done)](const op_state& s) { done(s.result, s.gathered, s.shape); };
  submit_reducescatter(name, v, nullptr, op, std::move(cb));
}

void alltoall_async(const op_name& name, tensor_view v, std::vector<int64_t> splits, alltoall_callback done) {
  op_state::callback cb;
  if (done) cb = [done = std::move(done)](const op_state& s) { done(s.result, s.gathered, s.shape, s.first_dims); };
  submit_alltoall(name, v, std::move(splits), std::move(cb));
}

void allreduce_async(const op_name& name, tensor_view v, reduce_op op, done_callback done) {
  submit(collective_kind::allreduce, name, v, op, -1, adapt(std::move(done)));
}

void broadcast_async(const op_name& name, tensor_view v, int root, done_callback done) {
  submit(collective_kind::broadcast, name, v, reduce_op::sum, root, adapt(std::move(done)));
}

void allgather_async(const op_name& name, tensor_view v, gather_callback done) {
  op_state::callback cb;
  if (done) cb = [done = std::move(done)](const op_state& s) { done(s.result, s.gathered, s.shape); };
  submit(collective_kind::allgather, name, v, reduce_op::sum, -1, std::move(cb));
}

handle::handle() : s_(empty_state()) {}
handle::handle(std::shared_ptr<detail::op_state> state) : s_(state ? std::move(state) : empty_state()) {}

bool handle::poll() const { return s_->done(); }

status handle::wait(std::chrono::milliseconds timeout) const {
  if (auto st = detail::check_wait_allowed(*s_, timeout.count() > 0, "chorus::handle::wait"); !st.ok()) return st;
  if (s_->wait_for(timeout)) return s_->result;
  return {errc::timeout, s_->label + ": not done after " + std::to_string(timeout.count()) +
                             " ms; the operation continues (wait again or poll)"};
}

const status& handle::result() const { return s_->done() ? s_->result : s_->pending_status; }
const std::string& handle::name() const { return s_->spec.name; }

const std::vector<std::byte>& handle::gathered() const {
  static const std::vector<std::byte> none;
  return s_->done() ? s_->gathered : none;
}

std::byte* handle::gathered_data() const {
  return s_->done() && !s_->gathered.empty() ? s_->gathered.data() : nullptr;
}

std::vector<int64_t> handle::shape() const { return s_->done() ? s_->shape : std::vector<int64_t>{}; }

const std::vector<int64_t>& handle::received_splits() const {
  static const std::vector<int64_t> none;
  return s_->done() && s_->spec.kind == collective_kind::alltoall ? s_->first_dims : none;
}

const std::vector<int64_t>& handle::first_dims() const {
  static const std::vector<int64_t> none;
  const bool rows = s_->spec.kind == collective_kind::allgather || s_->spec.kind == collective_kind::alltoall;
  return s_->done() && rows ? s_->first_dims : none;  // allreduce keeps nonfinite_ranks there
}

}  // namespace chorus
