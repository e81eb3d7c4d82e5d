#pragma once
// Python arguments as ortfleet's options: devices, a config (a path or a dict), the shape keywords of
// Fleet (shapes=, batches=, buckets=, ...) and its warm-up inputs.
#include <string>
#include <vector>

#include "bindings.hpp"
#include "ortfleet/engine/devices.hpp"
#include "ortfleet/engine/options.hpp"

namespace ortfleet::python {

/// A GPU ordinal (0), "cuda:1", "1" or "cpu".
Device to_device(const py::handle& h);
/// None (every GPU, else the CPU), a string as on the command line ("all", "0,1", "cpu*2"), or a list
/// of what to_device takes.
std::vector<Device> to_devices(const py::object& devices);
/// None (the defaults), a config file's path, or a dict in the same shape.
RunConfig to_config(const py::object& config);
/// JSON text as Python objects (json.loads).
py::object parse_json(const std::string& text);

/// The shape keywords of Fleet, over what the config says (each one given replaces the config's);
/// strings go through the grammar of shapes and sizes (ortfleet/engine/shape_grammar.hpp).
void apply_shape_keywords(ShapeOptions& o, const py::object& shapes, const py::object& batches, const py::object& max_sessions,
                          const py::object& pad_batch, const py::object& buckets, const py::object& pad_values,
                          const py::object& shape_policy);

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
};

}  // namespace ortfleet::python
