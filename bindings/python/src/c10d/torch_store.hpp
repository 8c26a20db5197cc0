// torch.distributed's store (c10d::Store: the PrefixStore a process group gets, over TCPStore or
// FileStore) seen as Chorus's external_store, so that a group rendezvouses where torch's does
// (runtime/rendezvous/store_rendezvous.hpp). Only this file talks to the store.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <string>

#include "runtime/rendezvous/store_rendezvous.hpp"

namespace chorus::python {

class torch_store final : public external_store {
 public:
  torch_store(c10::intrusive_ptr<::c10d::Store> store, std::string group)
      : store_(std::move(store)), group_(std::move(group)) {}
  status set(const std::string& key, const std::string& value) override;
  result<std::string> get(const std::string& key, std::chrono::milliseconds timeout) override;
  result<int64_t> add(const std::string& key, int64_t delta) override;
  result<bool> check(const std::string& key) override;
  std::string describe() const override { return "torch.distributed's store of process group '" + group_ + "'"; }

 private:
  status failed(const std::string& doing, const std::exception& e) const;
  c10::intrusive_ptr<::c10d::Store> store_;
  std::string group_;
};

}  // namespace chorus::python
