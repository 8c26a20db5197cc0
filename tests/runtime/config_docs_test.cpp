// The configuration table (runtime/config/variables.hpp) against the docs and the source tree:
// every variable has a row "| `CHORUS_NAME` | default | meaning |" in README.md, every such row
// names a variable of the table, nothing but the reader (runtime/config/reader.cpp) reads the
// environment with getenv, and chorus.torch reads no variable itself (it asks the runtime).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "runtime/config/variables.hpp"

namespace chorus {
namespace {

namespace fs = std::filesystem;

// Test and benchmark switches: not user configuration, never in the table or the README table.
bool test_only(const std::string& name) {
  return name.rfind("CHORUS_TEST_", 0) == 0 || name.rfind("CHORUS_BENCH_", 0) == 0;
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Variables with a README table row, first cell "`CHORUS_...`".
std::set<std::string> readme_rows() {
  std::ifstream in(CHORUS_README_PATH);
  EXPECT_TRUE(in.good()) << "cannot read " << CHORUS_README_PATH;
  std::set<std::string> out;
  const std::regex row(R"(^\|\s*`(CHORUS_[A-Z0-9_]+)`\s*\|)");
  std::string line;
  std::smatch m;
  while (std::getline(in, line))
    if (std::regex_search(line, m, row)) out.insert(m[1]);
  return out;
}

std::string suggested_row(const cfg::variable& v) {
  std::string def = v.fallback.empty() ? "(unset)" : std::string(v.fallback);
  return "| `" + std::string(v.name) + "` | " + def + " | " + std::string(v.meaning) +
         (v.alias.empty() ? "" : " (alias `" + std::string(v.alias) + "`)") + " |";
}

TEST(ConfigDocs, EveryVariableHasAReadmeRow) {
  auto rows = readme_rows();
  for (const auto& v : cfg::variables())
    EXPECT_TRUE(rows.count(std::string(v.name)))
        << v.name << " is not documented in README.md's configuration table; add:\n" << suggested_row(v);
}

TEST(ConfigDocs, EveryReadmeRowIsAVariable) {
  for (const auto& name : readme_rows()) {
    if (test_only(name)) continue;
    const cfg::variable* v = cfg::find(name);
    EXPECT_TRUE(v && v->name == name) << "README.md documents " << name
                                      << ", which runtime/config/variables.hpp does not have";
  }
}

// Files under `dir` (relative to the source root) whose text matches `pattern`, with the line.
std::vector<std::string> matches(const std::string& dir, const std::regex& pattern,
                                 const std::set<std::string>& extensions, const std::set<std::string>& allowed_dirs) {
  std::vector<std::string> out;
  const fs::path root(CHORUS_SOURCE_DIR);
  if (!fs::exists(root / dir)) return out;
  for (const auto& e : fs::recursive_directory_iterator(root / dir)) {
    if (!e.is_regular_file() || !extensions.count(e.path().extension().string())) continue;
    std::string rel = fs::relative(e.path(), root).generic_string();
    bool allowed = false;
    for (const auto& a : allowed_dirs) allowed = allowed || rel.rfind(a, 0) == 0;
    if (allowed) continue;
    std::ifstream in(e.path());
    std::string line;
    for (int n = 1; std::getline(in, line); ++n)
      if (std::regex_search(line, pattern)) out.push_back(rel + ":" + std::to_string(n) + ": " + line);
  }
  return out;
}

TEST(ConfigDocs, NothingElseCallsGetenv) {
  const std::regex getenv_call(R"(\bgetenv\s*\()");
  const std::set<std::string> cxx{".cpp", ".hpp", ".h", ".c", ".cc"};
  const std::set<std::string> allowed{"runtime/config/reader.cpp"};
  for (const char* dir : {"runtime", "actors", "telemetry", "bindings", "examples"})
    for (const auto& hit : matches(dir, getenv_call, cxx, allowed))
      ADD_FAILURE() << hit << "\n  read configuration through runtime/config (config.hpp, reader.hpp) instead";
}

TEST(ConfigDocs, PythonReadsNoVariableItself) {
  // chorus.torch asks the runtime's reader (_chorus_torch.read_variable) for what it needs, so
  // one parser checks every variable; it may set a variable for the runtime, never read one.
  const std::regex env_read(R"((os\.environ\.get\(|os\.getenv\(|os\.environ\[\s*["'](CHORUS|HOROVOD)_[A-Z0-9_]+["']\s*\](?!\s*=[^=])))");
  const std::regex named_read(R"(os\.(environ\.get|getenv)\(\s*["'](CHORUS|HOROVOD)_)");
  const fs::path root(CHORUS_SOURCE_DIR);
  for (const auto& e : fs::recursive_directory_iterator(root / "bindings/python/chorus")) {
    if (!e.is_regular_file() || e.path().extension() != ".py") continue;
    std::ifstream in(e.path());
    std::string line;
    for (int n = 1; std::getline(in, line); ++n)
      if (std::regex_search(line, named_read) ||
          (std::regex_search(line, env_read) && line.find("os.environ[") != std::string::npos &&
           line.find("] =") == std::string::npos))
        ADD_FAILURE() << e.path() << ":" << n << ": " << line
                      << "\n  ask the runtime instead: chorus._chorus_torch.read_variable(name)";
  }
  const cfg::variable* v = cfg::find("CHORUS_BUCKET_BYTES");
  ASSERT_TRUE(v);
  EXPECT_EQ(v->read_by, cfg::owner::python);
}

}  // namespace
}  // namespace chorus
