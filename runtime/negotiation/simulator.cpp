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
  sim->id_names_.resize(sim->ranks_.size());
  sim->busy_until_.resize(sim->ranks_.size());
  sim->inbox_.resize(sim->ranks_.size());
  return sim;
}

void simulator::enqueue(int rank, tensor_spec spec) {
  apply(rank, strategy(rank).local_ready(std::move(spec), now_));
}

void simulator::submit_score(int rank, double score, uint64_t digest) {
  apply(rank, strategy(rank).submit_score(score, digest, now_));
}

void simulator::request_shutdown(int rank) { apply(rank, strategy(rank).request_shutdown(now_)); }
void simulator::request_join(int rank) { apply(rank, strategy(rank).request_join(now_)); }

void simulator::apply(int rank, actions a, bool received) {
  auto& rec = records_[static_cast<std::size_t>(rank)];
  auto& busy = busy_until_[static_cast<std::size_t>(rank)];
  busy = std::max(busy, now_) + (received ? options_.processing_time : duration::zero());
  auto append = [](auto& into, auto& from) { into.insert(into.end(), from.begin(), from.end()); };
  append(rec.assigned, a.assigned);
  append(rec.batches, a.batches);
  // Batches are read after the call, as the negotiator actor reads them; replaying the
  // assignments cycle by cycle tells what each id stood for when its batch was agreed.
  auto& id_names = id_names_[static_cast<std::size_t>(rank)];
  std::size_t next_assigned = 0;
  for (const auto& b : a.batches) {
    for (; next_assigned < a.assigned.size() && a.assigned[next_assigned].cycle <= b.cycle; ++next_assigned) {
      const auto& x = a.assigned[next_assigned];
      if (id_names.size() <= x.id) id_names.resize(x.id + 1);
      id_names[x.id] = x.name;
    }
    auto& names = rec.batch_names.emplace_back();
    for (auto id : b.ids) {
      names.push_back(strategy(rank).registry().spec(id).name);
      const std::string truth = id < id_names.size() ? id_names[id] : "";
      if (names.back() != truth)
        rec.stale_lookups.push_back("cycle " + std::to_string(b.cycle) + " id " + std::to_string(id) + ": '" +
                                    names.back() + "' but agreed as '" + truth + "'");
    }
  }
  for (; next_assigned < a.assigned.size(); ++next_assigned) {
    const auto& x = a.assigned[next_assigned];
    if (id_names.size() <= x.id) id_names.resize(x.id + 1);
    id_names[x.id] = x.name;
  }
  rec.max_cycles_per_call = std::max(rec.max_cycles_per_call, a.cycles.size());
  append(rec.errors, a.errors);
  append(rec.warnings, a.warnings);
  append(rec.rejected, a.rejected);
  append(rec.scores, a.scores);
  append(rec.windows, a.windows);
  append(rec.cycles, a.cycles);
  if (a.shutdown_cycle && !rec.shutdown_cycle) rec.shutdown_cycle = a.shutdown_cycle;
  if (a.join_done) rec.joins.push_back(*a.join_done);
  if (a.fatal && !rec.fatal) rec.fatal = a.fatal;
  for (auto& out : a.send) {
    auto span = options_.max_latency - options_.min_latency;
    auto jitter = span.count() > 0 ? std::uniform_int_distribution<duration::rep>(0, span.count())(rng_) : 0;
    busy += options_.processing_time;  // messages leave one after the other
    auto message = std::make_unique<gossip_message>(std::move(out.message));
    if (options_.through_codec) {
      auto bytes = encode(*message);
      rec.bytes_sent += bytes.size();
      rec.largest_message_bytes = std::max(rec.largest_message_bytes, bytes.size());
      auto decoded = decode_message(bytes);
      if (!decoded) {
        if (!rec.fatal) rec.fatal = decoded.error();
        continue;
      }
      *message = std::move(decoded.value());
    }
    push(event{busy + options_.min_latency + duration(jitter), 0, out.to, event_kind::arrival, std::move(message)});
    ++in_flight_;
    ++total_sent_;
    ++rec.messages_sent;
  }
  wake_[static_cast<std::size_t>(rank)] = a.wake_at;
  if (a.wake_at) push(event{std::max(*a.wake_at, now_), 0, rank, event_kind::timer, nullptr});
}

void simulator::push(event e) {
  e.seq = seq_++;
  events_.push_back(std::move(e));
  std::push_heap(events_.begin(), events_.end(), std::greater<>{});
}

simulator::event simulator::pop() {
  std::pop_heap(events_.begin(), events_.end(), std::greater<>{});
  event e = std::move(events_.back());
  events_.pop_back();
  return e;
}

void simulator::handle(int rank, std::unique_ptr<gossip_message> m) {
  auto r = static_cast<std::size_t>(rank);
  if (!m) {
    // A timer; only the latest wake_at of a rank counts, older timer events are stale.
    if (wake_[r] && *wake_[r] <= now_) apply(rank, ranks_[r]->on_timer(now_));
    return;
  }
  --in_flight_;
  ++records_[r].messages_received;
  apply(rank, ranks_[r]->on_message(*m, now_), true);
}

void simulator::process(event e) {
  now_ = std::max(now_, e.at);
  auto r = static_cast<std::size_t>(e.rank);
  auto& inbox = inbox_[r];
  switch (e.kind) {
    case event_kind::arrival:
    case event_kind::timer:
      // A timer is a message to self, as in an actor's mailbox: both wait while the rank is
      // busy, in arrival order.
      if (busy_until_[r] <= now_ && inbox.empty()) return handle(e.rank, std::move(e.message));
      if (inbox.empty()) push(event{busy_until_[r], 0, e.rank, event_kind::drain, nullptr});
      inbox.push_back(std::move(e.message));
      return;
    case event_kind::drain: {
      if (inbox.empty()) return;
      if (busy_until_[r] > now_) return push(event{busy_until_[r], 0, e.rank, event_kind::drain, nullptr});
      auto m = std::move(inbox.front());
      inbox.pop_front();
      handle(e.rank, std::move(m));
      if (!inbox.empty()) push(event{std::max(busy_until_[r], now_), 0, e.rank, event_kind::drain, nullptr});
      return;
    }
  }
}

bool simulator::all_idle() const {
  return std::all_of(ranks_.begin(), ranks_.end(), [](const auto& s) { return s->idle(); });
}

bool simulator::run_until_idle(duration limit) {
  auto end = now_ + limit;
  while (in_flight_ > 0 || !all_idle()) {
    if (events_.empty() || events_.front().at > end) return false;
    process(pop());
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
  while (!events_.empty() && events_.front().at <= end) process(pop());
  now_ = end;
}

}  // namespace chorus::negotiation
