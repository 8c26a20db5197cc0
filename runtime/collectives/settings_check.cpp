// Every rank's path-deciding settings against rank 0's (settings_check.hpp).
#include "runtime/collectives/settings_check.hpp"

#include <sstream>

#include "runtime/collectives/communicator.hpp"

namespace chorus {
namespace {

const char* hier_name(hier_mode m) {
  switch (m) {
    case hier_mode::on: return "on";
    case hier_mode::off: return "off";
    case hier_mode::automatic: break;
  }
  return "auto";
}

// A peer's text as printed: at most 64 characters.
std::string shown(const std::string& v) { return v.size() <= 64 ? v : v.substr(0, 64) + "..."; }

}  // namespace

setting_list deciding_settings(const collective_options& o) {
  return {{"CHORUS_CALLER_ALLREDUCE_BYTES", std::to_string(o.caller_bytes)},
          {"CHORUS_SMALL_ALLREDUCE_BYTES", std::to_string(o.small_bytes)},
          {"CHORUS_HIERARCHICAL", hier_name(o.hierarchical)}};
}

std::string encode_settings(const setting_list& s) {
  std::string out;
  for (const auto& [name, value] : s) out += name + "=" + value + "\n";
  return out;
}

result<setting_list> decode_settings(const std::string& text, const setting_list& shape, int rank) {
  std::istringstream in(text);
  std::string line;
  setting_list out;
  for (const auto& entry : shape) {
    const std::string& name = entry.first;
    if (!std::getline(in, line) || line.rfind(name + "=", 0) != 0)
      return status{errc::protocol, "rank " + std::to_string(rank) + " published its settings as '" + shown(text) +
                                        "', expected " + name + "=... in that line"};
    out.emplace_back(name, line.substr(name.size() + 1));
  }
  return out;
}

status compare_settings(const setting_list& rank0, const setting_list& theirs, int their_rank, const std::string& why) {
  for (std::size_t i = 0; i < rank0.size() && i < theirs.size(); ++i)
    if (theirs[i].second != rank0[i].second)
      return status{errc::config, rank0[i].first + " is " + shown(theirs[i].second) + " on rank " +
                                      std::to_string(their_rank) + " but " + shown(rank0[i].second) +
                                      " on rank 0: every rank of a job must be given the same value (" + why + ")"};
  return {};
}

status agree_settings(rendezvous& rdv, const collective_options& o, std::chrono::milliseconds timeout) {
  return agree_settings(rdv, "settings/", deciding_settings(o),
                        "it decides which path or algorithm each allreduce takes", timeout);
}

status agree_settings(rendezvous& rdv, const std::string& prefix, const setting_list& mine, const std::string& why,
                      std::chrono::milliseconds timeout) {
  if (auto st = rdv.publish(prefix + std::to_string(rdv.rank()), encode_settings(mine)); !st.ok()) return st;
  auto all = rdv.gather(prefix, timeout);
  if (!all) return all.error();
  // Every rank reads the same table and compares it with rank 0's, so all fail alike.
  auto rank0 = decode_settings((*all)[0], mine, 0);
  if (!rank0) return rank0.error();
  for (std::size_t r = 1; r < all->size(); ++r) {
    auto theirs = decode_settings((*all)[r], mine, static_cast<int>(r));
    if (!theirs) return theirs.error();
    if (auto st = compare_settings(*rank0, *theirs, static_cast<int>(r), why); !st.ok()) return st;
  }
  return {};
}

}  // namespace chorus
