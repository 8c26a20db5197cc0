// Spawns a stateful function actor as a class: sys.spawn<class_actor<State, fn>>(). CAF 0.17
// starts a function actor spawned without arguments by dereferencing a null
// std::shared_ptr<std::tuple<>> (undefined behaviour, which UBSan reports); a class is not.
#pragma once

#include <caf/all.hpp>

namespace chorus::test {

template <class State, caf::behavior (*Fn)(caf::stateful_actor<State>*)>
class class_actor final : public caf::stateful_actor<State> {
 public:
  explicit class_actor(caf::actor_config& cfg) : caf::stateful_actor<State>(cfg) {}
  caf::behavior make_behavior() override { return Fn(this); }
};

}  // namespace chorus::test
