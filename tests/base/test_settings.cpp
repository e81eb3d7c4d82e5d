// Settings named in the library, words in the front ends (ortfleet/base/settings.hpp): a message names a
// setting by the library's name and a front end says it its way; the library's rooms spell no flag of
// the command line, but in the command lines they tell a user to run.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "ortfleet/base/settings.hpp"

namespace ortfleet {
namespace {
namespace fs = std::filesystem;

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
        const bool allowed = l.find("ortfleet ") != std::string::npos || command_pieces.count(l) > 0 || worker_arguments.count(l) > 0 ||
                             l.find("fetch-onnxruntime.sh --gpu") != std::string::npos || l.find("--gpus=N") != std::string::npos;
        EXPECT_TRUE(allowed) << fs::relative(e.path(), root).string() << ": \"" << l
                             << "\" spells a flag: name the setting instead (named(Setting::...)), and let the front ends say it";
      }
    }
  }
}

}  // namespace
}  // namespace ortfleet
