// Logging: lines to stderr in one write each, at the level runtime/config sets from CHORUS_LOG_LEVEL
// (warn until then).
#include "runtime/core/log.hpp"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>

namespace chorus::log {
namespace {

std::atomic<int>& level_ref() {
  static std::atomic<int> l{static_cast<int>(level::warn)};
  return l;
}

std::atomic<int> g_rank{-1};

const char* name(level l) {
  switch (l) {
    case level::error: return "ERROR";
    case level::warn: return "WARN";
    case level::info: return "INFO";
    case level::debug: return "DEBUG";
    case level::trace: return "TRACE";
  }
  return "?";
}

}  // namespace

void set_level(level l) { level_ref().store(static_cast<int>(l)); }
level current_level() { return static_cast<level>(level_ref().load(std::memory_order_relaxed)); }
void set_rank(int rank) { g_rank.store(rank); }

void write(level l, std::string_view component, std::string_view message) {
  using namespace std::chrono;
  auto us = duration_cast<microseconds>(system_clock::now().time_since_epoch()).count();
  std::string line;
  line.reserve(message.size() + 64);
  char head[96];
  std::snprintf(head, sizeof head, "chorus %s t=%lld.%06lld rank=%d comp=", name(l),
                static_cast<long long>(us / 1000000), static_cast<long long>(us % 1000000),
                g_rank.load());
  line += head;
  line += component;
  line += ' ';
  line += message;
  line += '\n';
  ssize_t rc = ::write(2, line.data(), line.size());
  (void)rc;
}

}  // namespace chorus::log
