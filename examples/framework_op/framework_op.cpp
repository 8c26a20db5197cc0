// framework_op: plays a training framework embedding Chorus through the C++ API. A model of
// tens of layers runs its backward pass output layer first; each layer spends a compute delay,
// then its "op" hands the layer's weight and bias gradients to Chorus and goes on. Before the
// optimizer step the framework waits for every gradient. Per step it prints the step time,
// the communication time (first enqueue → last completion) and how much of it was hidden
// behind the backward pass.
//
//   chorusrun -np 2 -- build/examples/framework_op [--layers 40] [--steps 10] [--scale 0.25]
//       [--us-per-mparam 4000] [--us-per-layer 200] [--busy] [--handles]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "chorus/chorus.hpp"  // Chorus::chorus installed, or chorus_bindings in the build tree

namespace {

using clock_type = std::chrono::steady_clock;
using ms = std::chrono::duration<double, std::milli>;

struct settings {
  int layers = 40;
  int steps = 10;
  double scale = 0.25;          // multiplies every layer's parameter count (1: ~50 M)
  double us_per_mparam = 4000;  // backward compute per million parameters
  double us_per_layer = 200;    // fixed backward compute per layer
  bool busy = false;            // busy-wait instead of sleeping (burns a core, as real kernels do)
  bool handles = false;         // wait on handles instead of counting callbacks
};

bool parse(int argc, char** argv, settings& s) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&](double& out) {
      if (i + 1 >= argc) return false;
      out = std::atof(argv[++i]);
      return true;
    };
    double v = 0;
    if (a == "--busy")
      s.busy = true;
    else if (a == "--handles")
      s.handles = true;
    else if (a == "--layers" && next(v))
      s.layers = static_cast<int>(v);
    else if (a == "--steps" && next(v))
      s.steps = static_cast<int>(v);
    else if (a == "--scale" && next(v))
      s.scale = v;
    else if (a == "--us-per-mparam" && next(v))
      s.us_per_mparam = v;
    else if (a == "--us-per-layer" && next(v))
      s.us_per_layer = v;
    else
      return false;
  }
  return s.layers > 0 && s.steps > 0 && s.scale > 0;
}

/// One layer: a weight and a bias, their gradients, and the compute its backward costs.
struct layer {
  std::string name;
  std::vector<float> weight, bias, weight_grad, bias_grad;
  std::chrono::microseconds backward{0};
};

/// A convolutional trunk whose channels double every eighth layer, then a few wide fully
/// connected layers: sizes from a few KiB to several MiB, like the vision models people train.
std::vector<layer> build_model(const settings& s) {
  std::vector<layer> model(static_cast<std::size_t>(s.layers));
  const int trunk = std::max(1, s.layers * 4 / 5);
  for (int i = 0; i < s.layers; ++i) {
    std::size_t out_features, params;
    if (i < trunk) {
      std::size_t c = std::size_t{32} << std::min(5, i * 5 / trunk);
      out_features = c;
      params = 9 * c * c;
    } else {
      out_features = (i == s.layers - 1) ? 1000 : 2048;
      params = out_features * 2048;
    }
    params = std::max<std::size_t>(1, static_cast<std::size_t>(static_cast<double>(params) * s.scale));
    auto& l = model[static_cast<std::size_t>(i)];
    l.name = (i < trunk ? "conv" : "fc") + std::to_string(i);
    l.weight.assign(params, 0.01f);
    l.bias.assign(out_features, 0.0f);
    l.weight_grad.resize(params);
    l.bias_grad.resize(out_features);
    l.backward = std::chrono::microseconds(
        static_cast<int64_t>(s.us_per_layer + s.us_per_mparam * static_cast<double>(params) / 1e6));
  }
  return model;
}

void compute_for(std::chrono::microseconds d, bool busy) {
  if (!busy) return std::this_thread::sleep_for(d);
  auto end = clock_type::now() + d;
  volatile double sink = 0;
  while (clock_type::now() < end) sink = sink + std::sqrt(sink + 1.0);
}

/// Counts completions of one step and remembers the last one and the first error.
struct step_tracker {
  std::mutex mu;
  std::condition_variable cv;
  int outstanding = 0;
  clock_type::time_point last_done{};
  chorus::status first_error;

  void done(const chorus::status& st) {
    std::lock_guard lk(mu);
    last_done = clock_type::now();
    if (!st.ok() && first_error.ok()) first_error = st;
    if (--outstanding == 0) cv.notify_all();
  }
};

}  // namespace

