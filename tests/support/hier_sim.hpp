// A symbolic simulation of hierarchical step lists (runtime/collectives/hier_schedule.hpp,
// hier_allgather.hpp) as hier_op runs them: each element holds how often each rank contributed
// to it; frames are delivered in a random order, gated by phase (hier_readiness.hpp), forwarded
// after their receive. A send reads the sender's bytes only when it is delivered, as a
// zero-copy transport may, so a receive that overwrites bytes still being sent shows.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "runtime/collectives/hier_readiness.hpp"
#include "runtime/collectives/hier_schedule.hpp"

namespace chorus::testing {

using contribution = std::vector<int>;  // times each rank contributed to one element

/// Identities for hosts of the given sizes, ranks numbered host after host unless `interleave`.
inline std::vector<std::string> identities(const std::vector<int>& sizes, bool interleave = false) {
  std::vector<std::string> ids;
  if (!interleave) {
    for (std::size_t h = 0; h < sizes.size(); ++h)
      for (int i = 0; i < sizes[h]; ++i) ids.push_back("host-" + std::to_string(h));
    return ids;
  }
  for (int i = 0, placed = 1; placed;) {
    placed = 0;
    for (std::size_t h = 0; h < sizes.size(); ++h)
      if (i < sizes[h]) ids.push_back("host-" + std::to_string(h)), ++placed;
    ++i;
  }
  return ids;
}

// One frame in flight: `t` is the sender's step transfer, [offset, offset + length) the frame.
struct message {
  int from, to;
  hier_transfer t;
  std::size_t offset, length;
};

struct rank_state {
  std::vector<hier_step> steps;
  std::vector<contribution> elems;
  hier_readiness gate;
  std::vector<std::size_t> left;  // per step
  std::vector<std::pair<message, std::vector<contribution>>> held;
  std::vector<message> waiting;  // segments of sends without a receive first
  explicit rank_state(std::vector<hier_step> s) : steps(std::move(s)), gate(steps) {}
};

class simulation {
 public:
  /// steps[r] and elems[r]: rank r's step list and its elements before the first frame.
  simulation(std::vector<std::vector<hier_step>> steps, std::vector<std::vector<contribution>> elems,
             std::size_t segment, uint64_t seed)
      : segment_(segment), rng_(seed) {
    n_ = static_cast<int>(steps.size());
    early_.assign(static_cast<std::size_t>(n_), 0);
    for (int r = 0; r < n_; ++r) {
      rank_state s(std::move(steps[static_cast<std::size_t>(r)]));
      s.elems = std::move(elems[static_cast<std::size_t>(r)]);
      for (const auto& st : s.steps) {
        s.left.push_back(st.recv.peer >= 0 ? st.recv.length : 0);
        if (st.send.peer >= 0 && !st.forward)
          for (std::size_t d = 0; d < st.send.length; d += segment_)
            s.waiting.push_back({r, st.send.peer, st.send, st.send.offset + d, std::min(segment_, st.send.length - d)});
      }
      ranks_.push_back(std::move(s));
    }
  }

