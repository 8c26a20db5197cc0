// tensor_registry: the agreed mapping name <-> id <-> spec. Every rank adds the same names in
// the same order (at the end of the same cycle), so ids are equal everywhere and an id can
// stand for its name in a readiness bitmap.
//
// A name may be registered again with another spec (Horovod lets a name come back with
// another shape once its previous operation has finished): the new spec gets the next id and
// the old id is retired, on every rank at the end of the same cycle. Ids are never handed out
// twice, so an id seen in any batch keeps meaning the same name and spec: a strategy call may
// report the batches of two cycles, the second of which re-registered a name of the first.
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
  /// Registers spec.name with the next id (ids are 0, 1, 2, ... in order) and returns it. A
  /// name registered before is re-registered: its previous id is retired.
  uint32_t add(const tensor_spec& spec);
  /// The current id of `name` (never a retired one).
  std::optional<uint32_t> find(std::string_view name) const;
  /// Requires id < size(); retired ids keep their spec.
  const tensor_spec& spec(uint32_t id) const { return specs_[id]; }
  /// Ids handed out so far, retired ones included (the bitmaps' size).
  std::size_t size() const { return specs_.size(); }
  /// Requires id < size(): a later registration of its name replaced it.
  bool retired(uint32_t id) const { return retired_[id]; }
  /// Ids retired so far (re-registrations).
  std::size_t retired_count() const { return retired_count_; }

 private:
  std::vector<tensor_spec> specs_;
  std::vector<bool> retired_;
  std::size_t retired_count_ = 0;
  std::unordered_map<std::string, uint32_t> ids_;
};

}  // namespace chorus::negotiation
