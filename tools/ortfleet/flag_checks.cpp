#include "flag_checks.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>

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
        char* end = nullptr;
        const double value = std::strtod(text.c_str(), &end);
        if (text.empty() || *end != '\0' || std::isnan(value)) return fmt::format("{} {} is not a number: give {}", name, text, allowed(range));
        const bool digits = text.find_first_not_of("0123456789", text[0] == '-' || text[0] == '+' ? 1 : 0) == std::string::npos;
        if (range.whole && !digits) return fmt::format("{} {} is not a whole number: give {}", name, text, allowed(range));
        const bool inside = (range.above_lo ? value > range.lo : value >= range.lo) && value <= range.hi;
        if (!inside) return fmt::format("{} {} is out of range: give {}", name, text, allowed(range));
        return {};
      },
      fmt::format(fmt::runtime(range.above_lo ? "over {}, up to {}{}" : "from {} to {}{}"), number_text(range.lo), number_text(range.hi),
                  *range.unit != 0 ? std::string(" ") + range.unit : ""));
  return option->check(check);
}

NumberRange time_limit() { return {.lo = 0, .hi = kMaxTimeoutS, .unit = "seconds", .whole = false, .above_lo = true}; }

std::string usage_error_line(const CLI::App& app, const CLI::ParseError& error) {
  // CLI11 says "NAME: MESSAGE"; our range checks name the flag themselves.
  std::string text = error.what();
  if (const auto colon = text.find(": "); colon != std::string::npos && text.compare(colon + 2, colon + 1, text.substr(0, colon) + " ") == 0) {
    text.erase(0, colon + 2);
  }
  std::string command = "ortfleet";
  for (const CLI::App* at = &app; !at->get_subcommands().empty();) {
    at = at->get_subcommands().front();
    command += " " + at->get_name();
  }
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

double case_timeout_s(const std::string& model, double given) {
  if (given > 0) return given;
  std::error_code ec;
  uint64_t bytes = fs::file_size(model, ec);
  if (ec) bytes = 0;
  const uint64_t data = fs::file_size(model + ".data", ec);
  if (!ec) bytes += data;
  return 300.0 + 0.6 * static_cast<double>(bytes >> 20);
}
}  // namespace ortfleet::cli
