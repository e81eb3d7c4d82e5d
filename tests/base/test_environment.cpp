// The one registry of ortfleet's environment variables (base/environment.hpp): docs/environment.md lists
// exactly it, every ORTFLEET_* name the programs' sources use is in it, and nothing reads one of them but
// through it.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "base/environment.hpp"
#include "test_support.hpp"

namespace ortfleet::detail {
namespace {
namespace fs = std::filesystem;

const fs::path kRoot = ORTFLEET_TEST_SOURCE_DIR;

std::string text_of(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// The sources of ortfleet's programs: the library, the command line, the worker, the Python module.
std::vector<fs::path> program_sources() {
  std::vector<fs::path> out;
  for (const char* folder : {"src", "tools", "python"}) {
    for (const auto& e : fs::recursive_directory_iterator(kRoot / folder)) {
      const auto ext = e.path().extension();
      const bool build_backend = e.path().string().find("build_backend") != std::string::npos;  // the set-up's, docs/environment.md
      if (e.is_regular_file() && !build_backend && (ext == ".cpp" || ext == ".hpp" || ext == ".py" || ext == ".in")) out.push_back(e.path());
    }
  }
  return out;
}

TEST(Environment, EveryVariableIsNamedOnceWithWhatItMeansAndWhoReadsIt) {
  std::set<std::string> names;
  for (const auto& v : kEnvironmentVariables) {
    const std::string name = v.name;
    EXPECT_EQ(name.rfind("ORTFLEET_", 0), 0u) << name;
    EXPECT_TRUE(names.insert(name).second) << name << " is in the table twice";
    EXPECT_GT(std::string(v.meaning).size(), 10u) << name;
    EXPECT_FALSE(std::string(v.read_by).empty()) << name;
  }
}

TEST(Environment, TheDocsListExactlyTheTable) {
  const std::string page = text_of(kRoot / "docs" / "environment.md");
  const std::regex row(R"(\| `(ORTFLEET_[A-Z0-9_]+)` \| ([^|]+) \| ([^|]+) \|)");
  std::vector<std::string> listed;
  for (auto it = std::sregex_iterator(page.begin(), page.end(), row); it != std::sregex_iterator(); ++it) {
    listed.push_back((*it)[1]);
    const auto* v = std::find_if(kEnvironmentVariables.begin(), kEnvironmentVariables.end(),
                                 [&](const EnvironmentVariable& e) { return (*it)[1] == e.name; });
    ASSERT_NE(v, kEnvironmentVariables.end()) << (*it)[1] << " is in docs/environment.md but not in base/environment.hpp";
    EXPECT_EQ((*it)[2].str(), v->meaning) << v->name;
    EXPECT_EQ((*it)[3].str(), v->read_by) << v->name;
  }
  std::vector<std::string> table;
  for (const auto& v : kEnvironmentVariables) table.emplace_back(v.name);
  EXPECT_EQ(listed, table) << "docs/environment.md lists the table's variables, in its order";
}

TEST(Environment, EveryOrtfleetNameInTheProgramsIsInTheTable) {
  // Build-time names (compile definitions, CMake options), which no program reads from its environment.
  const std::set<std::string> build_time = {"ORTFLEET_VERSION", "ORTFLEET_FETCHED_ORT_DIR", "ORTFLEET_FETCHED_WEB_DIR",
                                            "ORTFLEET_SOURCE_DIR", "ORTFLEET_HAVE_ZLIB", "ORTFLEET_BUILD_PYTHON", "ORTFLEET_REPORT_TEMPLATE",
                                            "ORTFLEET_UNIT_TEMPLATE", "ORTFLEET_UNIT_BINARY"};
  std::set<std::string> table;
  for (const auto& v : kEnvironmentVariables) table.insert(v.name);
  const std::regex name(R"(ORTFLEET_[A-Z0-9_]*[A-Z0-9])");
  for (const auto& file : program_sources()) {
    const std::string text = text_of(file);
    for (auto it = std::sregex_iterator(text.begin(), text.end(), name); it != std::sregex_iterator(); ++it) {
      const std::string n = (*it)[0];
      EXPECT_TRUE(table.count(n) > 0 || build_time.count(n) > 0) << fs::relative(file, kRoot).string() << " names " << n
                                                                  << ", which base/environment.hpp does not list";
    }
  }
}

TEST(Environment, NothingReadsAVariableOfOursButThroughTheTable) {
  // getenv("ORTFLEET_...") or env_var("ORTFLEET_..."): a name spelled where it is read, past the table.
  const std::regex direct(R"((getenv|env_var|environ\.get)\(\s*"ORTFLEET_)");
  for (const auto& file : program_sources()) {
    const std::string text = text_of(file);
    EXPECT_FALSE(std::regex_search(text, direct)) << fs::relative(file, kRoot).string() << " reads an ORTFLEET_ variable by name";
  }
}

TEST(Environment, AValueIsReadAndAnEmptyOneIsNone) {
  {
    const test::ScopedEnv set(env_name(EnvVar::ring_spin_us), "17");
    EXPECT_EQ(env_value(EnvVar::ring_spin_us), "17");
  }
  {
    const test::ScopedEnv empty(env_name(EnvVar::ring_spin_us), "");
    EXPECT_EQ(env_value(EnvVar::ring_spin_us), std::nullopt);
  }
}

}  // namespace
}  // namespace ortfleet::detail
