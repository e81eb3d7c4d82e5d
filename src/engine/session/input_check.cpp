#include "engine/session/input_check.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "engine/runtime/ort_errors.hpp"
#include "engine/shapes/shapes.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/base/settings.hpp"

namespace ortfleet::detail {
namespace {

/// The multiple a dynamic dim past the first (height, width, sequence) needs in most models that
/// downsample their input: five halvings.
constexpr int64_t kCommonStride = 32;

/// "float64 (double)": ortfleet's (numpy's) name, and ONNX's where it differs, as ONNX Runtime's
/// messages say it ("tensor(double)").
std::string type_words(ElementType type) {
  const std::string name = to_string(type);
  if (type == ElementType::float32) return name + " (float)";
  if (type == ElementType::float64) return name + " (double)";
  return name;
}

/// How to convert a tensor to `type`, in the terms of the libraries that hand ortfleet its inputs.
std::string conversion_hint(ElementType type) {
  const auto* info = element_type_info(type);
  const std::string name = to_string(type);
  std::string hint = "Convert it first: ";
  if (info != nullptr && info->numpy_kind != 0) hint += "numpy's .astype(numpy." + std::string(type == ElementType::boolean ? "bool_" : name) + "), ";
  return hint + "torch's .to(torch." + (type == ElementType::boolean ? "bool" : name) + ")";
}

const TensorSpec* spec_named(const std::vector<TensorSpec>& inputs, const std::string& name) {
  const auto it = std::find_if(inputs.begin(), inputs.end(), [&](const TensorSpec& s) { return s.name == name; });
  return it == inputs.end() ? nullptr : &*it;
}

/// Whether ONNX Runtime's text says a node of the graph could not combine the sizes it got.
bool sizes_do_not_fit(std::string_view raw) {
  for (std::string_view needle : {"Attempting to broadcast an axis", "mismatched dimensions", "cannot be reshaped to the requested shape",
                                  "Invalid input shape"}) {
    if (raw.find(needle) != std::string_view::npos) return true;
  }
  return false;
}

}  // namespace

void check_run_inputs(const std::vector<TensorSpec>& inputs, const std::vector<Tensor>& given) {
  for (const auto& t : given) {
    const TensorSpec* spec = spec_named(inputs, t.name);
    if (spec == nullptr || spec->type == ElementType::undefined || spec->type == t.type) continue;  // an unknown name: check_shapes says so
    throw Error(fmt::format("input '{}' is {}; the model takes {}", t.name, type_words(t.type), type_words(spec->type)),
                conversion_hint(spec->type));
  }
  check_shapes(inputs, shapes_of(given));
}

void rethrow_run_error(const Ort::Exception& e, const std::string& model_path, const std::vector<TensorSpec>& inputs,
                       const std::vector<Tensor>& given, const std::string& where) {
  const std::string_view raw = e.what();
  // Two inputs the model names a dim alike in, given two sizes: that, not where the graph tripped on it.
  if (const auto conflict = shared_dim_conflict(inputs, shapes_of(given))) {
    spdlog::debug("running {} failed; ONNX Runtime said: {}", model_path, raw);
    throw Error(fmt::format("running {} failed: {}: they must be equal (ONNX Runtime: {})", model_path, *conflict,
                            describe_ort_failure(raw).cause),
                "Give that dim one size in every input that has it (pad the shorter, e.g. a mask with 0s)", where);
  }
  if (!sizes_do_not_fit(raw)) rethrow_ort_error(e, "running " + model_path, where);
  spdlog::debug("running {} failed; ONNX Runtime said: {}", model_path, raw);
  std::vector<std::string> shapes;
  std::vector<std::string> odd_dims;
  std::vector<std::string> padded;
  for (const auto& t : given) {
    const TensorSpec* spec = spec_named(inputs, t.name);
    if (spec == nullptr) continue;
    shapes.push_back(fmt::format("'{}' {} (the model declares {})", t.name, shape_text(t.shape), shape_text(*spec)));
    for (size_t i = 1; i < t.shape.size() && i < spec->shape.size(); ++i) {
      if (spec->shape[i] >= 0 || t.shape[i] % kCommonStride == 0) continue;
      odd_dims.push_back(fmt::format("{}.{} = {}", t.name, i, t.shape[i]));
      padded.push_back(fmt::format("{}.{}={}", t.name, i, (t.shape[i] / kCommonStride + 1) * kCommonStride));
    }
  }
  const std::string cause = describe_ort_failure(raw).cause;
  std::string hint = "The sizes given to the model's dynamic dims do not fit together inside its graph: give sizes it was made for";
  if (!odd_dims.empty()) {
    hint = fmt::format("{} {} not a multiple of {}, which models that downsample their input (most vision models) need: pad to {}, or "
                       "let buckets pad the calls and crop the outputs back ({})",
                       fmt::join(odd_dims, ", "), odd_dims.size() == 1 ? "is" : "are", kCommonStride, fmt::join(padded, ", "),
                       named(Setting::buckets, fmt::format("{}", fmt::join(padded, " "))));
  }
  throw Error(fmt::format("running {} failed: the model could not take the sizes it was given: {}; inputs: {}", model_path, cause,
                          fmt::join(shapes, ", ")),
              hint, where);
}

}  // namespace ortfleet::detail
