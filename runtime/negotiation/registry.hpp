// tensor_registry: the agreed mapping name <-> id <-> spec. Every rank adds the same names in
// the same order (at the end of the same cycle), so ids are equal everywhere and an id can
// stand for its name in a readiness bitmap.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "runtime/negotiation/tensor_spec.hpp"

namespace chorus::negotiation {

class tensor_registry {
 public:
  /// Adds a name that has no id yet and returns its id (ids are 0, 1, 2, ... in order).
  uint32_t add(const tensor_spec& spec);
  std::optional<uint32_t> find(std::string_view name) const;
  /// Requires id < size().
  const tensor_spec& spec(uint32_t id) const { return specs_[id]; }
  std::size_t size() const { return specs_.size(); }

 private:
  std::vector<tensor_spec> specs_;
  std::unordered_map<std::string, uint32_t> ids_;
};

}  // namespace chorus::negotiation
