#pragma once
// What a flag takes and how a command line is refused: every value checked on its text before
// CLI11 converts it, and a usage error said in one line with the help to read.
#include <CLI/CLI.hpp>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

namespace ortfleet::cli {

/// The numbers a flag takes, checked on its text before CLI11 converts it, so that every refusal is one
/// sentence naming the flag, the value given and what to give instead:
/// "--timeout -1 is out of range: give a number of seconds above 0 and at most 604800".
struct NumberRange {
  double lo = 0;
  double hi = 0;
  const char* unit = "";  ///< "seconds"; "" for a plain count
  bool whole = true;      ///< whole numbers only
  bool above_lo = false;  ///< lo itself is refused (a time limit of 0)
};
/// Attaches `range` to `option`, whose help then shows it ("INT:from 1 to 1000"); returns `option`.
CLI::Option* in_range(CLI::Option* option, NumberRange range);
/// The longest time limit a flag takes: a week.
inline constexpr double kMaxTimeoutS = 7 * 24 * 3600.0;
/// A time limit: more than 0 seconds, at most a week.
NumberRange time_limit();
/// The refusal of a command line CLI11 could not parse, as one line with what to do next; a word it
/// did not take that is close to a command or flag is named as a typo, with what was meant.
std::string usage_error_line(const CLI::App& app, const CLI::ParseError& error);
/// The one of `names` that `typed` is a typo of (at most two letters added, dropped, changed or
/// swapped, and fewer than half of them), the nearest first; nothing when none is that close.
std::optional<std::string> closest_name(const std::string& typed, const std::vector<std::string>& names);

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
/// rounds are cut to fit; `what_else` says what else the budget bounds (", and each Python anchor ...").
void add_budget_option(CLI::App* app, double& seconds, const std::string& what_else, const std::string& rounds_flag);
/// The budget a run gets: none (0) when `rounds_flag` was given and --budget was not (the rounds asked
/// for are run), else `seconds`.
double budget_for(const CLI::App& app, double seconds, const std::string& rounds_flag);
/// The deadline of one case: `given` when set (> 0), else sized to the model: 300 s and 0.6 s per MB
/// of it (weights in external data included), so that a 1.3 GB model gets about 18 minutes.
double case_timeout_s(const std::string& model, double given);

}  // namespace ortfleet::cli
