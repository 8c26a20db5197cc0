// The configuration table (runtime/config/variables.hpp) against the docs and the source tree:
// every variable has a row "| `CHORUS_NAME` | default | meaning |" in README.md, every such row
// names a variable of the table, and nothing outside runtime/config (and runtime/env's launcher
// discovery) reads the environment with getenv.
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
  const std::set<std::string> allowed{"runtime/config/", "runtime/env/"};
  for (const char* dir : {"runtime", "actors", "telemetry", "bindings", "examples"})
    for (const auto& hit : matches(dir, getenv_call, cxx, allowed))
      ADD_FAILURE() << hit << "\n  read configuration through runtime/config (config.hpp, reader.hpp) instead";
}

TEST(ConfigDocs, PythonReadsOnlyItsOwnVariables) {
  // chorus.torch reads CHORUS_BUCKET_BYTES itself; every CHORUS_ name it reads is in the table
  // as read by Python.
  const std::regex env_read(R"(os\.environ(\.get\(|\[)\s*["'](CHORUS_[A-Z0-9_]+)["'])");
  const fs::path root(CHORUS_SOURCE_DIR);
  int seen = 0;
  for (const auto& e : fs::recursive_directory_iterator(root / "bindings/python")) {
    if (!e.is_regular_file() || e.path().extension() != ".py") continue;
    std::string text = read_file(e.path());
    for (std::sregex_iterator it(text.begin(), text.end(), env_read), end; it != end; ++it) {
      std::string name = (*it)[2];
      ++seen;
      const cfg::variable* v = cfg::find(name);
      EXPECT_TRUE(v && v->read_by == cfg::owner::python)
          << e.path() << " reads " << name << ", which the table does not list as read by Python";
    }
  }
  EXPECT_GT(seen, 0) << "the pattern no longer finds chorus.torch's read of CHORUS_BUCKET_BYTES";
}

}  // namespace
}  // namespace chorus
