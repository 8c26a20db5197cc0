// The virtual-clock network that drives N negotiation strategies in one process.
#include "runtime/negotiation/simulator.hpp"

#include <algorithm>

namespace chorus::negotiation {

result<std::unique_ptr<simulator>> simulator::create(int size, const simulator_options& options) {
  if (options.max_latency < options.min_latency || options.min_latency < duration::zero()) {
    return status{errc::config, "simulator: latency range is empty or negative"};
  }
  std::unique_ptr<simulator> sim(new simulator(options));
  for (int r = 0; r < size; ++r) {
    auto s = make_strategy(options.strategy, r, size, options.negotiation);
    if (!s) return s.error();
    sim->ranks_.push_back(std::move(s.value()));
  }
  if (sim->ranks_.empty()) return status{errc::config, "simulator: size must be at least 1"};
  sim->records_.resize(sim->ranks_.size());
  sim->wake_.resize(sim->ranks_.size());
  return sim;
}

void simulator::enqueue(int rank, tensor_spec spec) {
  apply(rank, strategy(rank).local_ready(std::move(spec), now_));
}

void simulator::submit_score(int rank, double score) { apply(rank, strategy(rank).submit_score(score, now_)); }

void simulator::request_shutdown(int rank) { apply(rank, strategy(rank).request_shutdown(now_)); }

void simulator::apply(int rank, actions a) {
  auto& rec = records_[static_cast<std::size_t>(rank)];
  auto append = [](auto& into, auto& from) { into.insert(into.end(), from.begin(), from.end()); };
  append(rec.assigned, a.assigned);
  append(rec.batches, a.batches);
  append(rec.errors, a.errors);
  append(rec.warnings, a.warnings);
  append(rec.rejected, a.rejected);
  append(rec.scores, a.scores);
  append(rec.cycles, a.cycles);
  if (a.shutdown_cycle && !rec.shutdown_cycle) rec.shutdown_cycle = a.shutdown_cycle;
  if (a.fatal && !rec.fatal) rec.fatal = a.fatal;
  for (auto& out : a.send) {
    auto span = options_.max_latency - options_.min_latency;
    auto jitter = span.count() > 0 ? std::uniform_int_distribution<duration::rep>(0, span.count())(rng_) : 0;
    event e{now_ + options_.min_latency + duration(jitter), seq_++, out.to, std::move(out.message)};
    if (options_.through_codec) {
      auto decoded = decode_message(encode(*e.message));
      if (!decoded) {
        if (!rec.fatal) rec.fatal = decoded.error();
        continue;
      }
      e.message = std::move(decoded.value());
    }
    events_.push(std::move(e));
    ++in_flight_;
    ++total_sent_;
    ++rec.messages_sent;
  }
  wake_[static_cast<std::size_t>(rank)] = a.wake_at;
  if (a.wake_at) events_.push(event{std::max(*a.wake_at, now_), seq_++, rank, std::nullopt});
}

void simulator::process(event e) {
  now_ = std::max(now_, e.at);
  auto r = static_cast<std::size_t>(e.rank);
  if (e.message) {
    --in_flight_;
    ++records_[r].messages_received;
    apply(e.rank, ranks_[r]->on_message(*e.message, now_));
  } else if (wake_[r] && *wake_[r] <= now_) {
    // Only the latest wake_at of a rank counts; older timer events are stale.
    apply(e.rank, ranks_[r]->on_timer(now_));
  }
}

bool simulator::all_idle() const {
  return std::all_of(ranks_.begin(), ranks_.end(), [](const auto& s) { return s->idle(); });
}

bool simulator::run_until_idle(duration limit) {
  auto end = now_ + limit;
  while (in_flight_ > 0 || !all_idle()) {
    if (events_.empty() || events_.top().at > end) return false;
    auto e = events_.top();
    events_.pop();
    process(std::move(e));
  }
  return true;
}

std::string simulator::divergence() const {
  auto ids = [](const std::vector<uint32_t>& v) {
    std::string s = "[";
    for (std::size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
    return s + "]";
  };
  const auto& ref = records_[0];
  for (std::size_t r = 1; r < records_.size(); ++r) {
    const auto& rec = records_[r];
    auto at = [&](const char* what, std::size_t i, const std::string& mine, const std::string& theirs) {
      return "rank " + std::to_string(r) + " " + what + " " + std::to_string(i) + ": " + mine + " but rank 0 has " +
             theirs;
    };
    for (std::size_t i = 0; i < std::max(rec.assigned.size(), ref.assigned.size()); ++i) {
      auto show = [&](const rank_record& x) {
        return i < x.assigned.size() ? x.assigned[i].name + "=" + std::to_string(x.assigned[i].id) : "nothing";
      };
      bool same = i < rec.assigned.size() && i < ref.assigned.size() && rec.assigned[i].name == ref.assigned[i].name &&
                  rec.assigned[i].id == ref.assigned[i].id && rec.assigned[i].spec == ref.assigned[i].spec;
      if (!same) return at("id", i, show(rec), show(ref));
    }
    for (std::size_t i = 0; i < std::max(rec.batches.size(), ref.batches.size()); ++i) {
      auto show = [&](const rank_record& x) {
        return i < x.batches.size() ? "cycle " + std::to_string(x.batches[i].cycle) + " ids " + ids(x.batches[i].ids)
                                    : "nothing";
      };
      if (show(rec) != show(ref)) return at("batch", i, show(rec), show(ref));
    }
    for (std::size_t i = 0; i < std::max(rec.errors.size(), ref.errors.size()); ++i) {
      auto show = [&](const rank_record& x) { return i < x.errors.size() ? "'" + x.errors[i].message + "'" : "nothing"; };
      if (show(rec) != show(ref)) return at("error", i, show(rec), show(ref));
    }
    for (std::size_t i = 0; i < std::max(rec.warnings.size(), ref.warnings.size()); ++i) {
      auto show = [&](const rank_record& x) {
        return i < x.warnings.size() ? "'" + x.warnings[i].message + "'" : "nothing";
      };
      if (show(rec) != show(ref)) return at("warning", i, show(rec), show(ref));
    }
    auto fatal = [](const rank_record& x) { return x.fatal ? "'" + x.fatal->message() + "'" : std::string("nothing"); };
    if (fatal(rec) != fatal(ref)) return at("fatal", 0, fatal(rec), fatal(ref));
  }
  return "";
}

void simulator::run_for(duration d) {
  auto end = now_ + d;
  while (!events_.empty() && events_.top().at <= end) {
    auto e = events_.top();
    events_.pop();
    process(std::move(e));
  }
  now_ = end;
}

}  // namespace chorus::negotiation
