// The recorder: opening the file, and the hot path that encodes each event into the calling
// thread's record buffer (the writer thread that frames them into blocks: recorder_writer.cpp).
#include "telemetry/trace/recorder.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "runtime/core/log.hpp"
#include "telemetry/trace/recorder_buffer.hpp"

namespace chorus::telemetry::trace {

namespace {

std::atomic<uint64_t> next_recorder_id{1};

void write_status(byte_writer& w, const status& s) {
  w.u8(static_cast<uint8_t>(s.code()));
  if (!s.ok()) w.str(s.message());
}

void write_bytes(byte_writer& w, std::span<const uint8_t> b) {
  w.varint(b.size());
  for (auto v : b) w.u8(v);
}

/// Creates `path` afresh, never through a link: another local user who can write to the
/// directory could otherwise plant a symlink there and have the recorder overwrite its target.
/// A regular file left by an earlier run is removed first (unlink never follows a link; if a
/// link appears in between, the exclusive create fails and nothing is written).
result<std::FILE*> create_trace_file(const std::string& path) {
  constexpr int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
  int fd = ::open(path.c_str(), flags, 0644);
  if (fd < 0 && errno == EEXIST) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode))
      return status{errc::config, "refusing to write " + path + ": it is a symlink (remove it, or choose another directory)"};
    if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
      return status{errc::config, "refusing to write " + path + ": it exists and is not a regular file"};
    if (::unlink(path.c_str()) == 0 || errno == ENOENT) fd = ::open(path.c_str(), flags, 0644);
  }
  if (fd < 0) return status{errc::config, "cannot create " + path + ": " + std::strerror(errno)};
  std::FILE* f = ::fdopen(fd, "wb");
  if (!f) {
    int e = errno;
    ::close(fd);
    return status{errc::config, "cannot create " + path + ": " + std::strerror(e)};
  }
  return f;
}

}  // namespace

result<std::shared_ptr<recorder>> recorder::open(const recorder_options& options) {
  std::error_code ec;
  std::filesystem::create_directories(options.dir, ec);
  if (ec)
    return status{errc::config, "CHORUS_TRACE=" + options.dir + ": cannot create the directory: " + ec.message()};
  std::string path = (std::filesystem::path(options.dir) / (options.prefix + std::to_string(options.rank) + ".trace")).string();
  auto file = create_trace_file(path);
  if (!file) return status{errc::config, "CHORUS_TRACE=" + options.dir + ": " + file.error().message()};
  return std::shared_ptr<recorder>(new recorder(options, *file, std::move(path)));
}

recorder::recorder(const recorder_options& options, std::FILE* file, std::string path)
    : opts_(options), id_(next_recorder_id++), file_(file), path_(std::move(path)), steady_base_(clock::now()) {
  std::byte h[header_bytes]{};
  std::memcpy(h, file_magic.data(), file_magic.size());
  put_u16(h + 8, format_version);
  put_u16(h + 10, header_bytes);
  put_u32(h + 12, static_cast<uint32_t>(opts_.rank));
  put_u32(h + 16, static_cast<uint32_t>(opts_.size));
  auto ns_of = [](auto d) { return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count()); };
  put_u64(h + 20, ns_of(steady_base_.time_since_epoch()));
  put_u64(h + 28, ns_of(std::chrono::system_clock::now().time_since_epoch()));
  if (std::fwrite(h, 1, sizeof h, file_) != sizeof h || std::fflush(file_) != 0) {
    CHORUS_LOG(warn, "trace", "writing " << path_ << " failed: " << std::strerror(errno) << "; not recording");
    stopped_ = true;
  }
  written_ = sizeof h;
  writer_ = std::thread([this] { writer_loop(); });
}

recorder::~recorder() {
  {
    std::lock_guard lk(wake_mu_);
    closing_ = true;
  }
  wake_cv_.notify_all();
  writer_.join();
}

void recorder::flush() {
  std::unique_lock lk(wake_mu_);
  uint64_t gen = ++flush_asked_;
  wake_cv_.notify_all();
  done_cv_.wait(lk, [&] { return flush_done_ >= gen || closing_; });
}

// ---- hot path ----------------------------------------------------------------------------

recorder::thread_buffer& recorder::local() {
  struct entry {
    uint64_t id;
    thread_buffer* buffer;
  };
  // Recorder ids are never reused, so an entry of a recorder that is gone never matches.
  thread_local entry last{0, nullptr};
  thread_local std::vector<entry> mine;
  if (last.id == id_) return *last.buffer;
  for (auto& e : mine)
    if (e.id == id_) {
      last = e;
      return *e.buffer;
    }
  auto tb = std::make_unique<thread_buffer>();
  auto* p = tb.get();
  {
    std::lock_guard lk(buffers_mu_);
    buffers_.push_back(std::move(tb));
  }
  mine.push_back({id_, p});
  last = {id_, p};
  return *p;
}

