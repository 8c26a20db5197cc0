// The peer Chorus is measured against in chorus-bench: Gloo's TCP transport on 127.0.0.1 and
// Gloo's own ring allreduce, set up the way PyTorch's ProcessGroupGloo sets it up.
// Compiled only when Gloo is found (CHORUS_WITH_GLOO); Gloo's headers stay out of this one.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

namespace gloo {
class Context;
}

namespace chorus::bench {

/// Gloo's TCP transport on 127.0.0.1 and its ring allreduce: the peer Chorus is measured against.
///
/// One instance per process. Not thread-safe: the collectives are blocking and must be called
/// by one thread, in the same order on every rank (Gloo matches operations by order and tag).
class gloo_peer {
 public:
  /// Rendezvous through a gloo::rendezvous::FileStore in `store_dir` (all ranks pass the same
  /// directory; it is created if missing). The directory must not hold keys of an earlier job:
  /// pass a fresh one per run. Blocks until all `size` ranks arrived or Gloo's store timeout
  /// (30 s) passed. Returns nullptr on bad arguments or a failed rendezvous, after logging an
  /// error line that names the rank, the directory and Gloo's message.
  /// Gloo's pairs listen on `host` (the address the Chorus ranks use: 127.0.0.1 on one host, the
  /// host's own address across emulated hosts, whose /tmp the FileStore shares).
  static std::unique_ptr<gloo_peer> connect(int rank, int size, const std::string& store_dir,
                                            const std::string& host = "127.0.0.1");

  ~gloo_peer();
  gloo_peer(const gloo_peer&) = delete;
  gloo_peer& operator=(const gloo_peer&) = delete;

  /// In place sum over ranks with Gloo's ring algorithm (gloo::allreduce options API with
  /// AllreduceOptions::Algorithm::RING: reduce-scatter then allgather in 1 MiB segments).
  /// Throws std::runtime_error naming the operation, count and rank if a peer fails or the
  /// operation outlives Gloo's context timeout (30 s); these are the only failures.
  void allreduce_sum(float* data, std::size_t count);

  /// Returns once every rank entered the barrier. Throws like allreduce_sum.
  void barrier();

  /// In place element-wise max over ranks (the ring algorithm too); used to take the max of
  /// per-iteration times over ranks. Throws like allreduce_sum.
  void allreduce_max(double* data, std::size_t count);

  int rank() const { return rank_; }
  int size() const { return size_; }

 private:
  gloo_peer(int rank, int size, std::shared_ptr<gloo::Context> context);

  int rank_;
  int size_;
  std::shared_ptr<gloo::Context> context_;
};

}  // namespace chorus::bench
