// A bound on how many lines one log site writes per second: the lines past the bound are
// counted, and the next line written says how many were held back. For errors that a peer or a
// run of failures can repeat at will (refused frames, refused connections). Thread-safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <mutex>

namespace chorus::log {

class line_limit {
 public:
  using clock = std::chrono::steady_clock;
  explicit line_limit(std::size_t lines_per_second) : per_second_(lines_per_second) {}

  /// Whether a line may be written at `now`. When it may, `held_back` is the number of lines
  /// refused since the last one written (to be reported with it); otherwise it is left alone.
  bool admit(std::size_t& held_back, clock::time_point now = clock::now()) {
    std::lock_guard lock(mu_);
    if (!started_ || now - window_ >= std::chrono::seconds(1)) {
      started_ = true;
      window_ = now;
      written_ = 0;
    }
    if (written_ >= per_second_) {
      ++held_;
      return false;
    }
    ++written_;
    held_back = held_;
    held_ = 0;
    return true;
  }

 private:
  std::mutex mu_;
  const std::size_t per_second_;
  bool started_ = false;
  clock::time_point window_{};
  std::size_t written_ = 0;  // lines written in the current window
  std::size_t held_ = 0;     // lines refused since the last one written
};

}  // namespace chorus::log
