// The settings a model can contradict, checked against its file before any session or worker is made
// (options.hpp: check_config_against_model). The command line and the Python module both call it, so
// that a mistake is one line before any work rather than a failed device after the start.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/elf_file.hpp"
#include "base/private_dir.hpp"
#include "engine/session/warmup_inputs.hpp"
#include "engine/shapes/buckets.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/base/output_file.hpp"
#include "ortfleet/base/settings.hpp"
#include "ortfleet/engine/model_file.hpp"
#include "ortfleet/engine/options.hpp"

namespace ortfleet {

namespace {
/// A custom-op library a session will load: there, a file, readable, a shared library (ELF). A worker
/// would find out only as it creates its session, after the start had begun on every device.
void check_custom_op_library(const std::string& library) {
  const std::string fix = "Give " + named(Setting::custom_ops) + " the path of the shared library (.so) that registers the model's custom operators";
  struct stat st {};
  if (::stat(library.c_str(), &st) != 0) throw Error("the custom-op library " + library + " cannot be read: " + std::strerror(errno), fix);
  if (!S_ISREG(st.st_mode)) throw Error("the custom-op library " + library + " is not a file (it is " + describe_file(st) + ")", fix);
  if (::access(library.c_str(), R_OK) != 0) throw Error("the custom-op library " + library + " cannot be read: " + std::strerror(errno), fix);
  // Read as the loader will read it: dlopen of a damaged file kills the process that loads it.
  detail::check_loadable_library(library, {"RegisterCustomOps"}, "the custom-op library", fix);
  detail::check_library_owners(library, "the custom-op library", fix);
}
}  // namespace

void check_shapes_against_model(const ShapeOptions& shapes, const std::string& model) {
  const std::vector<TensorSpec> inputs = inspect_model(model).input_specs;
  detail::BucketPlan buckets;
  detail::declare_shapes(inputs, shapes, 1, buckets);
}

void check_config_against_model(const RunConfig& config, const std::string& model) {
  const ShapeOptions& shapes = config.shapes;
  const bool shapes_given = !shapes.declared.empty() || !shapes.batches.empty() || !shapes.buckets.empty();
  for (const auto& library : config.session.custom_op_libraries) check_custom_op_library(library);
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