uint32_t recorder::intern(thread_buffer& tb, std::string_view s) {
  if (auto it = tb.strings.find(s); it != tb.strings.end()) return it->second;
  uint32_t id = 0;
  {
    std::lock_guard lk(strings_mu_);
    auto [it, fresh] = strings_.try_emplace(std::string(s), static_cast<uint32_t>(strings_.size()));
    id = it->second;
    if (fresh) {
      // Defined before any record that uses it can reach the writer (it swaps the thread
      // buffers first, then takes the definitions).
      std::vector<std::byte> rec;
      byte_writer w(rec);
      w.u8(static_cast<uint8_t>(record_kind::string));
      w.svarint(0);
      w.varint(id);
      w.str(s);
      byte_writer d(defs_);
      d.varint(rec.size());
      defs_.insert(defs_.end(), rec.begin(), rec.end());
    }
  }
  tb.strings.emplace(std::string(s), id);
  return id;
}

void recorder::write_spec(byte_writer& w, thread_buffer& tb, const tensor_spec& s) {
  w.u8(static_cast<uint8_t>(s.kind));
  w.u8(static_cast<uint8_t>(s.type));
  w.u8(static_cast<uint8_t>(s.op));
  w.u8(static_cast<uint8_t>(static_cast<uint8_t>(s.device) | (s.priority != 0 ? spec_priority_bit : 0)));
  w.svarint(s.root);
  w.varint(static_cast<uint64_t>(s.process_set));
  w.varint(intern(tb, s.name));
  w.varint(s.shape.size());
  for (auto d : s.shape) w.svarint(d);
  if (s.priority != 0) w.svarint(s.priority);
}

int64_t recorder::ns(time_point at) const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(at - steady_base_).count();
}

template <class Payload>
void recorder::emit(record_kind kind, time_point at, Payload&& payload) {
  if (stopped_.load(std::memory_order_relaxed)) return;
  auto& tb = local();
  tb.scratch.clear();
  byte_writer w(tb.scratch);
  w.u8(static_cast<uint8_t>(kind));
  w.svarint(ns(at));
  payload(w, tb);
  std::lock_guard lk(tb.mu);
  if (tb.data.size() + tb.scratch.size() + 10 > opts_.thread_buffer_bytes) {
    ++tb.dropped;
    return;
  }
  byte_writer out(tb.data);
  out.varint(tb.scratch.size());
  tb.data.insert(tb.data.end(), tb.scratch.begin(), tb.scratch.end());
}

void recorder::on_enqueue(uint64_t handle, const tensor_spec& spec, time_point at) {
  emit(record_kind::enqueue, at, [&](byte_writer& w, thread_buffer& tb) {
    w.varint(handle);
    write_spec(w, tb, spec);
  });
}

void recorder::on_callback(uint64_t handle, const tensor_spec& spec, const status& result, time_point enqueued,
                           time_point at) {
  emit(record_kind::callback, at, [&](byte_writer& w, thread_buffer& tb) {
    w.varint(handle);
    write_spec(w, tb, spec);
    write_status(w, result);
    w.svarint(ns(enqueued));
  });
}

void recorder::on_ready(uint64_t handle, const tensor_spec& spec, uint64_t cycle, time_point at) {
  emit(record_kind::ready, at, [&](byte_writer& w, thread_buffer& tb) {
    w.varint(handle);
    write_spec(w, tb, spec);
    w.varint(cycle);
  });
}

void recorder::on_gossip_sent(int to, std::span<const uint8_t> bytes, time_point at) {
  emit(record_kind::gossip_sent, at, [&](byte_writer& w, thread_buffer&) {
    w.svarint(to);
    write_bytes(w, bytes);
  });
}

void recorder::on_gossip_received(std::span<const uint8_t> bytes, time_point at) {
  emit(record_kind::gossip_received, at, [&](byte_writer& w, thread_buffer&) { write_bytes(w, bytes); });
}

void recorder::on_cycle(const cycle_event& c) {
  emit(record_kind::cycle, c.finished, [&](byte_writer& w, thread_buffer&) {
    w.varint(c.cycle);
    w.varint(c.messages_sent);
    w.varint(c.messages_received);
    w.svarint(ns(c.started));
  });
}

void recorder::on_agreed(uint64_t cycle, std::span<const std::string> names,
                         std::span<const std::chrono::microseconds> latencies, time_point at) {
  emit(record_kind::agreed, at, [&](byte_writer& w, thread_buffer& tb) {
    w.varint(cycle);
    w.varint(names.size());
    for (std::size_t i = 0; i < names.size(); ++i) {
      w.varint(intern(tb, names[i]));
      w.varint(i < latencies.size() ? static_cast<uint64_t>(std::max<int64_t>(0, latencies[i].count())) : 0);
    }
  });
}

