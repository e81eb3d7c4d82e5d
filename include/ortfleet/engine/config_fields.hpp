#pragma once
// The config file's keys of one value (a boolean, a count, seconds, a path, a choice) as fields of
// RunConfig, so that the config file (config_file.cpp), the command line's flags and the Python module's
// keywords read and write each of them the one same way, checked by its row of the settings table
// (ortfleet/base/settings.hpp). A key of several values (lists, maps: shapes, buckets, config entries)
// has code of its own in each, named by its row.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <variant>

#include "ortfleet/base/settings.hpp"
#include "ortfleet/engine/options.hpp"

namespace ortfleet::detail {

/// A field kept as an enum, read and written through its words (a choice of the settings table).
struct ChoiceField {
  std::string (*get)(const RunConfig&);
  /// Throws ortfleet::Error for a word the field does not take.
  void (*set)(RunConfig&, const std::string&);
};

struct ConfigField {
  Setting setting;
  std::variant<bool& (*)(RunConfig&), int& (*)(RunConfig&), std::optional<bool>& (*)(RunConfig&), std::optional<double>& (*)(RunConfig&),
               std::optional<uint64_t>& (*)(RunConfig&), std::string& (*)(RunConfig&), ChoiceField>
      field;
};

/// Every key of one value, in the settings table's order.
std::span<const ConfigField> config_fields();
/// The field of `setting`, or null when it is not a key of one value.
const ConfigField* config_field(Setting setting);

/// A value as a front end hands it over: a flag's presence or a Python bool, a number, a text.
using FieldValue = std::variant<bool, double, std::string>;
/// Sets field `f` of `config` to `value`, checked by its row of the settings table: a value of the wrong
/// kind or out of what the setting takes throws an ortfleet::Error naming the setting and the value
/// ("`shapes.max_sessions=0` is out of range: give a whole number from 1 to 256"), which each front end
/// says in its words.
void set_field(const ConfigField& f, RunConfig& config, const FieldValue& value);
/// The same from the text a flag gives ("8", "0.5", "HEURISTIC"; a boolean: "1" or "0").
void set_field_from_text(const ConfigField& f, RunConfig& config, const std::string& text);

/// The key's name inside its section: "session.intra_op_threads" -> "intra_op_threads".
std::string key_in_section(Setting setting);
/// Its section: "session.intra_op_threads" -> "session".
std::string section_of(Setting setting);

}  // namespace ortfleet::detail
