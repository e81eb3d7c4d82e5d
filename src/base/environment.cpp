// The environment's variables read through their registry (environment.hpp), each value checked by its
// setting's one check (ortfleet/base/settings.hpp).
#include "base/environment.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <mutex>
#include <set>

#include "ortfleet/base/closest_name.hpp"
#include "base/system_paths.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/base/number_text.hpp"
#include "ortfleet/base/settings.hpp"

extern char** environ;

namespace ortfleet::detail {

namespace {

const SettingRow& row_of(EnvVar v) {
  const auto setting = setting_named(kEnvironmentVariables[static_cast<size_t>(v)].setting);
  if (!setting) throw Error(std::string(env_name(v)) + " names no setting");  // tests/base/test_environment.cpp keeps them in step
  return setting_row(*setting);
}

/// Says `line` once in this process's life, whatever reads the variable how often.
void warn_once(const std::string& name, const std::string& line) {
  static std::mutex mutex;
  static std::set<std::string> said;
  {
    std::lock_guard lock(mutex);
    if (!said.insert(name).second) return;
  }
  spdlog::warn("{}", line);
}

std::string shown(const std::string& value) {
  std::string out;
  for (const char c : value) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
    else out += c;
  }
  return out;
}

}  // namespace

std::string env_problem(EnvVar v, const std::string& value) {
  ValueRule rule = row_of(v).values;
  rule.absolute = rule.absolute || rule.kind == ValueKind::path;  // the children a variable reaches run in other folders
  const std::string problem = text_problem(rule, value);
  if (problem.empty()) return {};
  return std::string(env_name(v)) + "='" + shown(value) + "' " + problem;
}

std::optional<std::string> env_value(EnvVar v) {
  auto value = env_var(env_name(v));
  if (!value) return std::nullopt;
  const std::string problem = env_problem(v, *value);
  if (problem.empty()) return value;
  if (row_of(v).bad_variable == BadVariable::refuse) throw Error(problem, std::string("Set it to what it takes, or unset it"));
  warn_once(env_name(v), problem + "; it is left out (unset it, or set it to what it takes)");
  return std::nullopt;
}

std::optional<double> env_number(EnvVar v) {
  const auto value = env_value(v);
  if (!value) return std::nullopt;
  return parse_decimal(*value);  // checked above: a number of the setting's range
}

std::optional<bool> env_on(EnvVar v) {
  const auto value = env_value(v);
  if (!value) return std::nullopt;
  return *value == "1";  // checked above: 0 or 1
}

std::vector<std::string> unknown_ortfleet_variables() {
  std::set<std::string> known;
  for (const auto& v : kEnvironmentVariables) known.insert(v.name);
  for (const auto& v : kOtherVariables) known.insert(v.name);
  std::vector<std::string> unknown;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string_view text = *entry;
    if (text.rfind("ORTFLEET_", 0) != 0) continue;
    const std::string name(text.substr(0, text.find('=')));
    if (known.count(name) == 0) unknown.push_back(name);
  }
  return unknown;
}

}  // namespace ortfleet::detail

namespace ortfleet {

void check_environment() {
  using namespace detail;
  for (const auto& v : kEnvironmentVariables) env_value(v.id);  // refuses, or warns and leaves out
  std::vector<std::string> names;
  for (const auto& v : kEnvironmentVariables) names.emplace_back(v.name);
  for (const auto& name : unknown_ortfleet_variables()) {
    const auto meant = closest_name(name, names);
    warn_once(name, fmt::format("{} is not a variable ortfleet reads{} (docs/environment.md lists them)", shown(name),
                                meant ? "; did you mean " + *meant + "?" : ""));
  }
}

}  // namespace ortfleet