  void run() {
    for (int r = 0; r < n_; ++r) flush(r);
    while (!queue_.empty()) {
      std::size_t i = rng_() % queue_.size();
      message m = queue_[i];
      queue_.erase(queue_.begin() + static_cast<std::ptrdiff_t>(i));
      deliver(m);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }

  const rank_state& rank(int r) const { return ranks_[static_cast<std::size_t>(r)]; }
  /// Frames rank r sent while it still expected bytes of an earlier phase.
  int early(int r) const { return early_[static_cast<std::size_t>(r)]; }
  bool idle(int r) const {
    const auto& s = rank(r);
    return s.held.empty() && s.waiting.empty() &&
           std::all_of(s.left.begin(), s.left.end(), [](std::size_t x) { return x == 0; });
  }

 private:
  void post(const message& m) {
    if (!m.length) return;
    queue_.push_back(m);
    // Sent while the sender still expects bytes of an earlier phase: the phases overlap.
    const auto& s = rank(m.from);
    const int phase = phase_of_send(m.from, m.t);
    for (std::size_t i = 0; i < s.steps.size(); ++i)
      if (s.steps[i].phase < phase && s.left[i] > 0) {
        ++early_[static_cast<std::size_t>(m.from)];
        break;
      }
  }
  void send_range(int from, const hier_transfer& t, std::size_t offset, std::size_t length) {
    for (std::size_t d = 0; d < length; d += segment_)
      post({from, t.peer, t, offset + d, std::min(segment_, length - d)});
  }

  // Posts the waiting sends and consumes the held frames whose bytes are ready, until none is.
  void flush(int r) {
    auto& s = ranks_[static_cast<std::size_t>(r)];
    for (bool moved = true; moved;) {
      moved = false;
      for (auto it = s.waiting.begin(); it != s.waiting.end();) {
        if (s.gate.ready(phase_of_send(r, it->t), it->offset, it->length)) {
          post(*it);
          it = s.waiting.erase(it);
        } else {
          ++it;
        }
      }
      for (std::size_t k = 0; k < s.held.size(); ++k) {
        const auto& m = s.held[k].first;
        if (!s.gate.ready(step_of(r, m).phase, m.offset, m.length)) continue;
        auto h = std::move(s.held[k]);
        s.held.erase(s.held.begin() + static_cast<std::ptrdiff_t>(k));
        consume(h.first, h.second);
        moved = true;
        break;
      }
    }
  }

  int phase_of_send(int r, const hier_transfer& t) const {
    for (const auto& st : rank(r).steps)
      if (st.send.peer == t.peer && st.send.wire == t.wire) return st.phase;
    ADD_FAILURE() << "rank " << r << " has no send for wire " << t.wire;
    return 0;
  }

  std::size_t index_of(int r, const message& m) const {
    const auto& s = ranks_[static_cast<std::size_t>(r)];
    for (std::size_t i = 0; i < s.steps.size(); ++i)
      if (s.steps[i].recv.peer == m.from && s.steps[i].recv.wire == m.t.wire) return i;
    ADD_FAILURE() << "rank " << r << " has no receive for wire " << m.t.wire << " from rank " << m.from;
    return 0;
  }
  const hier_step& step_of(int r, const message& m) const { return rank(r).steps[index_of(r, m)]; }

  void deliver(const message& m) {
    auto& s = ranks_[static_cast<std::size_t>(m.to)];
    std::size_t i = index_of(m.to, m);
    const auto& st = s.steps[i];
    ASSERT_EQ(st.recv.offset, m.t.offset) << "rank " << m.to << " step " << i;
    ASSERT_EQ(st.recv.length, m.t.length) << "rank " << m.to << " step " << i;
    ASSERT_LE(m.length, s.left[i]) << "rank " << m.to << " step " << i << " received twice";
    s.left[i] -= m.length;
    // The sender's bytes as they are now: the transport reads them until delivery.
    const auto& from = rank(m.from).elems;
    std::vector<contribution> data(from.begin() + static_cast<std::ptrdiff_t>(m.offset),
                                   from.begin() + static_cast<std::ptrdiff_t>(m.offset + m.length));
    if (!s.gate.ready(st.phase, m.offset, m.length)) {
      s.held.emplace_back(m, std::move(data));
      return;
    }
    consume(m, data);
    flush(m.to);
  }

  void consume(const message& m, const std::vector<contribution>& data) {
    auto& s = ranks_[static_cast<std::size_t>(m.to)];
    std::size_t i = index_of(m.to, m);
    const auto& st = s.steps[i];
    for (std::size_t k = 0; k < m.length; ++k) {
      auto& e = s.elems[m.offset + k];
      if (st.reduce)
        for (int q = 0; q < n_; ++q) e[static_cast<std::size_t>(q)] += data[k][static_cast<std::size_t>(q)];
      else
        e = data[k];
    }
    ASSERT_TRUE(s.gate.received(st.phase, m.offset, m.length)) << "rank " << m.to << " step " << i;
    if (i + 1 < s.steps.size() && s.steps[i + 1].forward) {
      ASSERT_EQ(s.steps[i + 1].send.offset, st.recv.offset);
      ASSERT_EQ(s.steps[i + 1].send.length, st.recv.length);
      send_range(m.to, s.steps[i + 1].send, m.offset, m.length);
    }
  }

  std::size_t segment_;
  std::mt19937_64 rng_;
  int n_ = 0;
  std::vector<rank_state> ranks_;
  std::vector<message> queue_;
  std::vector<int> early_;
};

}  // namespace chorus::testing
