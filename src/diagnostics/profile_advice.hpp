#pragma once
// What profile says about each phase: its label for people and what to do when it is a top cost
// (profile_advice.cpp holds the table; profile_phases.cpp attaches it to the phases it finds).
#include <string>

namespace ortfleet::detail {

struct Advice {
  const char* name;
  const char* label;
  const char* advice;
};

/// The label and advice of phase `name` ("cuda.context", "warmup", ...); empty strings for a phase
/// the table does not know.
const Advice& advice_for(const std::string& name);

}  // namespace ortfleet::detail
