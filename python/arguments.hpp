#pragma once
// Python arguments as ortfleet's options: devices, a config (a path or a dict), and Fleet's keywords, each
// a row of the settings table (ortfleet/base/settings.hpp), its warm-up inputs among them.
#include <sys/types.h>

#include <string>
#include <vector>

#include "bindings.hpp"
#include "ortfleet/engine/devices.hpp"
#include "ortfleet/base/settings.hpp"
#include "ortfleet/engine/options.hpp"
#include "ortfleet/fleet/fleet.hpp"

namespace ortfleet::python {

/// A GPU ordinal (0), "cuda:1", "1" or "cpu".
/// A Python int as a number, or nothing where it does not fit (2**70: pybind11's own cast said "Unable to
/// cast Python instance to C++ type", issue 58's audit).
std::optional<long long> device_number(const py::handle& h);
Device to_device(const py::handle& h);
/// None (every GPU, else the CPU), a string as on the command line ("all", "0,1", "cpu*2"), or a list
/// of what to_device takes.
std::vector<Device> to_devices(const py::object& devices);
/// None (the defaults), a config file's path, or a dict in the same shape.
RunConfig to_config(const py::object& config);
/// JSON text as Python objects (json.loads).
py::object parse_json(const std::string& text);

/// A file of warm-up inputs that lives as long as the fleet using it: the user's path, or the arrays
/// of a dict saved with numpy.savez into a private temporary file, removed with the fleet.
class WarmupInputsFile {
 public:
  WarmupInputsFile() = default;
  WarmupInputsFile(const WarmupInputsFile&) = delete;
  WarmupInputsFile& operator=(const WarmupInputsFile&) = delete;
  ~WarmupInputsFile();
  /// Sets `o` from the keywords: warmup_inputs (a path, or a dict of name -> array) and input_ranges
  /// (a dict of name -> value, or (lo, hi)).
  void apply(WarmupOptions& o, const py::object& inputs, const py::object& ranges);

 private:
  std::string temporary_;
  pid_t written_by_ = 0;
};

/// `value` of the number argument `keyword` (runs=, budget=), checked by `rule` as the command line
/// checks its flag: a bool, a text, NaN, infinity and a number out of range are refused in one line
/// naming the keyword ("runs=0 is out of range: give a whole number from 1 to 1000").
double number_argument(const char* keyword, const ValueRule& rule, const py::handle& value);

/// Whether the settings table's row is one of Fleet's keywords (model and devices are its positional
/// arguments): a keyword of a fleet's start or of the config.
bool is_fleet_keyword(const SettingRow& row);

/// Fleet's options from its arguments: `keywords` read by the settings table (each checked by its row,
/// the config's keys of one value set through their fields: ortfleet/engine/config_fields.hpp), the
/// shape keywords through the grammar of shapes and sizes (ortfleet/engine/shape_grammar.hpp); a
/// keyword the table does not list for Fleet is an error naming the closest one. Each keyword given
/// replaces what the config says. `warmup_file` keeps a dict of warm-up inputs, saved to a file.
FleetOptions fleet_options(const py::object& devices, const py::kwargs& keywords, WarmupInputsFile& warmup_file);

/// The first line of Fleet's docstring, its signature as the settings table makes it, and after it
/// what each keyword takes: what _calls.py and help() read.
std::string fleet_docstring();

}  // namespace ortfleet::python
