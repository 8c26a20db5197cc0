// The gossip strategy: cycle start rules and dissemination rounds (protocol in gossip.hpp).
#include "runtime/negotiation/gossip.hpp"

#include <string>

namespace chorus::negotiation {

int gossip_rounds(int size) {
  int rounds = 0;
  while ((1LL << rounds) < size) ++rounds;
  return rounds;
}

gossip_negotiator::gossip_negotiator(int rank, int size, const negotiation_options& options)
    : ledger_strategy(rank, size, options), rounds_(static_cast<uint32_t>(gossip_rounds(size))) {}

int gossip_negotiator::send_peer(uint32_t round) const {
  return static_cast<int>((rank_ + (int64_t{1} << round)) % size_);
}

int gossip_negotiator::recv_peer(uint32_t round) const {
  int64_t step = (int64_t{1} << round) % size_;
  return static_cast<int>((rank_ - step + size_) % size_);
}

actions gossip_negotiator::on_message(const gossip_message& m, time_point now) {
  actions out;
  if (ledger_.failed()) return out;
  uint64_t current = last_cycle_ + 1;  // the cycle we are in or will start next
  std::string problem;
  if (m.kind != message_kind::gossip) {
    problem = "a non-gossip message (kind " + std::to_string(static_cast<int>(m.kind)) + ")";
  } else if (m.round >= rounds_) {
    problem = "round " + std::to_string(m.round) + " of " + std::to_string(rounds_);
  } else if (m.from != recv_peer(m.round)) {
    problem = "round " + std::to_string(m.round) + " from rank " + std::to_string(m.from) + " instead of rank " +
              std::to_string(recv_peer(m.round));
  } else if (m.cycle > current + (running_ ? 1 : 0)) {
    // Finishing cycle c needs every rank's contribution to c, so no peer can be more than
    // one cycle ahead of a running rank, or ahead at all of an idle one.
    problem = "cycle " + std::to_string(m.cycle) + " from rank " + std::to_string(m.from) +
              " while this rank finished cycle " + std::to_string(last_cycle_);
  } else if (m.cycle < current || (m.cycle == current && running_ && m.round < next_round_) ||
             early_.count({m.cycle, m.round})) {
    problem = "cycle " + std::to_string(m.cycle) + " round " + std::to_string(m.round) +
              " again or too late (this rank finished cycle " + std::to_string(last_cycle_) + ")";
  }
  if (!problem.empty()) {
    ledger_.fail(status{errc::protocol, "gossip on rank " + std::to_string(rank_) + ": " + problem}, out);
    return out;
  }
  early_.emplace(std::pair{m.cycle, m.round}, m);
  advance(now, out);
  return out;
}

void gossip_negotiator::advance(time_point now, actions& out) {
  for (;;) {
    if (ledger_.failed()) break;
    if (running_) {
      auto it = early_.find({last_cycle_ + 1, next_round_});
      if (it == early_.end()) break;
      merge(state_, it->second);
      early_.erase(it);
      ++stats_.messages_received;
      if (++next_round_ < rounds_) {
        send_round(next_round_, out);
      } else {
        finish_cycle(now, out);
      }
      continue;
    }
    bool joined = !early_.empty() && early_.begin()->first.first == last_cycle_ + 1;
    auto may_start = [&] {
      return !last_start_ || now >= *last_start_ + ledger_.options().cycle_time ||
             (ledger_.options().early_start && ledger_.has_awaited()) || ledger_.fills_bucket();
    };
    if (joined || (ledger_.has_new() && !ledger_.holds_back() && may_start())) {
      start_cycle(now, out);
      continue;
    }
    break;
  }
  out.wake_at = ledger_.next_deadline();
  if (!running_ && ledger_.has_new() && !ledger_.holds_back() && last_start_) {
    auto start_at = *last_start_ + ledger_.options().cycle_time;
    if (!out.wake_at || start_at < *out.wake_at) out.wake_at = start_at;
  }
}

void gossip_negotiator::start_cycle(time_point now, actions& out) {
  running_ = true;
  last_start_ = now;
  next_round_ = 0;
  state_ = ledger_.contribution();
  state_.kind = message_kind::gossip;
  state_.cycle = last_cycle_ + 1;
  state_.from = rank_;
  stats_ = cycle_stats{state_.cycle, 0, 0, now, now};
  if (rounds_ == 0) {
    finish_cycle(now, out);
  } else {
    send_round(0, out);
  }
}

void gossip_negotiator::send_round(uint32_t round, actions& out) {
  state_.round = round;
  out.send.push_back({send_peer(round), state_});
  ++stats_.messages_sent;
}

void gossip_negotiator::finish_cycle(time_point now, actions& out) {
  running_ = false;
  last_cycle_ = state_.cycle;
  stats_.finished = now;
  out.cycles.push_back(stats_);
  ledger_.resolve(state_, last_cycle_, now, out);
}

}  // namespace chorus::negotiation
