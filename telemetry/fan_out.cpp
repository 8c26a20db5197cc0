// fan_out: one observer that forwards every event to several.
#include <utility>

#include "telemetry/observer.hpp"

namespace chorus::telemetry {

namespace {

class fanout final : public forwarding_observer<fanout> {
 public:
  explicit fanout(std::vector<std::shared_ptr<observer>> parts) : parts_(std::move(parts)) {}

  template <class Call>
  void forward(Call&& call) {
    for (auto& p : parts_) call(*p);
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
