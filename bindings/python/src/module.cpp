// chorus._chorus_torch: the C++ API (bindings/cpp/chorus.hpp) for torch CPU tensors. The
// Python package chorus.torch builds Horovod's API on top of it; this module only submits,
// waits (without the GIL) and turns a failed status into the Python exception that
// chorus.common.exceptions names for its code.
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include <chrono>

#include "module_support.hpp"
#include "runtime/config/reader.hpp"
#include "runtime/config/variables.hpp"
#include "runtime/rendezvous/elastic_round.hpp"

namespace py = pybind11;
using namespace chorus;
using chorus::python::raise;
using chorus::python::raise_argument;
using chorus::python::submit;
using chorus::python::to_reduce_op;
using chorus::python::wire_options;
using chorus::python::torch_op;

namespace {

// Exception classes from chorus.common.exceptions, looked up once at import.
struct exception_types {
  py::object internal;  // HorovodInternalError: the job failed (peer lost, shutdown, ...)
  py::object argument;  // ChorusArgumentError (ValueError and RuntimeError): bad arguments
  py::object removed;   // WorkerRemovedError (a RuntimeError): chorusrun removed this worker
};

exception_types& types() {
  static auto* t = new exception_types();  // leaked: outlives the interpreter's teardown order
  return *t;
}

/// Waits until `op` ended or `timeout_s` passed (None: no deadline), without the GIL; checks
/// for signals (Ctrl-C) every 100 ms. Returns whether it ended.
bool wait(torch_op& op, std::optional<double> timeout_s) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  for (;;) {
    auto slice = std::chrono::milliseconds(100);
    if (timeout_s) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          std::chrono::duration<double>(*timeout_s) - (clock::now() - start));
      if (left.count() <= 0) return op.poll();
      slice = std::min(slice, left);
    }
    bool ended = false;
    {
      py::gil_scoped_release nogil;
      ended = op.wait_for(slice);
    }
    if (ended) return true;
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
  }
}

/// Runs `call` (a blocking C++ API call that returns a status) without the GIL, then raises
/// its failure with the GIL held again.
template <class Call>
void call_without_gil(Call&& call) {
  status st;
  {
    py::gil_scoped_release nogil;
    st = call();
  }
  if (!st.ok()) chorus::python::raise(st);
}

}  // namespace

namespace chorus::python {

reduce_op to_reduce_op(int op) {
  if (op < 0 || op >= arithmetic_reduce_op_count)  // Horovod's ops (the bitwise ones are torch.distributed's)
    raise_argument("reduce op " + std::to_string(op) + " is not one of sum (0), average (1), min (2), max (3), "
                   "product (4)");
  return static_cast<reduce_op>(op);
}

/// Wire options from chorus.torch's codes (-1: the job's default).
op_options wire_options(int compression_code, int nan_check_code) {
  op_options o;
  if (compression_code < -1 || compression_code >= compression_count)
    raise_argument("compression " + std::to_string(compression_code) + " is not one of -1 (default), 0 (none), "
                   "1 (fp16), 2 (bf16)");
  if (nan_check_code < -1 || nan_check_code >= nan_check_count)
    raise_argument("nan_check " + std::to_string(nan_check_code) + " is not one of -1 (default), 0 (off), "
                   "1 (error), 2 (skip)");
  if (compression_code >= 0) o.wire = static_cast<compression>(compression_code);
  if (nan_check_code >= 0) o.check = static_cast<nan_check>(nan_check_code);
  return o;
}

[[noreturn]] void raise(const status& st) {
  PyObject* cls = nullptr;
  switch (st.code()) {
    case errc::invalid_argument:
    case errc::mismatch: cls = types().argument.ptr(); break;
    case errc::config: cls = PyExc_RuntimeError; break;
    case errc::rendezvous: cls = elastic::removed(st) ? types().removed.ptr() : PyExc_RuntimeError; break;
    default: cls = types().internal.ptr(); break;
  }
  PyErr_SetString(cls, st.to_string().c_str());
  throw py::error_already_set();
}

[[noreturn]] void raise_argument(const std::string& what) {
  PyErr_SetString(types().argument.ptr(), what.c_str());
  throw py::error_already_set();
}

}  // namespace chorus::python

