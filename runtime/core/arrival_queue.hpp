// Connections in the order they were accepted, to find the one that has waited longest in its
// handshake when every handshake slot is taken: the rendezvous store (kv_server.cpp) and the data
// plane's acceptor (tcp/acceptor.cpp) evict it to make room for a newcomer. Not thread-safe: its
// owner serialises the calls (the store's thread; the acceptor's mutex).
#pragma once

#include <cstddef>
#include <deque>
#include <memory>

namespace chorus {

/// Weak handles in arrival order. Connections that ended or finished their handshake are
/// skipped and dropped lazily; the queue is compacted whenever it has grown to twice the entries
/// that were still waiting at the last compaction plus 16, so with at most W connections in their
/// handshake at any time it never holds more than 2W + 16 entries, whatever the arrival rate.
template <class Conn>
class arrival_queue {
 public:
  /// Records `conn`, accepted now. `waiting(const Conn&)` says whether a connection still holds
  /// a handshake slot; it is asked again about older entries when the queue compacts.
  template <class Waiting>
  void push(const std::shared_ptr<Conn>& conn, Waiting waiting) {
    q_.push_back(conn);
    if (q_.size() >= 2 * waiting_at_compaction_ + 16) {
      std::erase_if(q_, [&](const std::weak_ptr<Conn>& w) {
        auto c = w.lock();
        return !c || !waiting(*c);
      });
      waiting_at_compaction_ = q_.size();
    }
  }

  /// Removes and returns the connection that arrived first among those still `waiting`; null
  /// when none is.
  template <class Waiting>
  std::shared_ptr<Conn> pop_oldest(Waiting waiting) {
    while (!q_.empty()) {
      auto c = q_.front().lock();
      q_.pop_front();
      if (c && waiting(*c)) return c;
    }
    return nullptr;
  }

  /// Entries held, ended ones not yet dropped included (for tests of the bound).
  std::size_t size() const { return q_.size(); }

 private:
  std::deque<std::weak_ptr<Conn>> q_;
  std::size_t waiting_at_compaction_ = 0;
};

}  // namespace chorus
