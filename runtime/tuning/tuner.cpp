// Windows -> samples -> search -> watch -> search again (tuner.hpp).
#include "runtime/tuning/tuner.hpp"

#include <algorithm>
#include <bit>

namespace chorus::tuning {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  auto n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

namespace {
/// The first search's options: its budget leaves room for the confirmation samples (and the
/// chunk neighbours sampled before them), so that
/// max_samples (HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES) bounds the samples until convergence.
optimizer_options first_search(const tuner_options& o) {
  auto s = o.search;
  const int confirmations = std::max(o.confirm_points, 0) + (o.confirm_raw_best ? 1 : 0);
  s.max_samples = std::max(s.max_samples - confirmations - 2 * std::max(o.confirm_chunk_steps, 0), 1);
  return s;
}

/// The points 1 .. steps steps either way of `centre` along `axis` that lie in `space`, nearest
/// first (one lower, one higher, then two ...), the other knobs kept.
std::vector<point> along_axis(const search_space& space, const point& centre, std::size_t axis, int steps) {
  std::vector<point> out;
  for (int k = 1; k <= steps && axis < centre.size(); ++k)
    for (int dir : {-1, 1}) {
      point q = centre;
      q[axis] += dir * k;
      if (space.contains(q)) out.push_back(std::move(q));
    }
  return out;
}
}  // namespace

tuner::tuner(search_space space, tuner_options options, point start)
    : options_(options), opt_(space, first_search(options), {start}), current_(std::move(start)) {
  // Every setting that shapes a decision: ranks configured differently show different digests.
  for (double x : {double(options.search.seed), double(options.search.warmup_samples), double(options.search.max_samples),
                   options.search.noise, options.search.min_improvement, double(options.search.min_proposals), options.search.exploration,
                   double(options.search.candidates), double(options.windows_per_sample), double(options.settle_windows),
                   options.drop_threshold, double(options.drop_windows), double(options.retune_samples),
                   double(options.retune_starts), double(options.confirm_points),
                   double(options.retune_stream_steps), double(options.retune_chunk_steps), double(options.restart_on_drift),
                   double(options.confirm_drop), double(options.confirm_chunk_steps), double(options.confirm_raw_best)})
    fold(std::bit_cast<uint64_t>(x));
  for (auto axis : options.retune_pinned_axes) fold(0x919 + axis);
  for (const auto& a : space.axes())
    for (double v : a.values) fold(std::bit_cast<uint64_t>(v));
  for (int i : current_) fold(static_cast<uint64_t>(i));
}

void tuner::switch_to(point p, tuner_step& out) {
  if (p == current_) return;
  current_ = std::move(p);
  settle_left_ = options_.settle_windows;
  windows_.clear();
  out.switch_to = current_;
  for (int i : current_) fold(static_cast<uint64_t>(i) + 0x100);
}

bool tuner::switch_to_next(std::vector<point>& queue, tuner_step& out) {
  if (queue.empty()) return false;
  point next = std::move(queue.front());
  queue.erase(queue.begin());
  switch_to(std::move(next), out);
  return true;
}

void tuner::search_again(tuner_step& out) {
  // The network changed: search again, from the best points known and the stream counts and
  // chunk sizes next to the ones in force, with a smaller budget, the pinned axes kept.
  std::vector<observation> known = opt_.history();
  std::stable_sort(known.begin(), known.end(), [](const auto& a, const auto& b) { return a.score > b.score; });
  auto opts = options_.search;
  opts.pinned.assign(current_.size(), -1);
  for (auto axis : options_.retune_pinned_axes)
    if (axis < current_.size()) opts.pinned[axis] = current_[axis];
  std::vector<point> starts{current_};
  auto add = [&](point p) {
    for (std::size_t d = 0; d < p.size(); ++d)
      if (opts.pinned[d] >= 0) p[d] = opts.pinned[d];
    if (std::find(starts.begin(), starts.end(), p) == starts.end()) starts.push_back(std::move(p));
  };
  for (const auto& o : known) {
    if (starts.size() >= static_cast<std::size_t>(std::max(options_.retune_starts, 1))) break;
    add(o.at);
  }
  const std::pair<std::size_t, int> neighbours[] = {{0, options_.retune_stream_steps}, {1, options_.retune_chunk_steps}};
  for (auto [axis, steps] : neighbours)
    for (const point& q : along_axis(opt_.space(), current_, axis, steps)) add(q);
  ++search_;
  opts.seed = mix64(opts.seed + search_);
  opts.max_samples = std::max(options_.retune_samples, static_cast<int>(starts.size()));
  opts.warmup_samples = static_cast<int>(starts.size());
  opt_ = bayes_optimizer(opt_.space(), opts, starts);
  phase_ = tuner_phase::searching;
  confirming_ = false;
  probe_.clear();
  confirm_planned_ = false;
  confirm_.clear();
  confirmed_.clear();
  anchor_ = current_;
  drift_restarted_ = false;
  baseline_.reset();
  low_ = 0;
  windows_.clear();
  out.searching_again = true;
  fold(0x5ea4c4 + search_);
}

bool tuner::drifted() const {
  // The first and the last sample of the search's first point differ by more than the drop
  // threshold, either way: the level moved under the search.
  if (!anchor_) return false;
  const auto& h = opt_.history();
  auto first = std::find_if(h.begin(), h.end(), [&](const observation& o) { return o.at == *anchor_; });
  auto last = std::find_if(h.rbegin(), h.rend(), [&](const observation& o) { return o.at == *anchor_; });
  if (first == h.end() || &*first == &*last) return false;
  const double keep = 1 - options_.drop_threshold;
  return last->score < keep * first->score || first->score < keep * last->score;
}

point tuner::settle_on() const {
  // The best by posterior mean among the points sampled again: a point measured once may owe
  // its rank to one lucky window.
  for (auto& p : opt_.ranked(opt_.history().size()))
    if (confirmed_.empty() || std::find(confirmed_.begin(), confirmed_.end(), p) != confirmed_.end()) return p;
  return current_;
}

tuner_step tuner::on_window(double score) {
  tuner_step out;
  fold(std::bit_cast<uint64_t>(score));
  if (settle_left_ > 0) {
    --settle_left_;
    return out;
  }
  if (phase_ == tuner_phase::watching && baseline_) {
    low_ = score < (1 - options_.drop_threshold) * *baseline_ ? low_ + 1 : 0;
    if (low_ < options_.drop_windows) return out;
    if (options_.confirm_drop) before_drop_ = watched{opt_, *baseline_};
    search_again(out);
    return out;
  }
  windows_.push_back(score);
  if (windows_.size() < static_cast<std::size_t>(std::max(options_.windows_per_sample, 1))) return out;
  double s = median(windows_);
  windows_.clear();
  out.sample = sample_record{++samples_, current_, s, phase_, search_};
  fold(samples_);
  if (phase_ == tuner_phase::watching) {
    // The converged level: the lower of this sample and the settled point's last one in the
    // search. One lucky sample must not set a level that the point's own noise falls below.
    baseline_ = settled_score_ ? std::min(s, *settled_score_) : s;
    return out;
  }
  opt_.observe(current_, s);
  if (before_drop_) {
    // The first sample after a drop, at the point in force: is the drop real?
    auto kept = std::move(*before_drop_);
    before_drop_.reset();
    if (s >= (1 - options_.drop_threshold) * kept.baseline) {
      opt_ = std::move(kept.opt);
      phase_ = tuner_phase::watching;
      baseline_ = kept.baseline;
      anchor_.reset();
      out.converged = true;
      fold(0xfa15e);
      return out;
    }
  }
  if (!confirming_) {
    if (auto next = opt_.next()) {
      switch_to(next->at, out);  // never the point in force: sampled points are not proposed
      return out;
    }
    confirming_ = true;
    confirm_planned_ = false;
    probe_.clear();
    // The chunk sizes next to its best point, before the confirmation.
    const auto best = opt_.ranked(1);
    if (!best.empty()) probe_ = along_axis(opt_.space(), best.front(), 1, options_.confirm_chunk_steps);
    fold(0xc4c + probe_.size());
  }
  if (switch_to_next(probe_, out)) return out;
  if (!confirm_planned_) {
    // The search stopped: sample its best points again (the one in force first, which needs
    // no switch), so that their second samples join the fit before one is chosen.
    confirm_planned_ = true;
    confirm_ = opt_.ranked(static_cast<std::size_t>(std::max(options_.confirm_points, 0)));
    if (options_.confirm_raw_best && !confirm_.empty()) {
      // The earliest of the best single samples (the same on every rank).
      const auto& h = opt_.history();
      auto raw = std::max_element(h.begin(), h.end(), [](const observation& a, const observation& b) { return a.score < b.score; });
      if (raw != h.end() && std::find(confirm_.begin(), confirm_.end(), raw->at) == confirm_.end())
        confirm_.push_back(raw->at);
    }
    confirmed_ = confirm_;
    if (auto here = std::find(confirm_.begin(), confirm_.end(), current_); here != confirm_.end())
      std::rotate(confirm_.begin(), here, here + 1);
    // A search started by a drop also samples its first point again, last (drifted()).
    if (options_.restart_on_drift && !drift_restarted_ && anchor_ &&
        std::find(confirm_.begin(), confirm_.end(), *anchor_) == confirm_.end())
      confirm_.push_back(*anchor_);
    fold(0xc0f1 + confirm_.size());
  }
  if (switch_to_next(confirm_, out)) return out;
  if (options_.restart_on_drift && !drift_restarted_ && drifted()) {
    search_again(out);
    drift_restarted_ = true;
    fold(0xd21f7);
    return out;
  }
  confirming_ = false;
  phase_ = tuner_phase::watching;
  out.converged = true;
  fold(0xc0de);
  point settled = settle_on();
  const auto& h = opt_.history();
  auto last = std::find_if(h.rbegin(), h.rend(), [&](const observation& o) { return o.at == settled; });
  settled_score_.reset();
  if (last != h.rend()) settled_score_ = last->score;
  switch_to(std::move(settled), out);
  return out;
}

}  // namespace chorus::tuning
