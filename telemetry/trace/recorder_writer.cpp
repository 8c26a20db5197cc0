// The recorder's writer thread (recorder.hpp): every flush interval it moves the threads' records
// into checksummed blocks (format.hpp), appends them to the file and enforces the size bound.
#include <time.h>

#include <cerrno>
#include <cstring>

#include "runtime/core/log.hpp"
#include "telemetry/trace/recorder.hpp"
#include "telemetry/trace/recorder_buffer.hpp"

namespace chorus::telemetry::trace {

namespace {

/// Walks the records of a body: calls f(offset, size) for each whole record.
template <class F>
void for_each_record(std::span<const std::byte> body, F&& f) {
  std::size_t at = 0;
  while (at < body.size()) {
    byte_reader r(body.subspan(at));
    uint64_t len = 0;
    if (!r.varint(len, "record length") || len > r.remaining()) return;
    std::size_t size = r.position() + static_cast<std::size_t>(len);
    if (!f(at, size)) return;
    at += size;
  }
}

/// Appends, behind its length, a record of `kind` that holds a time and a count (end: the
/// records written; lost: the records dropped).
void append_count_record(std::vector<std::byte>& out, record_kind kind, int64_t t_ns, uint64_t count) {
  std::vector<std::byte> rec;
  byte_writer w(rec);
  w.u8(static_cast<uint8_t>(kind));
  w.svarint(t_ns);
  w.varint(count);
  byte_writer(out).varint(rec.size());
  out.insert(out.end(), rec.begin(), rec.end());
}

}  // namespace

void recorder::writer_loop() {
  std::unique_lock lk(wake_mu_);
  for (;;) {
    wake_cv_.wait_for(lk, opts_.flush_interval, [&] { return closing_ || flush_asked_ > flush_done_; });
    bool closing = closing_;
    uint64_t asked = flush_asked_;
    lk.unlock();
    write_pending();
    timespec cpu{};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu);
    writer_cpu_ns_.store(int64_t{cpu.tv_sec} * 1000000000 + cpu.tv_nsec, std::memory_order_relaxed);
    if (closing) {
      if (!stopped()) {
        std::vector<std::byte> body;
        append_count_record(body, record_kind::end, ns(clock::now()), records_);
        write_block(body);
      }
      std::fclose(file_);
      file_ = nullptr;
    }
    lk.lock();
    flush_done_ = asked;
    done_cv_.notify_all();
    if (closing) return;
  }
}

void recorder::write_pending() {
  body_.clear();
  uint64_t dropped = 0;
  {
    std::lock_guard lk(buffers_mu_);
    for (auto& tb : buffers_) {
      {
        std::lock_guard tl(tb->mu);
        std::swap(tb->data, tb->spare);
        dropped += tb->dropped;
        tb->dropped = 0;
      }
      body_.insert(body_.end(), tb->spare.begin(), tb->spare.end());
      tb->spare.clear();
    }
  }
  std::vector<std::byte> defs;
  {
    std::lock_guard lk(strings_mu_);
    defs.swap(defs_);
  }
  if (!defs.empty()) body_.insert(body_.begin(), defs.begin(), defs.end());
  if (dropped) append_count_record(body_, record_kind::lost, ns(clock::now()), dropped);
  if (!body_.empty()) write_body(body_);
}

void recorder::write_body(std::vector<std::byte>& body) {
  if (stopped()) return;
  constexpr std::size_t block_target = 8u << 20;          // well under max_block_bytes
  constexpr uint64_t reserve = block_header_bytes + 24;   // the limit record's own block
  auto over = [&](std::size_t bytes) {
    return opts_.max_bytes && written_ + block_header_bytes + bytes + reserve > opts_.max_bytes;
  };
  std::size_t start = 0, end = 0;
  bool limited = false;
  for_each_record(body, [&](std::size_t at, std::size_t size) {
    if (at > start && at + size - start > block_target) {
      write_block(std::span(body).subspan(start, at - start));
      start = at;
    }
    if (over(at + size - start)) {
      limited = true;
      return false;
    }
    end = at + size;
    return true;
  });
  if (end > start) write_block(std::span(body).subspan(start, end - start));
  if (!limited) return;
  std::vector<std::byte> rec, limit;
  byte_writer w(rec);
  w.u8(static_cast<uint8_t>(record_kind::limit));
  w.svarint(ns(clock::now()));
  w.varint(opts_.max_bytes);
  byte_writer(limit).varint(rec.size());
  limit.insert(limit.end(), rec.begin(), rec.end());
  write_block(limit);
  CHORUS_LOG(warn, "trace", path_ << " reached CHORUS_TRACE_MAX_MB (" << opts_.max_bytes
                                  << " bytes); recording stopped, training goes on");
  stop_recording();
}

bool recorder::write_block(std::span<const std::byte> body) {
  if (stopped() || !file_) return false;
  std::byte h[block_header_bytes];
  put_u32(h, static_cast<uint32_t>(body.size()));
  put_u32(h + 4, crc32(body));
  bool ok = std::fwrite(h, 1, sizeof h, file_) == sizeof h &&
            std::fwrite(body.data(), 1, body.size(), file_) == body.size() && std::fflush(file_) == 0;
  if (!ok) {
    CHORUS_LOG(warn, "trace", "writing " << path_ << " failed: " << std::strerror(errno)
                                         << "; recording stopped, training goes on");
    stop_recording();
    return false;
  }
  written_ += sizeof h + body.size();
  bytes_out_.store(written_, std::memory_order_relaxed);
  for_each_record(body, [&](std::size_t, std::size_t) {
    ++records_;
    return true;
  });
  return true;
}

void recorder::stop_recording() { stopped_.store(true, std::memory_order_relaxed); }

}  // namespace chorus::telemetry::trace
