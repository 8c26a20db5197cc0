// The store's calls, its exceptions turned into statuses.
#include "c10d/torch_store.hpp"

namespace chorus::python {

status torch_store::failed(const std::string& doing, const std::exception& e) const {
  std::string what = e.what();
  if (auto nl = what.find('\n'); nl != std::string::npos) what.resize(nl);  // c10::Error's backtrace
  return status{errc::rendezvous, describe() + ": " + doing + " failed: " + what};
}

status torch_store::set(const std::string& key, const std::string& value) {
  try {
    store_->set(key, std::vector<uint8_t>(value.begin(), value.end()));
    return {};
  } catch (const std::exception& e) {
    return failed("set('" + key + "')", e);
  }
}

result<std::string> torch_store::get(const std::string& key, std::chrono::milliseconds timeout) {
  try {
    store_->wait({key}, std::max(timeout, std::chrono::milliseconds(1)));
  } catch (const std::exception& e) {
    // A wait that ran out and a store that broke throw alike: a store that still answers and
    // lacks the key timed out.
    auto there = check(key);
    if (there && !*there) return status{errc::timeout, describe() + ": no '" + key + "' in time"};
    return failed("wait('" + key + "')", e);
  }
  try {
    auto v = store_->get(key);
    return std::string(v.begin(), v.end());
  } catch (const std::exception& e) {
    return failed("get('" + key + "')", e);
  }
}

result<int64_t> torch_store::add(const std::string& key, int64_t delta) {
  try {
    return store_->add(key, delta);
  } catch (const std::exception& e) {
    return failed("add('" + key + "')", e);
  }
}

result<bool> torch_store::check(const std::string& key) {
  try {
    return store_->check({key});
  } catch (const std::exception& e) {
    return failed("check('" + key + "')", e);
  }
}

}  // namespace chorus::python
