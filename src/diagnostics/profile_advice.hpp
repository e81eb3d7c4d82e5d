#pragma once
// What profile says about each phase: its label for people and what to do when it is a top cost
// (profile_advice.cpp holds the table; profile_phases.cpp attaches it to the phases it finds).
#include <string>

namespace ortfleet::detail {

struct Advice {
  const char* name;
  const char* label;
  const char* advice;
  /// Whether the user can change it (a flag, the model's form, a warm pool): profile ranks only these
  /// as top costs; the rest (exec to main, the command's own set-up) are shown, not advised on.
  bool actionable = true;
};

/// The label and advice of phase `name` ("cuda.context", "warmup", ...); empty strings for a phase
/// the table does not know.
const Advice& advice_for(const std::string& name);

}  // namespace ortfleet::detail
