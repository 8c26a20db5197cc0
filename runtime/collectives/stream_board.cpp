// stream_board: placement by earliest expected finish, rate samples over busy spans.
#include "runtime/collectives/stream_board.hpp"

#include <algorithm>

namespace chorus {

stream_board::stream_board(int streams, options opts, std::function<uint64_t(int)> moved)
    : opts_(opts),
      moved_(std::move(moved)),
      views_(static_cast<std::size_t>(std::max(streams, 1))),
      busy_(views_.size()),
      sampled_(views_.size(), false) {
  for (auto& v : views_) v.rate = opts_.seed_rate;
}

uint64_t stream_board::moved_now(int stream) const {
  return moved_ ? moved_(stream) : busy_[static_cast<std::size_t>(stream)].done_bytes;
}

int stream_board::place(std::size_t bytes) {
  int to = choose(bytes);
  commit(to, bytes);
  return to;
}

int stream_board::choose(std::size_t bytes) {
  std::lock_guard lk(mu_);
  age_idle_streams(views_, opts_.probe_after);
  return static_cast<int>(pick_stream(views_, bytes));
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
    b.moved_at_mark = moved_now(stream);
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
  // A sample covers a span in which the stream always had a chunk in flight, so its bytes per
  // second are what the connections gave while asked; spans shorter than min_span are noise.
  auto span = now - b.mark;
  if (span < opts_.min_span) return;
  uint64_t moved = moved_now(stream);
  double sample = static_cast<double>(moved - std::min(moved, b.moved_at_mark)) / std::chrono::duration<double>(span).count();
  if (sample > 0) {
    v.rate = sampled_[i] ? blend_rate(v.rate, sample, opts_.weight) : sample;
    sampled_[i] = true;
  }
  b.mark = now;
  b.moved_at_mark = moved;
}

std::vector<stream_view> stream_board::snapshot() const {
  std::lock_guard lk(mu_);
  return views_;
}

}  // namespace chorus
