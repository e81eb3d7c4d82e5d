#include "flag_checks.hpp"

#include "ortfleet/base/number_text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <vector>

namespace ortfleet::cli {
namespace fs = std::filesystem;

namespace {
/// 604800, 0.1, 1e+30: whole numbers as they are typed.
std::string number_text(double v) {
  return v == std::floor(v) && std::fabs(v) < 9e18 ? fmt::format("{}", static_cast<long long>(v)) : fmt::format("{:g}", v);
}

/// What `range` takes, in words: "a whole number from 1 to 1000", "a number of seconds above 0 and at most 604800".
std::string allowed(const NumberRange& range) {
  const std::string what = std::string(range.whole ? "a whole number" : "a number") + (*range.unit != 0 ? std::string(" of ") + range.unit : "");
  if (range.above_lo) return what + " above " + number_text(range.lo) + " and at most " + number_text(range.hi);
  return what + " from " + number_text(range.lo) + " to " + number_text(range.hi);
}
}  // namespace

CLI::Option* in_range(CLI::Option* option, NumberRange range) {
  const std::string name = option->get_name();
  CLI::Validator check(
      [name, range](std::string& text) -> std::string {
        const auto number = parse_decimal(text);  // "0x10" is refused, not read as 16
        if (!number) return fmt::format("{} {} is not a number: give {}", name, text, allowed(range));
        const bool digits = text.find_first_not_of("0123456789", text[0] == '-' || text[0] == '+' ? 1 : 0) == std::string::npos;
        if (range.whole && !digits) return fmt::format("{} {} is not a whole number: give {}", name, text, allowed(range));
        const double value = *number;
        const bool inside = (range.above_lo ? value > range.lo : value >= range.lo) && value <= range.hi;
        if (!inside) return fmt::format("{} {} is out of range: give {}", name, text, allowed(range));
        return {};
      },
      fmt::format(fmt::runtime(range.above_lo ? "over {}, up to {}{}" : "from {} to {}{}"), number_text(range.lo), number_text(range.hi),
                  *range.unit != 0 ? std::string(" ") + range.unit : ""));
  return option->check(check);
}

NumberRange time_limit() { return {.lo = 0, .hi = kMaxTimeoutS, .unit = "seconds", .whole = false, .above_lo = true}; }

std::optional<std::string> closest_name(const std::string& typed, const std::vector<std::string>& names) {
  // Optimal string alignment distance: a letter added, dropped or changed, or two neighbours swapped.
  auto distance = [](const std::string& a, const std::string& b) {
    std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
    for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
    for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
      for (size_t j = 1; j <= b.size(); ++j) {
        d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
        if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
    return d[a.size()][b.size()];
  };
  std::optional<std::string> best;
  size_t best_distance = 0;
  for (const auto& name : names) {
    const size_t dist = distance(typed, name);
    // A typo, not another word: at most 2 edits, and fewer than half the letters.
    if (dist > 2 || dist * 2 >= std::max<size_t>(typed.size(), 2)) continue;
    if (!best || dist < best_distance) {
      best = name;
      best_distance = dist;
    }
  }
  return best;
}

namespace {
/// The subcommand the command line reached ("ortfleet cache" for `ortfleet cache lsit`).
const CLI::App& deepest_command(const CLI::App& app) {
  const CLI::App* at = &app;
  while (!at->get_subcommands().empty()) at = at->get_subcommands().front();
  return *at;
}

/// What the user typed that the command line did not take, said as a typo when it is close to a
/// command or a flag of where it was typed ("'bnech' is not an ortfleet command; did you mean
/// 'bench'?"); empty when nothing was left over.
std::string unknown_word(const CLI::App& root, const CLI::App& at, const std::string& command) {
  const auto left = root.remaining(/*recurse=*/true);
  if (left.empty()) return {};
  // A flag first: "5 --warm-pool-idle" is a flag not taken and its value.
  const auto flag = std::find_if(left.begin(), left.end(), [](const std::string& w) { return w.size() > 1 && w[0] == '-'; });
  std::vector<std::string> names;
  if (flag != left.end()) {
    for (const CLI::App* app : {&at, &root}) {
      for (const CLI::Option* option : app->get_options()) {
        for (const auto& name : option->get_lnames()) names.push_back("--" + name);
      }
    }
    const std::string typed = flag->substr(0, flag->find('='));
    const auto match = closest_name(typed, names);
    return fmt::format("{} is not a flag of {}{}", typed, command, match ? "; did you mean " + *match + "?" : "");
  }
  if (at.get_subcommands({}).empty() || !at.get_subcommands().empty()) return {};
  for (const CLI::App* sub : at.get_subcommands({})) names.push_back(sub->get_name());
  const auto match = closest_name(left.front(), names);
  return fmt::format("'{}' is not an {} command{}", left.front(), command, match ? "; did you mean '" + *match + "'?" : "");
}
}  // namespace

std::string usage_error_line(const CLI::App& app, const CLI::ParseError& error) {
  // CLI11 says "NAME: MESSAGE"; our range checks name the flag themselves.
  std::string text = error.what();
  if (const auto colon = text.find(": "); colon != std::string::npos && text.compare(colon + 2, colon + 1, text.substr(0, colon) + " ") == 0) {
    text.erase(0, colon + 2);
  }
  const CLI::App& at = deepest_command(app);
  std::string command = "ortfleet";
  for (const CLI::App* up = &at; up->get_parent() != nullptr; up = up->get_parent()) command.insert(8, " " + up->get_name());
  if (const std::string typo = unknown_word(app, at, command); !typo.empty()) text = typo;
  for (char& c : text) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return "ortfleet: error: " + text + " (see `" + command + " --help`)";
}

void add_case_timeout_option(CLI::App* app, double& seconds) {
  in_range(app->add_option("--case-timeout", seconds,
                           "Seconds one case (a fresh-process start or anchor) may take before it is killed and reported as a failed row "
                           "(default: 300 plus 0.6 per MB of the model)"),
           time_limit());
}

void add_budget_option(CLI::App* app, double& seconds, const std::string& what_else, const std::string& rounds_flag) {
  in_range(app->add_option("--budget", seconds,
                           "Seconds it may take: once the first round shows what a round costs, the rounds are cut to fit" + what_else +
                               "; 0: no limit (with " + rounds_flag + " given and no --budget: none)"),
           {.lo = 0, .hi = kMaxTimeoutS, .unit = "seconds", .whole = false});
}

double budget_for(const CLI::App& app, double seconds, const std::string& rounds_flag) {
  const FlagChecks flags(app);
  return flags.given(rounds_flag) && !flags.given("--budget") ? 0 : seconds;
}

double case_timeout_s(const std::string& model, double given) {
  if (given > 0) return given;
  std::error_code ec;
  uint64_t bytes = fs::file_size(model, ec);
  if (ec) bytes = 0;
  const uint64_t data = fs::file_size(model + ".data", ec);
  if (!ec) bytes += data;
  return 300.0 + 0.6 * static_cast<double>(bytes >> 20);
}
bool FlagChecks::given(const std::string& flag) const {
  const CLI::Option* option = command_.get_option_no_throw(flag);
  return option != nullptr && option->count() > 0;
}

std::string FlagChecks::first_given(std::initializer_list<std::string> flags) const {
  for (const auto& flag : flags) {
    if (given(flag)) return flag;
  }
  return {};
}

void FlagChecks::needs(const std::string& flag, const std::string& needed) const {
  if (given(flag) && !given(needed)) refuse(fmt::format("{} does nothing without {}: add {}, or leave {} out", flag, needed, needed, flag));
}

void FlagChecks::excludes(const std::string& flag, const std::string& other, const std::string& why) const {
  if (given(flag) && given(other)) {
    refuse(fmt::format("{} does nothing with {}{}: leave one of them out", flag, other, why.empty() ? "" : " (" + why + ")"));
  }
}

void FlagChecks::refuse(const std::string& line) { throw CLI::ValidationError(line); }

}  // namespace ortfleet::cli
