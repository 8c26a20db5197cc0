// The agreed name <-> id registry.
#include "runtime/negotiation/registry.hpp"

namespace chorus::negotiation {

uint32_t tensor_registry::add(const tensor_spec& spec) {
  auto id = static_cast<uint32_t>(specs_.size());
  specs_.push_back(spec);
  retired_.push_back(false);
  auto [it, fresh] = ids_.try_emplace(spec.name, id);
  if (!fresh) {
    retired_[it->second] = true;
    ++retired_count_;
    it->second = id;
  }
  return id;
}

std::optional<uint32_t> tensor_registry::find(std::string_view name) const {
  auto it = ids_.find(std::string(name));
  if (it == ids_.end()) return std::nullopt;
  return it->second;
}

}  // namespace chorus::negotiation
