// The agreed name <-> id registry, with retired ids handed out again (rules in the header).
#include "runtime/negotiation/registry.hpp"

namespace chorus::negotiation {

uint32_t tensor_registry::add(const tensor_spec& spec, uint64_t cycle) {
  // Rule 2: ids whose delay has passed join the free set.
  while (!waiting_.empty() && waiting_.front().first + reuse_delay <= cycle) {
    free_.insert(waiting_.front().second);
    waiting_.pop_front();
  }
  // Rule 1: the lowest free id, else a new one.
  uint32_t id = 0;
  if (!free_.empty()) {
    id = *free_.begin();
    free_.erase(free_.begin());
    specs_[id] = spec;
    live_[id] = true;
    ++reused_count_;
  } else {
    id = static_cast<uint32_t>(specs_.size());
    specs_.push_back(spec);
    live_.push_back(true);
  }
  auto [it, fresh] = ids_.try_emplace(spec.name, id);
  if (!fresh) {
    live_[it->second] = false;
    waiting_.emplace_back(cycle, it->second);
    ++retired_count_;
    it->second = id;
  }
  return id;
}

void tensor_registry::retire(uint32_t id, uint64_t cycle) {
  if (id >= specs_.size() || !live_[id]) return;
  if (auto it = ids_.find(specs_[id].name); it != ids_.end() && it->second == id) ids_.erase(it);
  live_[id] = false;
  waiting_.emplace_back(cycle, id);
  ++retired_count_;
}

std::optional<uint32_t> tensor_registry::find(std::string_view name) const {
  auto it = ids_.find(std::string(name));
  if (it == ids_.end()) return std::nullopt;
  return it->second;
}

}  // namespace chorus::negotiation
