// CUDA chunks: NCCL in negotiated order, or host staging by chunks (device_runner.hpp).
#include "actors/device_runner.hpp"

#if CHORUS_WITH_CUDA
#include "runtime/device/cuda/gpu_executor.hpp"
#endif

namespace chorus {

device_runner::device_runner(std::shared_ptr<comm_runner> host, std::shared_ptr<completion_router> router,
                             std::shared_ptr<gpu::executor> executor, bool nccl)
    : host_(std::move(host)), router_(std::move(router)), executor_(std::move(executor)), nccl_(nccl) {}

void device_runner::run(const chunk_work& w, int stream) {
  if (!w.job || !w.job->on_device()) return host_->run(w, stream);
  if (nccl_ && w.type == dtype::i16) skip_order(w);  // NCCL has no int16: staged, out of the order
  if (nccl_ && w.type != dtype::i16) return run_nccl(w, stream);
  run_staged(w, stream);
}

#if CHORUS_WITH_CUDA

void device_runner::run_nccl(const chunk_work& w, int stream) {
  const auto& op = w.job->ops.front();
  gpu::nccl_call call;
  call.what = w.algo == chunk_algo::broadcast ? gpu::nccl_call::kind::broadcast : gpu::nccl_call::kind::allreduce;
  call.buffer = w.data;
  call.count = w.bytes / size_of(w.type);
  call.type = w.type;
  call.op = w.op;
  if (w.type == dtype::boolean)  // 0/1 bytes: "or" is max, "and" is min
    call.op = w.op == reduce_op::min || w.op == reduce_op::product ? reduce_op::min : reduce_op::max;
  call.root = w.root;
  call.ready = op.ready;
  call.name = op.spec.name;
  executor_->collective(w.job->device_order, op.device_index, std::move(call),
                        [keep = w.job, router = router_, stream, seq = w.sequence](const status& st) {
                          router->post(stream, seq, st, keep.get());
                        });
}

void device_runner::skip_order(const chunk_work& w) { executor_->skip(w.job->device_order); }

result<std::byte*> device_runner::staging_of(bucket_job& job) {
  std::lock_guard lk(mu_);
  if (!job.staging) {
    auto block = executor_->pinned(job.plan.bytes);
    if (!block) return block.error();
    job.staging = std::move(*block);
  }
  return job.staging.get();
}

void device_runner::run_staged(const chunk_work& w, int stream) {
  auto& job = *w.job;
  const auto& op = job.ops.front();
  auto post = [router = router_, stream, seq = w.sequence, job = w.job.get()](const status& st) {
    router->post(stream, seq, st, job);
  };
  auto index = w.sequence - job.first_sequence;
  auto host = staging_of(job);
  if (!host) return post(host.error());
  if (index >= job.chunk_ranges.size()) return post({errc::internal, "chunk outside its CUDA bucket"});
  std::byte* h = *host + job.chunk_ranges[index].first;
  std::byte* d = w.data;
  const int device = op.device_index;
  chunk_work on_host = w;
  on_host.data = h;
  // device -> host, the CPU data plane, host -> device; each step starts from the last one's end.
  // The callbacks hold the runner's parts, not the runner: the data plane may call back after
  // the actors (and this runner) are gone; the executor then fails the copy with shutdown.
  executor_->copy(h, d, w.bytes, device, op.ready,
                  [hostp = host_, ex = executor_, on_host, stream, post, h, d, device](const status& st) {
                    if (!st.ok()) return post(st);
                    hostp->run_then(on_host, stream, [ex, on_host, post, h, d, device](const status& net) {
                      if (!net.ok()) return post(net);
                      ex->copy(d, h, on_host.bytes, device, nullptr,
                               [keep = on_host.job, post](const status& back) { post(back); });
                    });
                  });
}

#else

void device_runner::run_nccl(const chunk_work& w, int stream) { run_staged(w, stream); }
void device_runner::skip_order(const chunk_work&) {}
void device_runner::run_staged(const chunk_work& w, int stream) {
  router_->post(stream, w.sequence, {errc::config, "this build of Chorus has no CUDA support (CHORUS_WITH_CUDA is off)"},
              w.job.get());
}
result<std::byte*> device_runner::staging_of(bucket_job&) {
  return status{errc::config, "this build of Chorus has no CUDA support"};
}

#endif

}  // namespace chorus
