// The store's calls, its exceptions turned into statuses.
#include "c10d/torch_store.hpp"

#include <thread>

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
  // Polled with check(), never with the store's own wait(timeout): a TCPStore wait that runs out
  // leaves its reply on the connection, which every later call (torch's own, on every group that
  // shares the store) would then misread.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto pause = std::chrono::milliseconds(1);
  for (;;) {
    auto there = check(key);
    if (!there) return there.error();
    if (*there) break;
    if (std::chrono::steady_clock::now() >= deadline)
      return status{errc::timeout, describe() + ": no '" + key + "' in time"};
    std::this_thread::sleep_for(std::min(pause, std::chrono::duration_cast<std::chrono::milliseconds>(
                                                    deadline - std::chrono::steady_clock::now() +
                                                    std::chrono::milliseconds(1))));
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
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
