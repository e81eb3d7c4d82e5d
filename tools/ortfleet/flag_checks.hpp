#pragma once
// What a flag takes and how a command line is refused: every value checked on its text before
// CLI11 converts it, and a usage error said in one line with the help to read.
#include <CLI/CLI.hpp>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "ortfleet/base/settings.hpp"

namespace ortfleet::cli {

/// The numbers a flag of one command takes, checked on its text before CLI11 converts it by the one
/// check of every setting (ortfleet/base/settings.hpp, ValueRule), so that every refusal is one
/// sentence naming the flag, the value given and what to give instead:
/// "--timeout -1 is out of range: give a number of seconds above 0 and at most 604800". A flag of a
/// setting of the table takes its rule from there (add_setting_option).
struct NumberRange {
  double lo = 0;
  double hi = 0;
  const char* unit = "";  ///< "seconds"; "" for a plain count
  bool whole = true;      ///< whole numbers only
  bool above_lo = false;  ///< lo itself is refused (a time limit of 0)
};
/// Attaches `range` to `option`, whose help then shows it ("INT:from 1 to 1000"); returns `option`.
CLI::Option* in_range(CLI::Option* option, NumberRange range);
/// The same for a rule of the settings table.
CLI::Option* checked_by_rule(CLI::Option* option, const ValueRule& rule);
/// The longest time limit a flag takes: a week.
inline constexpr double kMaxTimeoutS = kWeekS;
/// A time limit: more than 0 seconds, at most a week.
NumberRange time_limit();
/// The option of setting `s` (its row of the settings table: its flag, help and check), with `names`
/// its flag and aliases where it has more than one ("-s,--strategy"; default: the row's flag).
template <typename T>
CLI::Option* add_setting_option(CLI::App* app, Setting s, T& value, const std::string& names = {});
/// A flag (no value) of setting `s`.
CLI::Option* add_setting_flag(CLI::App* app, Setting s, bool& value, const std::string& names = {});
/// The refusal of a command line CLI11 could not parse, as one line with what to do next; a word it
/// did not take that is close to a command or flag is named as a typo, with what was meant.
std::string usage_error_line(const CLI::App& app, const CLI::ParseError& error);
/// Which flags go together, checked in one step per command when its command line is parsed, before
/// any work: a flag that does nothing without another, or with another, is a usage error (exit 2) in
/// one line naming both and what to do: "--batch does nothing without --inference: add --inference,
/// or leave --batch out".
class FlagChecks {
 public:
  explicit FlagChecks(const CLI::App& command) : command_(command) {}
  /// Whether `flag` ("--batch", or a positional's name) was given on the command line.
  bool given(const std::string& flag) const;
  /// The first of `flags` given, or "".
  std::string first_given(std::initializer_list<std::string> flags) const;
  /// Refuses `flag` given without `needed`.
  void needs(const std::string& flag, const std::string& needed) const;
  /// Refuses `flag` given with `other`; `why` (may be empty) says why the two do nothing together.
  void excludes(const std::string& flag, const std::string& other, const std::string& why = "") const;
  /// Throws the usage error `line` (a sentence naming the flags and what to do).
  [[noreturn]] static void refuse(const std::string& line);

 private:
  const CLI::App& command_;
};

/// --case-timeout SECONDS, shared by bench, profile and tune: each fresh-process case (a start, an
/// anchor) that outlives it is killed and becomes a failed row with the reason.
void add_case_timeout_option(CLI::App* app, double& seconds);
/// --budget SECONDS, shared by bench and tune: once the first timed round shows what a round costs, the
/// rounds are cut to fit; `what_else` says what else the budget bounds (", and each Python anchor ...");
/// `rule` is what it takes (the library's, beside the options: Python's budget= takes the same).
void add_budget_option(CLI::App* app, double& seconds, const ValueRule& rule, const std::string& what_else, const std::string& rounds_flag);
/// The budget a run gets: none (0) when `rounds_flag` was given and --budget was not (the rounds asked
/// for are run), else `seconds`.
double budget_for(const CLI::App& app, double seconds, const std::string& rounds_flag);
/// The deadline of one case: `given` when set (> 0), else sized to the model: 300 s and 0.6 s per MB
/// of it (weights in external data included), so that a 1.3 GB model gets about 18 minutes.
double case_timeout_s(const std::string& model, double given);

namespace detail_flags {
/// What `s`'s row says its option takes, attached to `option`: a number's range, a choice's words.
CLI::Option* checked_by_row(CLI::Option* option, Setting s);
}  // namespace detail_flags

template <typename T>
CLI::Option* add_setting_option(CLI::App* app, Setting s, T& value, const std::string& names) {
  const SettingRow& row = setting_row(s);
  return detail_flags::checked_by_row(app->add_option(names.empty() ? std::string(row.flag) : names, value, row.help), s);
}

}  // namespace ortfleet::cli
