// Ranks in threads of one process for the direct allreduce's tests: N ranks' mailbox_allreduce
// over fresh shared-memory mailboxes between every pair.
#pragma once

#include <unistd.h>

#include <chrono>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/collectives/mailbox_allreduce.hpp"

namespace chorus {

inline std::vector<std::unique_ptr<mailbox_allreduce>> make_ranks(int n,
                                                          std::chrono::microseconds spin = std::chrono::microseconds(50),
                                                          std::size_t limit = 4u << 20) {
  std::vector<std::vector<std::unique_ptr<shm::mailbox_writer>>> out(n);
  std::vector<std::vector<std::unique_ptr<shm::mailbox_reader>>> in(n);
  for (auto& o : out) o.resize(n);
  for (auto& i : in) i.resize(n);
  std::random_device rd;
  for (int from = 0; from < n; ++from)
    for (int to = 0; to < n; ++to) {
      if (from == to) continue;
      const uint64_t nonce = (uint64_t{rd()} << 32) | rd();
      const std::string name = "/chorus-direct-test-" + std::to_string(::getpid()) + "-" + std::to_string(nonce);
      auto created = shm::segment::create(name, shm::mailbox_capacity(), nonce);
      EXPECT_TRUE(created) << created.error().to_string();
      auto opened = shm::segment::open(name, nonce);
      EXPECT_TRUE(opened) << opened.error().to_string();
      out[from][to] = std::make_unique<shm::mailbox_writer>(std::move(*created));
      in[to][from] = std::make_unique<shm::mailbox_reader>(std::move(*opened), from);
    }
  std::vector<std::unique_ptr<mailbox_allreduce>> ranks;
  for (int r = 0; r < n; ++r)
    ranks.push_back(std::make_unique<mailbox_allreduce>(r, n, std::move(out[r]), std::move(in[r]), limit, spin));
  return ranks;
}

}  // namespace chorus
