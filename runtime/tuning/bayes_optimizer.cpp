// Warm-up points, candidate generation and the expected-improvement argmax.
#include "runtime/tuning/bayes_optimizer.hpp"

#include <algorithm>
#include <cmath>

#include "runtime/tuning/gaussian_process.hpp"

namespace chorus::tuning {

uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

bayes_optimizer::bayes_optimizer(search_space space, optimizer_options options, std::vector<point> start)
    : space_(std::move(space)), options_(options) {
  for (auto& p : start)
    if (space_.contains(p) && std::find(start_.begin(), start_.end(), p) == start_.end()) start_.push_back(std::move(p));
}

bool bayes_optimizer::sampled(const point& p) const {
  return std::any_of(history_.begin(), history_.end(), [&](const observation& o) { return o.at == p; });
}

int bayes_optimizer::pin(std::size_t d) const {
  if (d >= options_.pinned.size()) return -1;
  int v = options_.pinned[d];
  return v >= 0 && v < static_cast<int>(space_.axes()[d].values.size()) ? v : -1;
}

uint64_t bayes_optimizer::free_size() const {
  constexpr uint64_t cap = uint64_t(1) << 62;
  uint64_t n = 1;
  for (std::size_t d = 0; d < space_.dims(); ++d) {
    if (pin(d) >= 0) continue;
    const uint64_t values = space_.axes()[d].values.size();
    n = n > cap / values ? cap : n * values;
  }
  return n;
}

point bayes_optimizer::random_point(uint64_t draw) const {
  point p(space_.dims());
  uint64_t h = mix64(options_.seed ^ mix64(draw));
  for (std::size_t d = 0; d < p.size(); ++d) {
    h = mix64(h + d);
    p[d] = pin(d) >= 0 ? pin(d) : static_cast<int>(h % space_.axes()[d].values.size());
  }
  return p;
}

point bayes_optimizer::design_point(std::size_t row, std::size_t rows) const {
  point p(space_.dims());
  for (std::size_t d = 0; d < p.size(); ++d) {
    if (pin(d) >= 0) {
      p[d] = pin(d);
      continue;
    }
    // This axis's permutation of the rows' strata (Fisher-Yates, seeded per axis).
    std::vector<std::size_t> strata(rows);
    for (std::size_t i = 0; i < rows; ++i) strata[i] = i;
    uint64_t h = mix64(options_.seed ^ mix64(0x1a7 + d));
    for (std::size_t i = rows; i > 1; --i) {
      h = mix64(h + i);
      std::swap(strata[i - 1], strata[h % i]);
    }
    // The value nearest the middle of the row's stratum of [0, 1] (log scale).
    p[d] = space_.snap_axis(d, (double(strata[row]) + 0.5) / double(rows));
  }
  return p;
}

void bayes_optimizer::observe(point at, double score) { history_.push_back({std::move(at), score}); }

std::optional<proposal> bayes_optimizer::next() const {
  auto n = static_cast<int>(history_.size());
  if (n >= options_.max_samples) return std::nullopt;
  uint64_t space_size = free_size();
  auto inside = [&](const point& p) {
    for (std::size_t d = 0; d < p.size(); ++d)
      if (pin(d) >= 0 && p[d] != pin(d)) return false;
    return true;
  };
  auto distinct = [&] {
    std::vector<point> seen;
    for (const auto& o : history_)
      if (inside(o.at) && std::find(seen.begin(), seen.end(), o.at) == seen.end()) seen.push_back(o.at);
    return seen.size();
  }();
  if (distinct >= space_size) return std::nullopt;  // nothing left to learn by sampling

  // 1. Warm-up: the starting points not yet sampled, then pseudo-random points.
  for (const auto& p : start_)
    if (!sampled(p)) return proposal{p, true, 0};
  if (n < options_.warmup_samples) {
    // A Latin hypercube over the warm-up rows after the starting points, so that every axis's
    // range is covered; a row already sampled gives way to a pseudo-random point.
    const int starts = static_cast<int>(start_.size());
    const int rows = options_.warmup_samples - starts;
    if (n >= starts && n - starts < rows) {
      auto p = design_point(static_cast<std::size_t>(n - starts), static_cast<std::size_t>(rows));
      if (!sampled(p)) return proposal{p, true, 0};
    }
    for (uint64_t draw = 0;; ++draw) {
      auto p = random_point((uint64_t(n) << 32) + draw);
      if (!sampled(p)) return proposal{p, true, 0};
    }
  }

  // 2. Fit, and take the incumbent as the best posterior mean at a sampled point.
  std::vector<std::vector<double>> x;
  std::vector<double> y;
  for (const auto& o : history_) {
    x.push_back(space_.unit(o.at));
    y.push_back(o.score);
  }
  auto gp = gaussian_process::fit(x, y, options_.noise);
  double incumbent = -INFINITY;
  for (const auto& u : x) incumbent = std::max(incumbent, gp.predict(u).mean);
  double scale = std::max(std::fabs(incumbent), 1e-300);

  // 3. Candidates: every point when the space is small, else seeded random points and the
  //    lines through the three best samples along each axis, and
  //    their diagonal neighbours. Sampled points are skipped.
  std::vector<point> cands;
  if (space_size <= uint64_t(options_.candidates) * 4) {
    point p(space_.dims(), 0);
    for (std::size_t d = 0; d < p.size(); ++d) p[d] = std::max(pin(d), 0);
    for (uint64_t i = 0; i < space_size; ++i) {
      cands.push_back(p);
      for (std::size_t d = 0; d < p.size(); ++d) {
        if (pin(d) >= 0) continue;
        if (++p[d] < static_cast<int>(space_.axes()[d].values.size())) break;
        p[d] = 0;
      }
    }
  } else {
    for (int i = 0; i < options_.candidates; ++i) cands.push_back(random_point((uint64_t(n) << 32) + 0x80000000ULL + i));
    std::vector<std::size_t> order(history_.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return y[a] > y[b]; });
    for (std::size_t k = 0; k < std::min<std::size_t>(3, order.size()); ++k) {
      point base = history_[order[k]].at;
      for (std::size_t d = 0; d < base.size(); ++d)
        if (pin(d) >= 0) base[d] = pin(d);
      for (std::size_t d = 0; d < base.size(); ++d) {
        if (pin(d) >= 0) continue;
        for (int v = 0; v < static_cast<int>(space_.axes()[d].values.size()); ++v) {  // the whole line
          point q = base;
          q[d] = v;
          cands.push_back(q);
        }
        for (std::size_t e = d + 1; e < base.size(); ++e) {  // and diagonal steps of two axes
          if (pin(e) >= 0) continue;
          for (int sd : {-1, 1})
            for (int se : {-1, 1}) {
              point q = base;
              q[d] += sd;
              q[e] += se;
              if (space_.contains(q)) cands.push_back(q);
            }
        }
      }
    }
  }
  std::optional<proposal> best;
  for (const auto& c : cands) {
    if (sampled(c)) continue;
    double ei = expected_improvement(gp.predict(space_.unit(c)), incumbent, options_.exploration * scale) / scale;
    if (!best || ei > best->expected_improvement) best = proposal{c, false, ei};
  }
  // A fit to the warm-up points alone can be flat (close scores): it may not stop the search
  // before it proposed min_proposals points of its own.
  const bool may_stop = n >= std::max(options_.warmup_samples, static_cast<int>(start_.size())) + options_.min_proposals;
  if (!best || (may_stop && best->expected_improvement < options_.min_improvement)) return std::nullopt;
  return best;
}

