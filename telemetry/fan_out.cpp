// fan_out: one observer that forwards every event to several.
#include <utility>

#include "telemetry/observer.hpp"

namespace chorus::telemetry {

namespace {

class fanout final : public observer {
 public:
  explicit fanout(std::vector<std::shared_ptr<observer>> parts) : parts_(std::move(parts)) {}

  void on_enqueue(uint64_t h, const tensor_spec& s, time_point at) override {
    for (auto& p : parts_) p->on_enqueue(h, s, at);
  }
  void on_callback(uint64_t h, const tensor_spec& s, const status& r, time_point e, time_point at) override {
    for (auto& p : parts_) p->on_callback(h, s, r, e, at);
  }
  void on_ready(uint64_t h, const tensor_spec& s, uint64_t cycle, time_point at) override {
    for (auto& p : parts_) p->on_ready(h, s, cycle, at);
  }
  void on_gossip_sent(int to, std::span<const uint8_t> b, time_point at) override {
    for (auto& p : parts_) p->on_gossip_sent(to, b, at);
  }
  void on_gossip_received(std::span<const uint8_t> b, time_point at) override {
    for (auto& p : parts_) p->on_gossip_received(b, at);
  }
  void on_cycle(const cycle_event& c) override {
    for (auto& p : parts_) p->on_cycle(c);
  }
  void on_agreed(uint64_t cycle, std::span<const std::string> n, std::span<const std::chrono::microseconds> l,
                 time_point at) override {
    for (auto& p : parts_) p->on_agreed(cycle, n, l, at);
  }
  void on_stall(const std::string& name, std::span<const int> missing, time_point at) override {
    for (auto& p : parts_) p->on_stall(name, missing, at);
  }
  void on_bucket(const bucket_event& b, time_point at) override {
    for (auto& p : parts_) p->on_bucket(b, at);
  }
  void on_chunk_start(int stream, uint64_t seq, std::size_t bytes, time_point at) override {
    for (auto& p : parts_) p->on_chunk_start(stream, seq, bytes, at);
  }
  void on_chunk_end(int stream, uint64_t seq, std::size_t bytes, const status& r, time_point started,
                    time_point at) override {
    for (auto& p : parts_) p->on_chunk_end(stream, seq, bytes, r, started, at);
  }
  void on_steal(int thief, int victim, uint64_t seq, time_point at) override {
    for (auto& p : parts_) p->on_steal(thief, victim, seq, at);
  }
  void on_error(std::string_view kind, const status& e, time_point at) override {
    for (auto& p : parts_) p->on_error(kind, e, at);
  }
  void on_nonfinite(std::span<const std::string> t, std::span<const int> r, std::string_view m,
                    time_point at) override {
    for (auto& p : parts_) p->on_nonfinite(t, r, m, at);
  }
  void on_compressed(int stream, std::size_t raw, std::size_t wire, time_point at) override {
    for (auto& p : parts_) p->on_compressed(stream, raw, wire, at);
  }
  void on_tunables(const tunables& t, time_point at) override {
    for (auto& p : parts_) p->on_tunables(t, at);
  }
  void on_autotune(const autotune_event& e, time_point at) override {
    for (auto& p : parts_) p->on_autotune(e, at);
  }

 private:
  std::vector<std::shared_ptr<observer>> parts_;
};

}  // namespace

std::shared_ptr<observer> fan_out(std::vector<std::shared_ptr<observer>> parts) {
  std::erase(parts, nullptr);
  if (parts.empty()) return nullptr;
  if (parts.size() == 1) return parts.front();
  return std::make_shared<fanout>(std::move(parts));
}

}  // namespace chorus::telemetry
