// The layer order of docs/design.md section 1, checked on every include of the source tree: a
// file may include its own layer and the layers below it, never one above. Keep kLayers in step
// with the design page.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

// Lowest first. A path belongs to the longest entry it starts with.
const std::vector<std::string> kLayers = {
    "include/chorus/",  // the installed API: includes nothing but itself
    "runtime/core/",
    "runtime/wire/",
    "runtime/compression/",
    "runtime/config/",
    "runtime/env/",
    "runtime/process_sets/",
    "runtime/fusion/",
    "runtime/tuning/",
    "runtime/rendezvous/",
    "runtime/transport/",
    "runtime/device/",
    "runtime/negotiation/",
    "runtime/collectives/",
    "telemetry/",
    "actors/",
    "actors/pipeline",  // boots and wires the actors: nothing in actors/ depends on it
    "bindings/",
};

// Index into kLayers, or -1 for a path outside them (tests, bench, examples: they may use any).
int layer_of(const std::string& path) {
  int best = -1;
  std::size_t best_len = 0;
  for (std::size_t i = 0; i < kLayers.size(); ++i)
    if (path.rfind(kLayers[i], 0) == 0 && kLayers[i].size() > best_len) {
      best = static_cast<int>(i);
      best_len = kLayers[i].size();
    }
  return best;
}

// What `#include "x"` names, as a path from the source root.
std::string included_path(const std::string& name) {
  if (name.rfind("chorus/", 0) == 0) return "include/" + name;
  return name;
}

struct violation {
  std::string file;
  std::string included;
};

std::vector<violation> upward_includes(int& seen) {
  const fs::path root = CHORUS_SOURCE_DIR;
  const std::regex include_line(R"(^\s*#\s*include\s+"([^"]+)\")");
  std::vector<violation> out;
  for (const char* top : {"include", "runtime", "telemetry", "actors", "bindings"}) {
    for (const auto& entry : fs::recursive_directory_iterator(root / top)) {
      if (!entry.is_regular_file()) continue;
      const auto ext = entry.path().extension().string();
      if (ext != ".cpp" && ext != ".hpp" && ext != ".h" && ext != ".cu" && ext != ".c") continue;
      const std::string file = fs::relative(entry.path(), root).generic_string();
      const int own = layer_of(file);
      std::ifstream in(entry.path());
      std::string line;
      std::smatch m;
      while (std::getline(in, line)) {
        if (!std::regex_search(line, m, include_line)) continue;
        const std::string target = included_path(m[1]);
        ++seen;
        const int theirs = layer_of(target);
        if (theirs > own) out.push_back({file, target});
      }
    }
  }
  return out;
}

TEST(Layers, TheOrderPlacesEveryFolderOfTheTree) {
  const fs::path root = CHORUS_SOURCE_DIR;
  for (const char* top : {"runtime", "actors", "telemetry"})
    for (const auto& entry : fs::directory_iterator(root / top))
      if (entry.is_directory()) {
        const std::string dir = fs::relative(entry.path(), root).generic_string() + "/";
        EXPECT_GE(layer_of(dir), 0) << dir << " is in no layer";
      }
  EXPECT_LT(layer_of("runtime/core/log.hpp"), layer_of("runtime/config/config.hpp"));
  EXPECT_LT(layer_of("actors/protocol.hpp"), layer_of("actors/pipeline.hpp"));
  EXPECT_EQ(layer_of("tests/runtime/layers_test.cpp"), -1);
}

TEST(Layers, NoIncludeGoesUpward) {
  int seen = 0;
  for (const auto& v : upward_includes(seen))
    ADD_FAILURE() << v.file << " includes " << v.included
                  << ", a layer above its own (docs/design.md section 1 gives the order)";
  EXPECT_GT(seen, 500) << "the tree's includes were not found under " << CHORUS_SOURCE_DIR;
}

TEST(Layers, TheInstalledHeadersIncludeOnlyEachOther) {
  const fs::path root = CHORUS_SOURCE_DIR;
  const std::regex include_line(R"(^\s*#\s*include\s+"([^"]+)\")");
  int headers = 0;
  for (const auto& entry : fs::directory_iterator(root / "include/chorus")) {
    ++headers;
    std::ifstream in(entry.path());
    std::string line;
    std::smatch m;
    while (std::getline(in, line))
      if (std::regex_search(line, m, include_line))
        EXPECT_EQ(std::string(m[1]).rfind("chorus/", 0), 0u)
            << entry.path().filename() << " includes " << m[1] << ": an embedder would need it";
  }
  EXPECT_GE(headers, 2);
}

}  // namespace
