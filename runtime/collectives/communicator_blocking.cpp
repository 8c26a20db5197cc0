// The communicator's blocking calls: each waits for its *_async form, except the small
// allreduces that run on the calling thread through shared-memory mailboxes.
#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include "runtime/collectives/communicator.hpp"

namespace chorus {

status communicator::wait(const std::function<void(callback)>& start) {
  struct slot {
    std::atomic<int> ready{0};
    status st;
  };
  auto s = std::make_shared<slot>();
  start([s](const status& st) {
    s->st = st;
    s->ready.store(1, std::memory_order_release);
    s->ready.notify_one();
  });
  // Small collectives finish in microseconds: look for a while (yielding the core) before
  // sleeping, whose wake-up alone costs more than such a collective.
  const auto spin_until = std::chrono::steady_clock::now() + std::chrono::microseconds(50);
  while (s->ready.load(std::memory_order_acquire) == 0 && std::chrono::steady_clock::now() < spin_until)
    std::this_thread::yield();
  s->ready.wait(0, std::memory_order_acquire);
  return s->st;
}

status communicator::allreduce_on_caller(void* data, std::size_t count, dtype t, reduce_op op, uint64_t spec,
                                         nonfinite_report* check) {
  // Numbered like any collective, alike on every rank; a spec makes the number differ where
  // the calls do, which the mailboxes check.
  const uint64_t call = next_sequence_++ + spec * 0x9e3779b97f4a7c15ull;
  auto st = caller_mailboxes_->run(data, count, t, op, call, check);
  if (st.code() == errc::protocol) abort(st);  // the peers learn why the job broke
  return st;
}

status communicator::allreduce(void* data, std::size_t count, dtype t, reduce_op op, allreduce_algorithm algo,
                               uint64_t spec) {
  if (runs_on_caller(count * size_of(t), t, op, algo)) return allreduce_on_caller(data, count, t, op, spec, nullptr);
  return wait([&](callback cb) { allreduce_async(data, count, t, op, std::move(cb), algo, spec); });
}

status communicator::allreduce(void* data, std::size_t count, dtype t, reduce_op op, const wire_options& asked) {
  // Where the compression policy drops the casts and no prescale is asked, the calling thread
  // runs it as it runs a plain allreduce, the NaN/Inf check inside the mailboxes' fold.
  const bool plain = compression_policy_.effective(asked.wire) == compression::none && asked.prescale == 1.0f;
  if (plain && runs_on_caller(count * size_of(t), t, op))
    return allreduce_on_caller(data, count, t, op, 0, asked.check ? asked.report.get() : nullptr);
  return wait([&](callback cb) { allreduce_async(data, count, t, op, asked, std::move(cb)); });
}

status communicator::broadcast(void* data, std::size_t count, dtype t, int root) {
  return wait([&](callback cb) { broadcast_async(data, count, t, root, std::move(cb)); });
}

status communicator::allgather(const void* in, void* out, std::vector<std::size_t> counts, dtype t,
                               allreduce_algorithm algo) {
  return wait([&](callback cb) { allgather_async(in, out, std::move(counts), t, std::move(cb), algo); });
}

status communicator::reducescatter(void* data, std::vector<std::size_t> counts, dtype t, reduce_op op) {
  return wait([&](callback cb) { reducescatter_async(data, std::move(counts), t, op, std::move(cb)); });
}

status communicator::alltoall(const void* in, std::vector<std::size_t> send_counts, void* out,
                              std::vector<std::size_t> recv_counts, dtype t) {
  return wait([&](callback cb) {
    alltoall_async(in, std::move(send_counts), out, std::move(recv_counts), t, std::move(cb));
  });
}

status communicator::barrier() {
  uint8_t token = 0;
  // On the calling thread where every rank shares one host, else one recursive-doubling exchange.
  const auto algo = runs_on_caller(1, dtype::u8, reduce_op::max) ? allreduce_algorithm::automatic
                                                                  : allreduce_algorithm::recursive_doubling;
  return allreduce(&token, 1, dtype::u8, reduce_op::max, algo);
}

}  // namespace chorus