namespace {
/// The posterior mean at every sampled point (a fit to the whole history).
std::vector<double> posterior_means(const search_space& space, const std::vector<observation>& history, double noise) {
  std::vector<std::vector<double>> x;
  std::vector<double> y;
  for (const auto& o : history) {
    x.push_back(space.unit(o.at));
    y.push_back(o.score);
  }
  auto gp = gaussian_process::fit(x, y, noise);
  std::vector<double> means;
  for (const auto& u : x) means.push_back(gp.predict(u).mean);
  return means;
}
}  // namespace

std::optional<observation> bayes_optimizer::best() const {
  if (history_.empty()) return std::nullopt;
  auto means = posterior_means(space_, history_, options_.noise);
  auto arg = std::max_element(means.begin(), means.end()) - means.begin();  // first of equals
  return history_[static_cast<std::size_t>(arg)];
}

std::vector<point> bayes_optimizer::ranked(std::size_t k) const {
  if (history_.empty() || k == 0) return {};
  auto means = posterior_means(space_, history_, options_.noise);
  std::vector<std::size_t> order(history_.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return means[a] > means[b]; });
  std::vector<point> out;
  for (auto i : order) {
    if (out.size() >= k) break;
    if (std::find(out.begin(), out.end(), history_[i].at) == out.end()) out.push_back(history_[i].at);
  }
  return out;
}

}  // namespace chorus::tuning
