// The one registry of ortfleet's environment variables (base/environment.hpp): docs/environment.md lists
// exactly it, every ORTFLEET_* name the programs' sources use is in it, and nothing reads one of them but
// through it.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "base/environment.hpp"
#include "ortfleet/base/settings.hpp"
#include "process/child_process.hpp"
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

TEST(Environment, EveryVariableGivesASettingOfTheTableWhoseCheckItsValuePasses) {
  for (const auto& v : kEnvironmentVariables) {
    const auto setting = setting_named(v.setting);
    ASSERT_TRUE(setting) << v.name << " names " << v.setting << ", which is no setting of ortfleet/base/settings.hpp";
    // Each setting has one variable at most.
    for (const auto& other : kEnvironmentVariables) {
      if (&other != &v) {
        EXPECT_STRNE(other.setting, v.setting) << v.name << " and " << other.name;
      }
    }
  }
  std::set<std::string> names;
  for (const auto& v : kEnvironmentVariables) names.insert(v.name);
  for (const auto& o : kOtherVariables) EXPECT_EQ(names.count(o.name), 0u) << o.name << " is in both tables";
}

/// A value `v` does not take, by its setting's check (nothing, where any text is a value).
std::optional<std::string> bad_value(const EnvironmentVariable& v) {
  switch (setting_row(*setting_named(v.setting)).values.kind) {
    case ValueKind::on_off: return "yes";
    case ValueKind::whole:
    case ValueKind::number: return "abc";
    case ValueKind::assignment: return "cpu=abc";
    case ValueKind::choice:
    case ValueKind::word_list: return "nonsense";
    case ValueKind::path: return "relative/path";  // a variable's path is absolute: children run in other folders
    case ValueKind::text: return std::nullopt;
  }
  return std::nullopt;
}

// Every ORTFLEET_* variable, given a bad value, is refused in one line naming it (exit 2, before any work)
// or, for a setting that cannot fail a job, warned about once and left out: what the command line says.
TEST(Environment, EveryVariableWithABadValueIsRefusedOrWarnedAbout) {
  const fs::path out = test::fresh_dir("environment-checked") / "identity.onnx";
  size_t walked = 0;
  for (const auto& v : kEnvironmentVariables) {
    const auto bad = bad_value(v);
    if (!bad) {
      EXPECT_STREQ(v.name, "ORTFLEET_TEST_CUDNN_DEVICE") << v.name << " takes any text: say why here";
      continue;
    }
    ++walked;
    EXPECT_NE(env_problem(v.id, *bad), "") << v.name << "=" << *bad;
    const auto r = run_child({"env", std::string(v.name) + "=" + *bad, test::bin("ortfleet"), "synth", "identity", out.string()}, {}, "", 60);
    const std::string said = std::string(v.name) + "='" + *bad + "' ";
    const SettingRow& row = setting_row(*setting_named(v.setting));
    if (row.bad_variable == BadVariable::refuse) {
      EXPECT_EQ(r.exit_code, 2) << v.name << ": " << r.describe();
      EXPECT_EQ(r.stderr_tail.rfind("ortfleet: error: " + said, 0), 0u) << r.stderr_tail;
      EXPECT_EQ(std::count(r.stderr_tail.begin(), r.stderr_tail.end(), '\n'), 1) << "one line: " << r.stderr_tail;
    } else {
      EXPECT_EQ(r.exit_code, 0) << v.name << ": " << r.describe();
      EXPECT_EQ(r.stderr_tail.rfind("warning: " + said, 0), 0u) << r.stderr_tail;
      EXPECT_NE(r.stderr_tail.find("it is left out"), std::string::npos) << r.stderr_tail;
    }
  }
  EXPECT_EQ(walked, kEnvironmentVariables.size() - 1);
}

TEST(Environment, AReadBadValueIsRefusedOrLeftOutAsItsSettingSays) {
  {
    const test::ScopedEnv bad(env_name(EnvVar::warm_pool_idle), "abc");
    EXPECT_EQ(test::error_of([] { env_value(EnvVar::warm_pool_idle); }),
              "ORTFLEET_WARM_POOL_IDLE='abc' is not a number: give a number of seconds from 0 to 604800. Set it to what it takes, or unset it");
  }
  {
    const test::ScopedEnv overflowing(env_name(EnvVar::ring_spin_us), "99999999999999999999");  // read with atoll * 1000 before
    EXPECT_EQ(env_number(EnvVar::ring_spin_us), std::nullopt);
  }
  {
    const test::ScopedEnv fine(env_name(EnvVar::ring_spin_us), "250");
    EXPECT_EQ(env_number(EnvVar::ring_spin_us), 250);
  }
  {
    const test::ScopedEnv off(env_name(EnvVar::auto_pool), "0");
    EXPECT_EQ(env_on(EnvVar::auto_pool), false);
  }
}

// A name of ORTFLEET_ that no table lists is warned about once, with the one it may be a typo of; the
// set-up's and the tests' own names are not.
TEST(Environment, AnUnknownNameIsWarnedAboutWithWhatItMayMean) {
  const fs::path out = test::fresh_dir("environment-unknown") / "identity.onnx";
  const auto r = run_child({"env", "ORTFLEET_WARMPOOL_PARK=30", "ORTFLEET_BUILD_DIR=/x", test::bin("ortfleet"), "synth", "identity", out.string()},
                           {}, "", 60);
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.stderr_tail.find("warning: ORTFLEET_WARMPOOL_PARK is not a variable ortfleet reads; did you mean ORTFLEET_WARM_POOL_PARK?"),
            std::string::npos)
      << r.stderr_tail;
  EXPECT_EQ(r.stderr_tail.find("ORTFLEET_BUILD_DIR"), std::string::npos) << r.stderr_tail;
  const test::ScopedEnv typo("ORTFLEET_WARMPOOL_PARK", "30");
  const auto unknown = unknown_ortfleet_variables();
  EXPECT_NE(std::find(unknown.begin(), unknown.end(), "ORTFLEET_WARMPOOL_PARK"), unknown.end());
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
  // And the names of the set-up, the build and the tests, which no program reads.
  const std::regex other(R"(\| `(ORTFLEET_[A-Z0-9_]+)` \| ([^|]+) \|\n)");
  std::vector<std::string> others_listed;
  for (auto it = std::sregex_iterator(page.begin(), page.end(), other); it != std::sregex_iterator(); ++it) others_listed.push_back((*it)[1]);
  std::vector<std::string> others;
  for (const auto& o : kOtherVariables) others.emplace_back(o.name);
  EXPECT_EQ(others_listed, others) << "docs/environment.md lists kOtherVariables, in its order";
}

TEST(Environment, EveryOrtfleetNameInTheProgramsIsInTheTable) {
  // Build-time names (compile definitions, CMake options), which no program reads from its environment.
  const std::set<std::string> build_time = {"ORTFLEET_VERSION", "ORTFLEET_FETCHED_ORT_DIR", "ORTFLEET_FETCHED_WEB_DIR",
                                            "ORTFLEET_SOURCE_DIR", "ORTFLEET_HAVE_ZLIB", "ORTFLEET_BUILD_PYTHON", "ORTFLEET_REPORT_TEMPLATE",
                                            "ORTFLEET_UNIT_TEMPLATE", "ORTFLEET_UNIT_BINARY"};
  std::set<std::string> table;
  for (const auto& v : kEnvironmentVariables) table.insert(v.name);
  for (const auto& o : kOtherVariables) table.insert(o.name);  // known, so never warned about
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
