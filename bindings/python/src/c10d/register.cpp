// The backend's one entry point in the Python module: _create_process_group, which
// chorus/torch/distributed.py registers with torch.distributed as the "chorus" backend.
#include <pybind11/stl.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/utils/pybind.h>

#include <condition_variable>
#include <mutex>

#include "c10d/process_group.hpp"
#include "module_support.hpp"

namespace py = pybind11;

namespace chorus::python {

void register_c10d(py::module_& m) {
  m.def(
      "_create_process_group",
      [](const c10::intrusive_ptr<::c10d::Store>& store, int rank, int size, double timeout_s, const std::string& name,
         const std::vector<int>& global_ranks) -> c10::intrusive_ptr<::c10d::ProcessGroup> {
        const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000.0));
        return c10::make_intrusive<process_group_chorus>(store, rank, size, timeout, name, global_ranks);
      },
      py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"), py::arg("name"),
      py::arg("global_ranks"), py::call_guard<py::gil_scoped_release>(),
      "A Chorus process group for torch.distributed (blocks until every member joined).");
  m.def(
      "_shut_down_process_group",
      [](const c10::intrusive_ptr<::c10d::ProcessGroup>& pg) {
        auto* mine = dynamic_cast<process_group_chorus*>(pg.get());
        if (mine) mine->shut_down();
        return mine != nullptr;
      },
      py::arg("group"), py::call_guard<py::gil_scoped_release>(),
      "Closes a Chorus process group now (torch.distributed.destroy_process_group); False for another backend's.");
  m.def(
      "_c10d_link_use",
      [](const c10::intrusive_ptr<::c10d::ProcessGroup>& pg) {
        auto* mine = dynamic_cast<process_group_chorus*>(pg.get());
        if (!mine) throw std::invalid_argument("not a Chorus process group");
        auto& comm = mine->calls().group().collectives();
        const auto use = comm.plane().wire().links();
        py::dict d;
        d["streams"] = comm.num_streams();
        d["hosts"] = comm.hosts().num_hosts();
        d["shm_streams"] = use.shm_streams;
        d["shm_frames"] = use.shm_frames;
        d["shm_missed"] = use.shm_missed;
        return d;
      },
      py::arg("group"),
      "Tests: how a Chorus group's data plane reaches its peers (streams, hosts, streams with shared-memory rings, "
      "frames through them).");
  m.def(
      "_c10d_allreduce_loop",
      [](const c10::intrusive_ptr<::c10d::ProcessGroup>& pg, at::Tensor t, int iterations) {
        auto* mine = dynamic_cast<process_group_chorus*>(pg.get());
        if (!mine) throw std::invalid_argument("not a Chorus process group");
        if (!t.is_contiguous() || t.scalar_type() != at::kFloat) throw std::invalid_argument("a contiguous float32 tensor");
        auto& g = mine->calls().group();
        const ordered::call_info info{"all_reduce", "bench", ordered::spec_digest({1, 6, 0, 1}, {t.sizes().data(), t.sizes().size()})};
        std::vector<double> seconds;
        std::mutex mu;
        std::condition_variable cv;
        for (int i = 0; i < iterations; ++i) {
          bool done = false;
          status result;
          const auto start = std::chrono::steady_clock::now();
          g.allreduce(info, t.data_ptr(), static_cast<std::size_t>(t.numel()), dtype::f32, reduce_op::sum,
                      [&](const status& st) {
                        std::lock_guard lk(mu);
                        result = st;
                        done = true;
                        cv.notify_one();
                      });
          std::unique_lock lk(mu);
          cv.wait(lk, [&] { return done; });
          if (!result.ok()) throw std::runtime_error(result.message());
          seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
        }
        return seconds;
      },
      py::arg("group"), py::arg("tensor"), py::arg("iterations"), py::call_guard<py::gil_scoped_release>(),
      "Benchmarks: `iterations` sum-allreduces of `tensor` straight on the group's data plane (no torch in between, "
      "the same path torch's calls take); the seconds of each.");
}

}  // namespace chorus::python
