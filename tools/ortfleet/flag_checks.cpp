#include "flag_checks.hpp"

#include "ortfleet/base/closest_name.hpp"
#include "ortfleet/base/number_text.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <vector>

namespace ortfleet::cli {
namespace fs = std::filesystem;

namespace {
ValueRule rule_of(const NumberRange& range) {
  return {.kind = range.whole ? ValueKind::whole : ValueKind::number, .lo = range.lo, .hi = range.hi, .unit = range.unit,
          .above_lo = range.above_lo};
}
}  // namespace

CLI::Option* checked_by_rule(CLI::Option* option, const ValueRule& rule) {
  const std::string name = option->get_name();
  CLI::Validator check(
      [name, rule](std::string& text) -> std::string {
        const std::string problem = text_problem(rule, text);
        return problem.empty() ? std::string() : fmt::format("{} {} {}", name, text, problem);
      },
      fmt::format(fmt::runtime(rule.above_lo ? "over {}, up to {}{}{}" : "from {} to {}{}{}"), number_words(rule.lo), number_words(rule.hi),
                  rule.hi_per_core > 0 ? fmt::format(" or {} per core", number_words(rule.hi_per_core)) : "",
                  *rule.unit != 0 ? std::string(" ") + rule.unit : ""));
  return option->check(check);
}

CLI::Option* in_range(CLI::Option* option, NumberRange range) { return checked_by_rule(option, rule_of(range)); }

NumberRange time_limit() { return {.lo = 0, .hi = kMaxTimeoutS, .unit = "seconds", .whole = false, .above_lo = true}; }

namespace detail_flags {
CLI::Option* checked_by_row(CLI::Option* option, Setting s) {
  const ValueRule& rule = setting_row(s).values;
  switch (rule.kind) {
    case ValueKind::whole:
    case ValueKind::number: return checked_by_rule(option, rule);
    case ValueKind::choice: {
      // Said as every path says a word a setting does not take; the choices shown as CLI11 shows them
      // ("TEXT:{a,b}"), where the completion reads them.
      const std::string name = option->get_name();
      return option->check(CLI::Validator(
          [name, rule](std::string& text) -> std::string {
            const std::string problem = text_problem(rule, text);
            return problem.empty() ? std::string() : fmt::format("{} {} {}", name, text, problem);
          },
          fmt::format("{{{}}}", fmt::join(value_words(rule), ","))));
    }
    default: return option;
  }
}
}  // namespace detail_flags

CLI::Option* add_setting_flag(CLI::App* app, Setting s, bool& value, const std::string& names) {
  const SettingRow& row = setting_row(s);
  return app->add_flag(names.empty() ? std::string(row.flag) : names, value, row.help);
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
    const auto match = detail::closest_name(typed, names);
    return fmt::format("{} is not a flag of {}{}", typed, command, match ? "; did you mean " + *match + "?" : "");
  }
  if (at.get_subcommands({}).empty() || !at.get_subcommands().empty()) return {};
  for (const CLI::App* sub : at.get_subcommands({})) names.push_back(sub->get_name());
  const auto match = detail::closest_name(left.front(), names);
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

void add_budget_option(CLI::App* app, double& seconds, const ValueRule& rule, const std::string& what_else, const std::string& rounds_flag) {
  checked_by_rule(app->add_option("--budget", seconds,
                                  "Seconds it may take: once the first round shows what a round costs, the rounds are cut to fit" + what_else +
                                      "; 0: no limit (with " + rounds_flag + " given and no --budget: none)"),
                  rule);
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
