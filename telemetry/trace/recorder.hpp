// The trace recorder: a telemetry::observer that writes every event of one rank to
// `<dir>/rank-<r>.trace` in the format of format.hpp (CHORUS_TRACE=<dir>).
//
// Off the hot path: an observer call encodes its record into the calling thread's own buffer
// (a lock of that thread's only, shared with nobody but the writer for the moment it swaps
// buffers) and returns; a background writer thread swaps the buffers every flush interval and
// appends them to the file as one checksummed block. Bounded: when the file would pass
// max_bytes (CHORUS_TRACE_MAX_MB) the writer writes a `limit` record, logs one warning and
// recording stops; a thread whose buffer is full (the writer fell behind) drops the record
// and the next block says how many were lost. Training never waits for the file.
// Thread-safety: every observer method may be called from any thread at once.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "runtime/core/status.hpp"
#include "runtime/negotiation/byte_io.hpp"
#include "telemetry/observer.hpp"
#include "telemetry/setup.hpp"
#include "telemetry/trace/format.hpp"

namespace chorus::telemetry::trace {

struct recorder_options {
  std::string dir;                                  ///< created if missing
  std::string prefix = "rank-";                     ///< the file is <dir>/<prefix><rank>.trace
  int rank = 0;
  int size = 1;
  uint64_t max_bytes = uint64_t{256} << 20;         ///< file size bound (CHORUS_TRACE_MAX_MB); 0 = none
  std::chrono::milliseconds flush_interval{100};    ///< how often the writer thread wakes
  std::size_t thread_buffer_bytes = 16u << 20;      ///< per thread, between two flushes
};

/// The default of CHORUS_TRACE_MAX_MB.
inline constexpr uint64_t default_max_mb = 256;

class recorder final : public observer {
 public:
  /// Creates the directory and the file and starts the writer thread; errc::config naming
  /// the path when either cannot be created. The file is created exclusively (O_EXCL,
  /// O_NOFOLLOW, mode 0644 less the umask): a symlink at its path is refused, a regular file
  /// left by an earlier run is replaced.
  static result<std::shared_ptr<recorder>> open(const recorder_options& options);
  /// Writes what is buffered and the `end` record, stops the writer, closes the file.
  ~recorder() override;

  /// Waits until every record appended before the call is in the file (tests, shutdown).
  void flush();
  const std::string& path() const { return path_; }
  /// Recording stopped (limit reached or a write failed).
  bool stopped() const { return stopped_.load(std::memory_order_relaxed); }
  /// Bytes in the file so far, and the CPU time the writer thread has used (benchmarks).
  uint64_t bytes_written() const { return bytes_out_.load(std::memory_order_relaxed); }
  std::chrono::nanoseconds writer_cpu() const {
    return std::chrono::nanoseconds(writer_cpu_ns_.load(std::memory_order_relaxed));
  }

  void on_enqueue(uint64_t handle, const tensor_spec& spec, time_point at) override;
  void on_callback(uint64_t handle, const tensor_spec& spec, const status& result, time_point enqueued,
                   time_point at) override;
  void on_ready(uint64_t handle, const tensor_spec& spec, uint64_t cycle, time_point at) override;
  void on_gossip_sent(int to, std::span<const uint8_t> bytes, time_point at) override;
  void on_gossip_received(std::span<const uint8_t> bytes, time_point at) override;
  void on_cycle(const cycle_event& c) override;
  void on_agreed(uint64_t cycle, std::span<const std::string> names,
                 std::span<const std::chrono::microseconds> latencies, time_point at) override;
  void on_stall(const std::string& name, std::span<const int> missing_ranks, time_point at) override;
  void on_bucket(const bucket_event& b, time_point at) override;
  void on_chunk_start(int stream, uint64_t sequence, std::size_t bytes, time_point at) override;
  void on_chunk_end(int stream, uint64_t sequence, std::size_t bytes, const status& result, time_point started,
                    time_point at) override;
  void on_steal(int thief, int victim, uint64_t sequence, time_point at) override;
  void on_error(std::string_view kind, const status& error, time_point at) override;
  /// Recorded as an error record of kind "nonfinite" (its message names tensors, ranks and mode),
  /// so every trace tool shows it without a new record kind.
  void on_nonfinite(std::span<const std::string> tensors, std::span<const int> ranks, std::string_view mode,
                    time_point at) override;
  /// A `compressed` record beside the chunk's chunk_end: the caller's bytes and the wire bytes.
  void on_compressed(int stream, std::size_t raw_bytes, std::size_t wire_bytes, time_point at) override;
  void on_direct_path(std::size_t max_bytes, time_point at) override;
  void on_call(const call_event& e, time_point at) override;
  void on_tunables(const tunables& t, time_point at) override;
  void on_autotune(const autotune_event& e, time_point at) override;

  struct thread_buffer;

 private:
  recorder(const recorder_options& options, std::FILE* file, std::string path);
  thread_buffer& local();
  uint32_t intern(thread_buffer& tb, std::string_view s);
  void write_spec(byte_writer& w, thread_buffer& tb, const tensor_spec& s);
  int64_t ns(time_point at) const;
  /// Encodes one record into the calling thread's buffer; `payload(writer, buffer)`.
  template <class Payload>
  void emit(record_kind kind, time_point at, Payload&& payload);

  void writer_loop();
  /// Moves every thread's records (string definitions first) into one block and writes it.
  void write_pending();
  /// Writes `body` as blocks, stopping at max_bytes with a `limit` record.
  void write_body(std::vector<std::byte>& body);
  bool write_block(std::span<const std::byte> body);
  void stop_recording();

  const recorder_options opts_;
  const uint64_t id_;            // unique per recorder in this process (thread-local lookup)
  std::FILE* file_;
  const std::string path_;
  const clock::time_point steady_base_;
  std::atomic<bool> stopped_{false};
  std::atomic<uint64_t> bytes_out_{0};
  std::atomic<int64_t> writer_cpu_ns_{0};

  std::mutex buffers_mu_;        // guards buffers_ (registration, the writer's walk)
  std::vector<std::unique_ptr<thread_buffer>> buffers_;

  std::mutex strings_mu_;        // guards the global intern table and defs_
  std::unordered_map<std::string, uint32_t> strings_;
  std::vector<std::byte> defs_;  // `string` records not yet written

  // Writer thread only (and the destructor after it joined).
  uint64_t written_ = 0;
  uint64_t records_ = 0;
  std::vector<std::byte> body_;

  std::mutex wake_mu_;
  std::condition_variable wake_cv_;
  std::condition_variable done_cv_;
  bool closing_ = false;
  uint64_t flush_asked_ = 0;     // generations, under wake_mu_
  uint64_t flush_done_ = 0;
  std::thread writer_;
};

/// The recorder CHORUS_TRACE=<dir> asks for (null when unset or empty), bounded by
/// CHORUS_TRACE_MAX_MB (0 = no bound; bad values were refused by read_config()). When the
/// directory or the file cannot be created (a symlink planted at the path included), one
/// warning and null: the job runs without recording.
result<std::shared_ptr<observer>> trace_from_config(const context& ctx, const telemetry_config& c);

}  // namespace chorus::telemetry::trace