int main(int argc, char** argv) {
  settings s;
  if (!parse(argc, argv, s)) {
    std::fprintf(stderr,
                 "usage: framework_op [--layers N] [--steps N] [--scale F] [--us-per-mparam US] "
                 "[--us-per-layer US] [--busy] [--handles]\n");
    return 2;
  }
  if (auto st = chorus::init(); !st.ok()) {
    std::fprintf(stderr, "framework_op: %s\n", st.to_string().c_str());
    return 1;
  }
  const int rank = chorus::rank(), size = chorus::size();
  auto model = build_model(s);
  std::size_t params = 0;
  for (auto& l : model) params += l.weight.size() + l.bias.size();
  if (rank == 0)
    std::printf("framework_op: %d ranks, %d layers, %zu parameters (%.1f MiB of f32 gradients), %s compute, %s\n", size,
                s.layers, params, static_cast<double>(params) * 4 / (1 << 20), s.busy ? "busy" : "sleeping",
                s.handles ? "handles" : "callbacks");

  double sum_step = 0, sum_comm = 0, sum_hidden = 0;
  int wrong = 0;
  for (int step = 0; step < s.steps; ++step) {
    step_tracker tracker;
    std::vector<chorus::handle> handles;
    auto start = clock_type::now();
    clock_type::time_point first_enqueue{};
    // Backward pass, output layer first: compute, then hand the gradients to Chorus at once.
    for (auto it = model.rbegin(); it != model.rend(); ++it) {
      compute_for(it->backward, s.busy);
      std::fill(it->weight_grad.begin(), it->weight_grad.end(), static_cast<float>(rank + 1));
      std::fill(it->bias_grad.begin(), it->bias_grad.end(), static_cast<float>(rank + 1));
      if (first_enqueue == clock_type::time_point{}) first_enqueue = clock_type::now();
      for (auto* g : {&it->weight_grad, &it->bias_grad}) {
        std::string name = it->name + (g == &it->weight_grad ? ".weight.grad" : ".bias.grad");
        chorus::tensor_view v{g->data(), chorus::dtype::f32, {static_cast<int64_t>(g->size())}};
        if (s.handles) {
          handles.push_back(chorus::allreduce_async(name, v, chorus::reduce_op::average));
        } else {
          {
            std::lock_guard lk(tracker.mu);
            ++tracker.outstanding;
          }
          chorus::allreduce_async(name, v, chorus::reduce_op::average,
                                  [&tracker](const chorus::status& st) { tracker.done(st); });
        }
      }
    }
    auto backward_end = clock_type::now();
    // Before the optimizer step: every gradient must be reduced.
    chorus::status error;
    clock_type::time_point last_done;
    if (s.handles) {
      for (auto& h : handles)
        if (auto st = h.wait(); !st.ok() && error.ok()) error = st;
      last_done = clock_type::now();
    } else {
      std::unique_lock lk(tracker.mu);
      tracker.cv.wait(lk, [&] { return tracker.outstanding == 0; });
      error = tracker.first_error;
      last_done = tracker.last_done;
    }
    if (!error.ok()) {
      std::fprintf(stderr, "framework_op: step %d: %s\n", step, error.to_string().c_str());
      chorus::shutdown();
      return 1;
    }
    // Optimizer step (plain SGD); the average of (rank + 1) over the ranks is (size + 1) / 2.
    const float expect = static_cast<float>(size + 1) / 2;
    for (auto& l : model) {
      if (l.weight_grad.front() != expect || l.bias_grad.back() != expect) ++wrong;
      for (std::size_t k = 0; k < l.weight.size(); ++k) l.weight[k] -= 1e-3f * l.weight_grad[k];
    }
    auto end = clock_type::now();

    double step_ms = ms(end - start).count();
    double comm_ms = ms(std::max(last_done, first_enqueue) - first_enqueue).count();
    double hidden_ms = ms(std::min(last_done, backward_end) - first_enqueue).count();
    hidden_ms = std::clamp(hidden_ms, 0.0, comm_ms);
    double exposed_ms = comm_ms - hidden_ms;
    if (rank == 0)
      std::printf(
          "step %2d: step %8.2f ms  backward %8.2f ms  communication %8.2f ms  hidden %8.2f ms (%5.1f%%)  "
          "exposed %7.2f ms\n",
          step, step_ms, ms(backward_end - start).count(), comm_ms, hidden_ms,
          comm_ms > 0 ? 100 * hidden_ms / comm_ms : 100.0, exposed_ms);
    std::fflush(stdout);
    if (step > 0 || s.steps == 1) {  // step 0 pays for first announcements and warm-up
      sum_step += step_ms;
      sum_comm += comm_ms;
      sum_hidden += hidden_ms;
    }
  }
  int counted = s.steps > 1 ? s.steps - 1 : 1;
  if (rank == 0)
    std::printf(
        "framework_op: mean over %d steps: step %.2f ms, communication %.2f ms, %.1f%% hidden behind "
        "compute; %s\n",
        counted, sum_step / counted, sum_comm / counted, sum_comm > 0 ? 100 * sum_hidden / sum_comm : 100.0,
        wrong ? "WRONG gradients" : "gradients exact");
  chorus::shutdown();
  return wrong ? 1 : 0;
}