PYBIND11_MODULE(_chorus_torch, m) {
  m.doc() = "Chorus' C++ API for torch tensors (use chorus.torch instead)";
  auto exc = py::module_::import("chorus.common.exceptions");
  types().internal = exc.attr("HorovodInternalError");
  types().argument = exc.attr("ChorusArgumentError");
  types().removed = exc.attr("WorkerRemovedError");

  m.def(
      "init",
      [] {
        call_without_gil([] { return chorus::init(); });
      },
      "Starts this rank's part of the job (blocks until every rank arrived).");
  m.def(
      "shutdown", [] { chorus::shutdown(); }, py::call_guard<py::gil_scoped_release>(),
      "Stops the job; every pending operation ends with a shutdown error.");
  m.def(
      "start_timeline",
      [](const std::string& path, bool mark_cycles) {
        call_without_gil([&] { return chorus::start_timeline(path, mark_cycles); });
      },
      py::arg("file_path"), py::arg("mark_cycles") = false,
      "Starts recording the timeline (rank 0 only; a no-op elsewhere).");
  m.def(
      "stop_timeline",
      [] {
        call_without_gil([] { return chorus::stop_timeline(); });
      },
      "Stops the timeline and writes its Chrome-trace JSON (a no-op when none runs).");
  m.def(
      "settings",
      [] {
        auto s = chorus::settings();
        if (!s.ok()) raise(s.error());
        py::dict d;
        d["fusion_threshold"] = s->fusion_threshold;
        d["chunk_bytes"] = s->chunk_bytes;
        d["streams"] = s->streams;
        d["cycle_time_ms"] = s->cycle_time_ms;
        d["in_place_bytes"] = s->in_place_bytes;
        return d;
      },
      "The settings in force on this rank (the autotuner moves them), as a dict.");
  m.def("is_initialized", &chorus::is_initialized);
  m.def("rank", &chorus::rank);
  m.def("size", &chorus::size);
  m.def("local_rank", &chorus::local_rank);
  m.def("local_size", &chorus::local_size);

  py::class_<torch_op, std::unique_ptr<torch_op>>(m, "Op", "A submitted operation on torch tensors.")
      .def("poll", &torch_op::poll, "True once the operation ended. Never blocks.")
      .def("wait", &wait, py::arg("timeout") = py::none(),
           "Waits (without the GIL) until the operation ended or `timeout` seconds passed; "
           "returns whether it ended.")
      .def(
          "result",
          [](torch_op& op) {
            if (!op.poll()) throw py::value_error("operation '" + op.name() + "' is still pending; wait() first");
            const status& st = op.finish();
            if (!st.ok()) raise(st);
            return op.output();
          },
          "Once ended: the output tensor, or raises the operation's error.")
      .def("first_dims", &torch_op::first_dims)
      .def("nonfinite_ranks", &torch_op::nonfinite_ranks,
           "NaN/Inf check in skip mode, once ended: the ranks whose input held NaN/Inf (alike on all ranks).")
      .def_property_readonly("name", &torch_op::name);

  m.def(
      "allreduce_async",
      [](at::Tensor t, const std::string& name, int op, bool transient, uintptr_t stream, int compression,
         int nan_check, int process_set, int32_t priority) {
        auto rop = to_reduce_op(op);
        auto wire = wire_options(compression, nan_check);
        return submit([&] {
          return torch_op::allreduce(name, t, rop, transient, reinterpret_cast<void*>(stream), wire, process_set,
                                     priority);
        });
      },
      py::arg("tensor"), py::arg("name"), py::arg("op"), py::arg("transient") = false, py::arg("stream") = 0,
      py::arg("compression") = -1, py::arg("nan_check") = -1, py::arg("process_set") = 0, py::arg("priority") = 0,
      "Reduces `tensor` in place across all ranks. compression: 0 none, 1 fp16, 2 bf16 on the wire; "
      "nan_check: 0 off, 1 error, 2 skip; -1: the job's default; priority: larger goes first.");
  m.def(
      "allreduce_async_all",
      [](const std::vector<at::Tensor>& ts, const std::vector<std::string>& names, int op, uintptr_t stream,
         int compression, int nan_check, int process_set, const std::vector<int32_t>& priorities) {
        auto rop = to_reduce_op(op);
        auto wire = wire_options(compression, nan_check);
        std::vector<std::unique_ptr<torch_op>> ops;
        try {
          ops = torch_op::allreduce_all(names, ts, rop, reinterpret_cast<void*>(stream), wire, process_set,
                                        priorities);
        } catch (const chorus::python::argument_error& e) {
          raise_argument(e.what());
        }
        // As submit(): an operation rejected at the call raises here (the others were
        // submitted; their Op objects wait for them when dropped).
        for (auto& o : ops)
          if (o->poll() && !o->finish().ok()) raise(o->finish());
        py::list out;
        for (auto& o : ops) out.append(py::cast(std::move(o)));
        return out;
      },
      py::arg("tensors"), py::arg("names"), py::arg("op"), py::arg("stream") = 0, py::arg("compression") = -1,
      py::arg("nan_check") = -1, py::arg("process_set") = 0, py::arg("priorities") = std::vector<int32_t>{},
      "Reduces each tensor in place across all ranks, submitted together (one negotiation "
      "cycle for tensors ready at the same moment); one Op per tensor, in order. priorities: "
      "one per tensor (larger goes first), or empty for 0.");
  m.def(
      "broadcast_async",
      [](at::Tensor t, const std::string& name, int root, bool transient, uintptr_t stream, int process_set) {
        return submit([&] {
          return torch_op::broadcast(name, t, root, transient, reinterpret_cast<void*>(stream), process_set);
        });
      },
      py::arg("tensor"), py::arg("name"), py::arg("root"), py::arg("transient") = false, py::arg("stream") = 0,
      py::arg("process_set") = 0,
      "Copies rank `root`'s `tensor` into every rank's.");
  m.def(
      "allgather_async",
      [](at::Tensor t, const std::string& name, bool transient, int process_set) {
        return submit([&] { return torch_op::allgather(name, t, transient, process_set); });
      },
      py::arg("tensor"), py::arg("name"), py::arg("transient") = false, py::arg("process_set") = 0,
      "Concatenates every rank's `tensor` along the first dimension.");
  chorus::python::register_scatter_ops(m);
  chorus::python::register_join(m);
  chorus::python::register_process_sets(m);
  chorus::python::register_elastic(m);
  m.def(
      "read_variable",
      [](const std::string& name) -> py::object {
        // The one reader of the variable table (runtime/config): its checks and its words.
        const auto* v = cfg::find(name);
        if (!v) raise_argument(name + " is not a Chorus variable (runtime/config/variables.cpp)");
        const cfg::reader r(cfg::process_lookup());
        auto value = [](auto x) {  // the reader's words when the value is rejected
          if (!x) raise_argument(x.error().message());
          return std::move(*x);
        };
        switch (v->type) {
          case cfg::kind::whole: return py::int_(value(r.whole(name)));
          case cfg::kind::decimal: return py::float_(value(r.decimal(name)));
          case cfg::kind::choice: return py::str(value(r.choice(name)));
          case cfg::kind::text: return py::str(value(r.text(name)));
        }
        return py::none();
      },
      py::arg("name"),
      "A CHORUS_* variable's value (its default when unset), read and checked by the runtime's reader; "
      "a bad value raises ChorusArgumentError naming the variable, the value and what is allowed.");
  chorus::python::register_c10d(m);
}
