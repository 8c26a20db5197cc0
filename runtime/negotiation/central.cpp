// The central strategy: reports to rank 0, polls for idle workers, answers to everyone
// (protocol in central.hpp).
#include "runtime/negotiation/central.hpp"

#include <string>

namespace chorus::negotiation {

central_negotiator::central_negotiator(int rank, int size, const negotiation_options& options)
    : ledger_strategy(rank, size, options) {}

actions central_negotiator::on_timer(time_point now) {
  actions out;
  ledger_.on_timer(now);
  // Polls go out from the timer only: messages that reached rank 0's mailbox before the
  // timer are handled first, so a worker whose report is merely queued is not polled.
  poll_silent_workers(now, out);
  advance(now, out);
  return out;
}

gossip_message central_negotiator::header(message_kind kind, uint64_t cycle) const {
  gossip_message m;
  m.kind = kind;
  m.cycle = cycle;
  m.from = rank_;
  return m;
}

actions central_negotiator::on_message(const gossip_message& m, time_point now) {
  actions out;
  if (ledger_.failed()) return out;
  if (m.from < 0 || m.from >= size_ || m.from == rank_) {
    ledger_.fail(status{errc::protocol, "central negotiation on rank " + std::to_string(rank_) +
                                            ": message from invalid rank " + std::to_string(m.from)},
                 out);
    return out;
  }
  if (rank_ == 0) {
    root_receive(m, now, out);
  } else {
    worker_receive(m, now, out);
  }
  advance(now, out);
  return out;
}

void central_negotiator::root_receive(const gossip_message& m, time_point now, actions& out) {
  uint64_t current = last_cycle_ + 1;
  if (m.kind != message_kind::report || m.cycle != current || (running_ && reported_.test(m.from))) {
    ledger_.fail(status{errc::protocol, "central negotiation on rank 0: unexpected message kind " +
                                            std::to_string(static_cast<int>(m.kind)) + " for cycle " +
                                            std::to_string(m.cycle) + " from rank " + std::to_string(m.from) +
                                            " (open cycle " + std::to_string(current) + ")"},
                 out);
    return;
  }
  if (!running_) {
    start_cycle(now, out, &m);
  } else {
    root_merge(m, now, out);
  }
}

void central_negotiator::worker_receive(const gossip_message& m, time_point now, actions& out) {
  uint64_t current = last_cycle_ + 1;
  bool ok = m.from == 0;
  if (ok && m.kind == message_kind::poll) {
    ++stats_.messages_received;
    if (m.cycle == current && !running_) {
      start_cycle(now, out);  // step 4: join with whatever we have
    } else if (m.cycle == current + 1 && running_) {
      poll_waiting_ = true;  // it overtook the answer to the cycle we are in
    } else {
      // We reported this cycle on our own already (and may even have its answer): the race
      // of step 4, nothing to do.
      ok = m.cycle < current || (m.cycle == current && running_);
    }
  } else if (ok && m.kind == message_kind::answer && running_ && m.cycle == current) {
    ++stats_.messages_received;
    finish_cycle(m, now, out);
    if (m.open_next) poll_waiting_ = true;  // step 5: the answer doubles as the next poll
  } else {
    ok = false;
  }
  if (!ok) {
    ledger_.fail(status{errc::protocol, "central negotiation on rank " + std::to_string(rank_) +
                                            ": unexpected message kind " + std::to_string(static_cast<int>(m.kind)) +
                                            " for cycle " + std::to_string(m.cycle) + " from rank " +
                                            std::to_string(m.from) + " (finished cycle " +
                                            std::to_string(last_cycle_) + ")"},
                 out);
  }
}

void central_negotiator::advance(time_point now, actions& out) {
  for (;;) {
    if (ledger_.failed()) break;
    if (running_) break;
    bool may_start = !last_start_ || now >= *last_start_ + ledger_.options().cycle_time;
    if (poll_waiting_ || (ledger_.has_new() && may_start)) {
      poll_waiting_ = false;
      start_cycle(now, out);
      continue;
    }
    break;
  }
  out.wake_at = ledger_.next_deadline();
  if (running_ && poll_at_ && (!out.wake_at || *poll_at_ < *out.wake_at)) out.wake_at = poll_at_;
  if (!running_ && ledger_.has_new() && last_start_) {
    auto start_at = *last_start_ + ledger_.options().cycle_time;
    if (!out.wake_at || start_at < *out.wake_at) out.wake_at = start_at;
  }
}

void central_negotiator::start_cycle(time_point now, actions& out, const gossip_message* first_report,
                                     bool workers_told) {
  uint64_t cycle = last_cycle_ + 1;
  running_ = true;
  last_start_ = now;
  uint32_t received = stats_.messages_received;  // a worker's poll counts toward this cycle
  stats_ = cycle_stats{cycle, 0, rank_ == 0 ? 0 : received, now, now};
  if (rank_ != 0) {
    auto report = ledger_.contribution();
    report.kind = message_kind::report;
    report.cycle = cycle;
    report.from = rank_;
    out.send.push_back({0, std::move(report)});
    ++stats_.messages_sent;
    return;
  }
  state_ = ledger_.contribution();
  reported_ = dynamic_bitmap(static_cast<std::size_t>(size_));
  reported_.set(0);
  if (first_report) reported_.set(static_cast<std::size_t>(first_report->from));  // not polled
  poll_at_.reset();
  if (!workers_told) {
    poll_at_ = now + ledger_.options().cycle_time;
    if (ledger_.options().cycle_time == duration::zero()) poll_silent_workers(now, out);
  }
  if (first_report) {
    root_merge(*first_report, now, out);
  } else if (size_ == 1) {
    root_complete(now, out);
  }
}

void central_negotiator::poll_silent_workers(time_point now, actions& out) {
  if (rank_ != 0 || !running_ || !poll_at_ || now < *poll_at_) return;
  poll_at_.reset();
  for (int r = 1; r < size_; ++r) {
    if (reported_.test(static_cast<std::size_t>(r))) continue;
    out.send.push_back({r, header(message_kind::poll, last_cycle_ + 1)});
    ++stats_.messages_sent;
  }
}

void central_negotiator::root_merge(const gossip_message& report, time_point now, actions& out) {
  merge(state_, report);
  reported_.set(static_cast<std::size_t>(report.from));
  ++stats_.messages_received;
  if (reported_.count() == static_cast<std::size_t>(size_)) root_complete(now, out);
}

void central_negotiator::root_complete(time_point now, actions& out) {
  auto answer = std::move(state_);
  answer.kind = message_kind::answer;
  answer.cycle = last_cycle_ + 1;
  answer.from = 0;
  running_ = false;
  poll_at_.reset();
  last_cycle_ = answer.cycle;
  ledger_.resolve(answer, last_cycle_, now, out);
  // Resolving may leave rank 0 with something new; if it may open the next cycle now, the
  // answer says so and every worker reports at once: no polls in a busy job.
  bool may_start = now >= *last_start_ + ledger_.options().cycle_time;
  answer.open_next = size_ > 1 && ledger_.has_new() && may_start;
  for (int r = 1; r < size_; ++r) {
    out.send.push_back({r, answer});
    ++stats_.messages_sent;
  }
  stats_.finished = now;
  out.cycles.push_back(stats_);
  stats_ = cycle_stats{};
  if (answer.open_next) start_cycle(now, out, nullptr, /*workers_told=*/true);
}

void central_negotiator::finish_cycle(const gossip_message& merged, time_point now, actions& out) {
  running_ = false;
  last_cycle_ = last_cycle_ + 1;
  stats_.finished = now;
  out.cycles.push_back(stats_);
  stats_ = cycle_stats{};
  ledger_.resolve(merged, last_cycle_, now, out);
}

}  // namespace chorus::negotiation
