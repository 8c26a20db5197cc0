// The chunk runner in front of the data plane when this build has CUDA: chunks of CUDA buckets
// go to the GPU executor (runtime/device/cuda/gpu_executor.hpp), every other chunk to the
// communicator's data plane as before. Two backends, chosen for the whole job at start:
//  * nccl: the bucket's one chunk is an in-place NCCL collective, launched in the bucket's
//    device_order (the negotiated order, the same on every rank); int16, which NCCL lacks,
//    is staged as one chunk;
//  * host staging: each chunk is copied device -> pinned host, reduced by the CPU data plane
//    and copied back; chunks overlap, so copies of one run beside the network of another.
#pragma once

#include <memory>
#include <mutex>

#include "actors/chunk_runner.hpp"

namespace chorus {

namespace gpu {
class executor;
}

class device_runner final : public chunk_runner {
 public:
  /// `executor` must stay alive while the data plane may still call back (the pipeline stops
  /// it last). `nccl`: the job runs CUDA buckets on NCCL, else through host staging.
  device_runner(std::shared_ptr<comm_runner> host, std::shared_ptr<completion_router> router,
                std::shared_ptr<gpu::executor> executor, bool nccl);
  void run(const chunk_work& w, int stream) override;

 private:
  void run_nccl(const chunk_work& w, int stream);
  void run_staged(const chunk_work& w, int stream);
  /// Tells the executor that this bucket's NCCL order number will not be used.
  void skip_order(const chunk_work& w);
  /// The bucket's pinned host copy (made by the first of its chunks to run).
  result<std::byte*> staging_of(bucket_job& job);

  std::shared_ptr<comm_runner> host_;
  std::shared_ptr<completion_router> router_;
  std::shared_ptr<gpu::executor> executor_;
  bool nccl_;
  std::mutex mu_;  // bucket_job::staging
};

}  // namespace chorus
