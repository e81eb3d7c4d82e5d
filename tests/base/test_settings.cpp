// Settings named in the library, words in the front ends (ortfleet/base/settings.hpp): a message names a
// setting by the library's name and a front end says it its way; the library's rooms spell no flag of
// the command line, but in the command lines they tell a user to run.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "ortfleet/base/settings.hpp"
#include "test_support.hpp"

namespace ortfleet {
namespace {
namespace fs = std::filesystem;
using test::error_of;

std::optional<std::string> as_flag(Setting s, const std::optional<std::string>& value) {
  const std::string flag = s == Setting::buckets ? "--buckets" : s == Setting::devices ? "--devices" : "";
  if (flag.empty()) return std::nullopt;
  return value ? flag + " " + *value : flag;
}

TEST(Settings, AMessageNamesASettingByTheLibrarysNameAndAFrontEndSaysItItsWay) {
  EXPECT_EQ(named(Setting::buckets), "`shapes.buckets`");
  EXPECT_EQ(named(Setting::buckets, "x.2=480,640"), "`shapes.buckets=x.2=480,640`");
  const std::string message = "pad the calls (" + named(Setting::buckets, "x.2=480,640") + "), or give " + named(Setting::devices) + " yourself";
  EXPECT_EQ(render_settings(message, as_flag), "pad the calls (--buckets x.2=480,640), or give --devices yourself");
  // A setting the front end has no words for, and backquoted text that names no setting, stay as they are.
  const std::string others = "raise " + named(Setting::run_timeout) + "; `ortfleet serve --devices all` runs one; `nosuch.setting`";
  EXPECT_EQ(render_settings(others, as_flag), others);
  EXPECT_EQ(render_settings("nothing named", as_flag), "nothing named");
}

// The table: every row's names are its own, its values say what they take, and its check is the one of
// every path (the command line's flags, the config file, Python's keywords, the environment).
TEST(Settings, EveryRowIsOneSettingsWithNamesOfItsOwn) {
  std::set<std::string> flags, keywords;
  for (const SettingRow& row : all_settings()) {
    EXPECT_EQ(&setting_row(row.id), &row);
    if (row.flag != nullptr) {
      EXPECT_EQ(std::string(row.flag).rfind("--", 0), 0u) << row.name;
      EXPECT_TRUE(flags.insert(row.flag).second) << row.flag << " is two settings' flag";
      EXPECT_EQ(setting_of_flag(row.flag), row.id);
    }
    if (row.keyword != nullptr) {
      EXPECT_TRUE(keywords.insert(row.keyword).second) << row.keyword << " is two settings' keyword";
      EXPECT_EQ(setting_of_keyword(row.keyword), row.id);
    }
    EXPECT_GT(std::string(row.help).size(), 5u) << row.name;
    EXPECT_EQ(row.scope == SettingScope::config, std::string(row.name).find('.') != std::string::npos)
        << row.name << ": the config's keys, and only they, are written SECTION.KEY";
    const ValueRule& v = row.values;
    if (v.kind == ValueKind::choice || v.kind == ValueKind::word_list) {
      EXPECT_FALSE(value_words(v).empty()) << row.name;
    }
    if (v.kind == ValueKind::whole || v.kind == ValueKind::number || v.kind == ValueKind::assignment) {
      EXPECT_LE(v.lo, v.hi) << row.name;
    }
    // Where a flag or keyword exists, a person can read its default (or the table says there is none worth saying).
    if (row.python_default != nullptr) {
      EXPECT_NE(row.keyword, nullptr) << row.name;
    }
  }
}

TEST(Settings, OneCheckOfAValueWhereverItComesFrom) {
  const ValueRule seconds = setting_row(Setting::warm_pool_idle).values;
  EXPECT_EQ(text_problem(seconds, "300"), "");
  EXPECT_EQ(text_problem(seconds, "abc"), "is not a number: give a number of seconds from 0 to 604800");
  EXPECT_EQ(text_problem(seconds, "0x10"), "is not a number: give a number of seconds from 0 to 604800");  // not 16
  EXPECT_EQ(text_problem(seconds, "inf"), "is not a number: give a number of seconds from 0 to 604800");
  EXPECT_EQ(number_problem(seconds, std::numeric_limits<double>::infinity()), "is out of range: give a number of seconds from 0 to 604800");
  EXPECT_EQ(number_problem(seconds, std::nan("")), "is out of range: give a number of seconds from 0 to 604800");
  const ValueRule limit = setting_row(Setting::start_timeout).values;
  EXPECT_EQ(number_problem(limit, 0), "is out of range: give a number of seconds above 0 and at most 604800");
  EXPECT_EQ(number_problem(limit, 604800), "");
  const ValueRule sessions = setting_row(Setting::max_shape_sessions).values;
  EXPECT_EQ(text_problem(sessions, "2.5"), "is not a whole number: give a whole number from 1 to 256");
  EXPECT_EQ(number_problem(sessions, 2.5), "is not a whole number: give a whole number from 1 to 256");
  EXPECT_EQ(text_problem(setting_row(Setting::ort_log_level).values, "loud"), "is not one of verbose, info, warning, error, fatal");
  EXPECT_EQ(text_problem(setting_row(Setting::park_trim).values, "heap,stack"), "");
  EXPECT_EQ(text_problem(setting_row(Setting::park_trim).values, "heap,lungs"), "is not a comma-separated list of arena, heap, stack, none");
  EXPECT_EQ(text_problem(setting_row(Setting::cache_root).values, "abc"), "is a relative path: give an absolute path");
  EXPECT_EQ(text_problem(setting_row(Setting::cudnn_choices).values, "0"), "");
  EXPECT_EQ(text_problem(setting_row(Setting::model).values, std::string("a\0b", 3)), "holds a NUL byte, which no path holds");
  EXPECT_EQ(text_problem(setting_row(Setting::test_worker_start_delay).values, "cpu=abc"),
            "is not NAME=NUMBER: give NAME=a number of seconds from 0 to 3600");
  // Threads: at least 64, and 4 per core where that is more, on every path.
  EXPECT_GE(highest_value(setting_row(Setting::intra_threads).values), 64);
  // A library error names the setting and its value, for each front end to say in its words.
  EXPECT_EQ(error_of([] { checked_number(Setting::start_timeout, std::numeric_limits<double>::infinity()); }),
            "`start_timeout_s=inf` is out of range: give a number of seconds above 0 and at most 604800");
  EXPECT_EQ(error_of([] { checked_text(Setting::model, std::string("m\0.onnx", 7)); }), "`model=m?.onnx` holds a NUL byte, which no path holds");
}

TEST(Settings, EveryNameIsOneSettings) {
  std::set<std::string> names;
  for (size_t i = 0; i < kSettingCount; ++i) {
    const auto s = static_cast<Setting>(i);
    EXPECT_TRUE(names.insert(setting_name(s)).second) << setting_name(s);
    EXPECT_EQ(setting_named(setting_name(s)), s) << setting_name(s);
  }
  EXPECT_EQ(setting_named("no.such"), std::nullopt);
}

/// The string literals of a C++ source's code (its comments left out), one per entry (adjacent pieces apart).
std::vector<std::string> literals_of(const fs::path& file) {
  std::ifstream in(file);
  std::string code;
  for (std::string line; std::getline(in, line);) {
    if (line.find_first_not_of(' ') != std::string::npos && line.compare(line.find_first_not_of(' '), 2, "//") == 0) continue;
    code += line + "\n";
  }
  std::vector<std::string> out;
  const std::string& s = code;
  static const std::regex literal(R"re("((?:[^"\\\n]|\\.)*)")re");
  for (auto it = std::sregex_iterator(s.begin(), s.end(), literal); it != std::sregex_iterator(); ++it) out.push_back((*it)[1]);
  return out;
}

TEST(Settings, NoRoomOfTheLibrarySpellsAFlagOfTheCommandLine) {
  // What may: a command line a message tells a user to run ("ortfleet doctor MODEL --locate-crash ..."),
  // and the pieces it is put together from (session.cpp and worker_pool.cpp: a crash's locate command);
  // the worker executable's own command line; the set-up's scripts and Slurm's.
  const std::set<std::string> command_pieces = {" --custom-ops ", " --warmup-inputs ", " --input-range {}={}:{}", " --shapes ",
                                                " --locate-crash --device "};
  const std::set<std::string> worker_arguments = {"--channel-fd=", "--device=", "--narrowed", "--pool-daemon=", "--detached"};
  const std::regex flag(R"((^|[\s(`'])--[a-z][a-z-]+)");
  const fs::path root = ORTFLEET_TEST_SOURCE_DIR;
  for (const char* layer : {"base", "engine", "fleet"}) {
    for (const auto& e : fs::recursive_directory_iterator(root / "src" / layer)) {
      if (!e.is_regular_file() || (e.path().extension() != ".cpp" && e.path().extension() != ".hpp")) continue;
      for (const auto& l : literals_of(e.path())) {
        if (!std::regex_search(l, flag)) continue;
        // The settings table is where the flags are spelled, each alone in its column (its help names settings as `name`).
        const bool table_flag = e.path().filename() == "settings.cpp" && std::regex_match(l, std::regex("--[a-z][a-z-]+"));
        const bool allowed = table_flag || l.find("ortfleet ") != std::string::npos || command_pieces.count(l) > 0 || worker_arguments.count(l) > 0 ||
                             l.find("fetch-onnxruntime.sh --gpu") != std::string::npos || l.find("--gpus=N") != std::string::npos;
        EXPECT_TRUE(allowed) << fs::relative(e.path(), root).string() << ": \"" << l
                             << "\" spells a flag: name the setting instead (named(Setting::...)), and let the front ends say it";
      }
    }
  }
}

}  // namespace
}  // namespace ortfleet
