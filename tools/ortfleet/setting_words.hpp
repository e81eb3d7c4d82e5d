#pragma once
// The library's settings in the command line's words: each setting's flag, from the settings table
// (ortfleet/base/settings.hpp).
// Every text the command line shows goes through in_flags: what it prints on stdout and stderr (errors,
// notes, tables, JSON: say_settings_as_flags) and its log (logger_in_flags).
#include <spdlog/spdlog.h>

#include <memory>
#include <string>

namespace ortfleet::cli {

/// `text` with each setting it names said as its flag ("`shapes.buckets=x.2=480`" -> "--buckets x.2=480");
/// a setting with no flag is said by its library name.
std::string in_flags(const std::string& text);

/// From now on, every line printed on std::cout and std::cerr says the settings it names as flags.
void say_settings_as_flags();

/// A logger named `name` that prints on stderr (in colour on a terminal), each record's text in_flags:
/// the command line's and its worker's.
std::shared_ptr<spdlog::logger> logger_in_flags(const std::string& name);

}  // namespace ortfleet::cli
