// stream_board: placement by earliest expected finish, rate samples over busy spans.
#include "runtime/collectives/stream_board.hpp"

#include <algorithm>
#include <cstdio>

namespace chorus {

stream_board::stream_board(int streams, options opts, std::function<reading(int)> read)
    : opts_(opts),
      read_(std::move(read)),
      views_(static_cast<std::size_t>(std::max(streams, 1))),
      busy_(views_.size()) {
  for (auto& v : views_) {
    v.rate = opts_.seed_rate;
    v.guessed = true;  // the first sample replaces the seed
  }
}

stream_board::reading stream_board::read_now(int stream) const {
  if (read_) return read_(stream);
  return {busy_[static_cast<std::size_t>(stream)].done_bytes, 0, 0};
}

void stream_board::take_sample(std::size_t i, double sample) {
  measured_rate(views_, i, sample, opts_.weight, opts_.max_backoff);
}

int stream_board::place(std::size_t bytes) {
  int to = choose(bytes);
  commit(to, bytes);
  return to;
}

int stream_board::choose(std::size_t bytes) {
  std::lock_guard lk(mu_);
  if (active_ <= 0 || active_ >= streams()) {
    age_idle_streams(views_, opts_.probe_after);
    return static_cast<int>(pick_stream(views_, bytes));
  }
  std::vector<stream_view> head(views_.begin(), views_.begin() + active_);
  age_idle_streams(head, opts_.probe_after);
  std::copy(head.begin(), head.end(), views_.begin());
  return static_cast<int>(pick_stream(head, bytes));
}

void stream_board::set_active(int n) {
  std::lock_guard lk(mu_);
  active_ = n;
}

void stream_board::commit(int stream, std::size_t bytes) {
  std::lock_guard lk(mu_);
  if (!valid(stream)) return;
  const auto to = static_cast<std::size_t>(stream);
  for (std::size_t i = 0; i < views_.size(); ++i)
    if (i != to && views_[i].outstanding == 0) ++views_[i].passed_over;
  views_[to].passed_over = 0;
  views_[to].outstanding += bytes;
}

void stream_board::moved_chunk(int from, int to, std::size_t bytes) {
  std::lock_guard lk(mu_);
  if (!valid(from) || !valid(to)) return;
  auto& f = views_[static_cast<std::size_t>(from)];
  f.outstanding -= std::min(f.outstanding, bytes);
  views_[static_cast<std::size_t>(to)].outstanding += bytes;
}

void stream_board::started(int stream, clock::time_point now) {
  std::lock_guard lk(mu_);
  if (!valid(stream)) return;
  auto& b = busy_[static_cast<std::size_t>(stream)];
  if (b.in_flight++ == 0) {
    b.mark = now;
    b.moved_at_mark = read_now(stream).moved;
  }
}

void stream_board::finished(int stream, std::size_t bytes, clock::time_point now) {
  std::lock_guard lk(mu_);
  if (!valid(stream)) return;
  const auto i = static_cast<std::size_t>(stream);
  auto& v = views_[i];
  auto& b = busy_[i];
  v.outstanding -= std::min(v.outstanding, bytes);
  b.done_bytes += bytes;
  if (b.in_flight > 0) --b.in_flight;
  // A small chunk tells nothing of bandwidth: no counters read (syscalls), the span goes on.
  if (bytes < opts_.min_sample_bytes / 4) return;
  const auto r = read_now(stream);
  if (r.acked > 0) {
    // TCP: the kernel's bytes acknowledged per second busy sending, since the last sample. Time
    // the stream waited for data (a peer's part of a chunk on a slow connection) is not busy.
    uint64_t acked = r.acked - std::min(r.acked, b.acked_at_mark);
    uint64_t busy = r.busy_us - std::min(r.busy_us, b.busy_at_mark);
    if (acked < opts_.min_sample_bytes || busy < opts_.min_busy_us) return;
    take_sample(i, static_cast<double>(acked) * 1e6 / static_cast<double>(busy));
    b.acked_at_mark = r.acked;
    b.busy_at_mark = r.busy_us;
    return;
  }
  // Elsewhere a sample covers a span in which the stream always had a chunk in flight, so its
  // bytes per second are what the connections gave while asked. Short spans and small chunks
  // (latency, waiting on peers) are no sample: the span goes on while the stream stays busy.
  auto span = now - b.mark;
  uint64_t moved = r.moved - std::min(r.moved, b.moved_at_mark);
  if (span < opts_.min_span || moved < opts_.min_sample_bytes) return;
  take_sample(i, static_cast<double>(moved) / std::chrono::duration<double>(span).count());
  b.mark = now;
  b.moved_at_mark = r.moved;
}

std::string stream_board::describe() const {
  auto v = snapshot();
  std::string out;
  char buf[96];
  for (std::size_t i = 0; i < v.size(); ++i) {
    std::snprintf(buf, sizeof buf, "%sstream %zu: %.1f MB/s %zu B held", i ? ", " : "", i, v[i].rate / 1e6,
                  v[i].outstanding);
    out += buf;
  }
  return out;
}

std::vector<stream_view> stream_board::snapshot() const {
  std::lock_guard lk(mu_);
  return views_;
}

}  // namespace chorus
