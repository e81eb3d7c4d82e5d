// The settings a model can contradict, checked against its file before any session or worker is made
// (options.hpp: check_config_against_model). The command line and the Python module both call it, so
// that a mistake is one line before any work rather than a failed device after the start.
#include "engine/session/warmup_inputs.hpp"
#include "engine/shapes/buckets.hpp"
#include "ortfleet/engine/model_file.hpp"
#include "ortfleet/engine/options.hpp"

namespace ortfleet {

void check_shapes_against_model(const ShapeOptions& shapes, const std::string& model) {
  const std::vector<TensorSpec> inputs = inspect_model(model).input_specs;
  detail::BucketPlan buckets;
  detail::declare_shapes(inputs, shapes, 1, buckets);
}

void check_config_against_model(const RunConfig& config, const std::string& model) {
  const ShapeOptions& shapes = config.shapes;
  const bool shapes_given = !shapes.declared.empty() || !shapes.batches.empty() || !shapes.buckets.empty();
  const bool warmup_given = !config.warmup.inputs_file.empty() || !config.warmup.input_ranges.empty();
  if (!shapes_given && !warmup_given) return;  // nothing the model could contradict: the file is not read
  const std::vector<TensorSpec> inputs = inspect_model(model).input_specs;
  if (shapes_given) {
    detail::BucketPlan buckets;
    detail::declare_shapes(inputs, shapes, 1, buckets);
  }
  // The arrays' names, element types, ranks, fixed and shared dims, and the ranges' names and bounds;
  // the ranges the model's metadata records are its author's, and right by construction.
  if (warmup_given) detail::WarmupInputSource(config.warmup, inputs, {}, 1);
}

}  // namespace ortfleet