void recorder::on_stall(const std::string& name, std::span<const int> missing_ranks, time_point at) {
  emit(record_kind::stall, at, [&](byte_writer& w, thread_buffer& tb) {
    w.varint(intern(tb, name));
    w.varint(missing_ranks.size());
    for (int r : missing_ranks) w.svarint(r);
  });
}

void recorder::on_bucket(const bucket_event& b, time_point at) {
  emit(record_kind::bucket, at, [&](byte_writer& w, thread_buffer& tb) {
    w.varint(b.bucket);
    w.varint(b.cycle);
    w.varint(b.first_sequence);
    w.varint(b.chunks);
    w.varint(b.bytes);
    w.u8(b.in_place ? 1 : 0);
    w.varint(intern(tb, b.kind));
    w.varint(b.tensors.size());
    for (const auto& t : b.tensors) w.varint(intern(tb, t));
    w.varint(intern(tb, b.algorithm));
  });
}

void recorder::on_chunk_start(int stream, uint64_t sequence, std::size_t bytes, time_point at) {
  emit(record_kind::chunk_start, at, [&](byte_writer& w, thread_buffer&) {
    w.svarint(stream);
    w.varint(sequence);
    w.varint(bytes);
  });
}

void recorder::on_chunk_end(int stream, uint64_t sequence, std::size_t bytes, const status& result,
                            time_point started, time_point at) {
  emit(record_kind::chunk_end, at, [&](byte_writer& w, thread_buffer&) {
    w.svarint(stream);
    w.varint(sequence);
    w.varint(bytes);
    write_status(w, result);
    w.svarint(ns(started));
  });
}

void recorder::on_steal(int thief, int victim, uint64_t sequence, time_point at) {
  emit(record_kind::steal, at, [&](byte_writer& w, thread_buffer&) {
    w.svarint(thief);
    w.svarint(victim);
    w.varint(sequence);
  });
}

void recorder::on_error(std::string_view kind, const status& error, time_point at) {
  emit(record_kind::error, at, [&](byte_writer& w, thread_buffer& tb) {
    w.varint(intern(tb, kind));
    write_status(w, error);
  });
}

void recorder::on_nonfinite(std::span<const std::string> tensors, std::span<const int> ranks, std::string_view mode,
                            time_point at) {
  std::string text = "NaN/Inf check (" + std::string(mode) + "): ranks";
  for (int r : ranks) text += " " + std::to_string(r);
  text += "; tensors";
  for (const auto& t : tensors) text += " '" + t + "'";
  on_error("nonfinite", status{errc::invalid_argument, text}, at);
}

void recorder::on_compressed(int stream, std::size_t raw_bytes, std::size_t wire_bytes, time_point at) {
  emit(record_kind::compressed, at, [&](byte_writer& w, thread_buffer&) {
    w.svarint(stream);
    w.varint(raw_bytes);
    w.varint(wire_bytes);
  });
}

void recorder::on_direct_path(std::size_t max_bytes, time_point at) {
  emit(record_kind::direct_path, at, [&](byte_writer& w, thread_buffer&) { w.varint(max_bytes); });
}

void recorder::on_call(const call_event& e, time_point at) {
  emit(record_kind::call, at, [&](byte_writer& w, thread_buffer& tb) {
    w.varint(intern(tb, e.group));
    w.varint(e.seq);
    w.varint(intern(tb, e.call));
    w.varint(e.bytes);
    write_status(w, e.result ? *e.result : status{});
    w.svarint(ns(e.started));
  });
}

void recorder::on_tunables(const tunables& t, time_point at) {
  emit(record_kind::tunables, at, [&](byte_writer& w, thread_buffer&) {
    w.varint(t.fusion_threshold);
    w.varint(t.chunk_bytes);
    w.svarint(t.streams);
    w.varint(static_cast<uint64_t>(std::max<int64_t>(0, t.cycle_time.count())));
    w.varint(t.in_place_bytes);
  });
}

void recorder::on_autotune(const autotune_event& e, time_point at) {
  emit(record_kind::autotune, at, [&](byte_writer& w, thread_buffer&) {
    w.varint(e.cycle);
    w.varint(e.window);
    w.f64(e.score);
    w.u8(static_cast<uint8_t>((e.sample ? 1 : 0) | (e.switched ? 2 : 0)));
    w.varint(e.sample_index);
    w.f64(e.sample_score);
    const auto& t = e.in_force;
    w.varint(t.fusion_threshold);
    w.varint(t.chunk_bytes);
    w.svarint(t.streams);
    w.varint(static_cast<uint64_t>(std::max<int64_t>(0, t.cycle_time.count())));
    w.varint(t.in_place_bytes);
    w.varint(e.digest);
  });
}

}  // namespace chorus::telemetry::trace
