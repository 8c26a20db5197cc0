// Matching of point-to-point offers and receives: two queues, earliest first.
#include "runtime/collectives/p2p_matcher.hpp"

#include <algorithm>

namespace chorus {

std::optional<p2p_match> p2p_matcher::offered(const p2p_offer& o) {
  auto it = std::find_if(receives_.begin(), receives_.end(), [&](const p2p_receive& r) { return fits(r, o); });
  if (it == receives_.end()) {
    offers_.push_back(o);
    return std::nullopt;
  }
  p2p_match m{*it, o};
  receives_.erase(it);
  return m;
}

std::optional<p2p_match> p2p_matcher::posted(const p2p_receive& r) {
  auto it = std::find_if(offers_.begin(), offers_.end(), [&](const p2p_offer& o) { return fits(r, o); });
  if (it == offers_.end()) {
    receives_.push_back(r);
    return std::nullopt;
  }
  p2p_match m{r, *it};
  offers_.erase(it);
  return m;
}

bool p2p_matcher::withdraw(uint64_t id) {
  auto it = std::find_if(receives_.begin(), receives_.end(), [&](const p2p_receive& r) { return r.id == id; });
  if (it == receives_.end()) return false;
  receives_.erase(it);
  return true;
}

std::deque<p2p_receive> p2p_matcher::take_receives() {
  std::deque<p2p_receive> out;
  out.swap(receives_);
  offers_.clear();
  return out;
}

}  // namespace chorus
