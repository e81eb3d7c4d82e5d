#include "engine/session/warmup_inputs.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <filesystem>

#include "engine/files/npy_file.hpp"
#include "ortfleet/base/error.hpp"
#include "engine/shapes/shapes.hpp"
#include "ortfleet/base/settings.hpp"

namespace ortfleet::detail {
namespace {

std::string give_real_inputs() {
  return "Give real warm-up inputs: " + named(Setting::warmup_inputs, "FILE.npz") + " (numpy.savez(FILE, name=array, ...)), or values and dims "
         "for generated ones: " + named(Setting::input_range, "NAME=LO:HI") + ", " + named(Setting::shapes, "NAME=DIMS");
}

std::string input_names(const std::vector<TensorSpec>& inputs) {
  std::string out;
  for (const auto& i : inputs) out += (out.empty() ? "" : ", ") + i.name;
  return out;
}

std::string range_text(const TensorSpec& spec, const ValueRange* range) {
  if (range != nullptr) return range->lo == range->hi ? fmt::format("value {}", range->lo) : fmt::format("values in [{}, {}]", range->lo, range->hi);
  const bool real = spec.type == ElementType::float32 || spec.type == ElementType::float64 || spec.type == ElementType::float16 ||
                    spec.type == ElementType::bfloat16;
  return real ? "random values in [-1, 1)" : "random values in {0, 1}";
}

/// The values an element of `type` holds, or nullopt where any double fits (float64).
std::optional<ValueRange> type_bounds(ElementType type) {
  const auto* info = element_type_info(type);
  if (info == nullptr) return std::nullopt;
  const double bits = 8.0 * static_cast<double>(info->size);
  if (type == ElementType::boolean) return ValueRange{0, 1};
  if (info->numpy_kind == 'i') return ValueRange{-std::exp2(bits - 1), std::exp2(bits - 1) - 1};
  if (info->numpy_kind == 'u') return ValueRange{0, std::exp2(bits) - 1};
  if (type == ElementType::float16) return ValueRange{-65504, 65504};
  if (type == ElementType::float32 || type == ElementType::bfloat16) return ValueRange{-3.4028234663852886e38, 3.4028234663852886e38};
  return std::nullopt;
}

/// Refuses a range an input of `spec`'s type cannot hold: generated values would wrap or saturate.
void check_range_fits(const TensorSpec& spec, const ValueRange& range) {
  const auto bounds = type_bounds(spec.type);
  if (!bounds || (range.lo >= bounds->lo && range.hi <= bounds->hi)) return;
  throw Error(fmt::format("input range {}={}:{} ({}) is beyond what {} input '{}' holds ({} to {})", spec.name,
                          range.lo, range.hi, named(Setting::input_range), to_string(spec.type), spec.name, bounds->lo, bounds->hi),
              fmt::format("Give a range within {}:{}", bounds->lo, bounds->hi));
}

}  // namespace

std::string WarmupInputs::made_up_text() const {
  std::string out;
  for (const auto& line : made_up) out += (out.empty() ? "" : "; ") + line;
  return out;
}

WarmupInputSource::WarmupInputSource(const WarmupOptions& options, const std::vector<TensorSpec>& inputs,
                                     std::map<std::string, ValueRange> model_ranges, int64_t dynamic_dim)
    : inputs_(inputs), file_path_(options.inputs_file), ranges_(std::move(model_ranges)), dynamic_dim_(dynamic_dim) {
  for (const auto& [name, range] : options.input_ranges) {
    if (std::none_of(inputs.begin(), inputs.end(), [&](const TensorSpec& s) { return s.name == name; })) {
      throw Error("input range '" + name + "' (" + named(Setting::input_range) + ") is not an input of this model (inputs: " + input_names(inputs) + ")",
                  "Use one of its input names");
    }
    check_range_fits(*std::find_if(inputs.begin(), inputs.end(), [&](const TensorSpec& s) { return s.name == name; }), range);
    ranges_[name] = range;
  }
  if (file_path_.empty()) return;
  // Where the arrays came from, as messages name it: the user's file, or what a front end wrote it from.
  const std::string origin = options.inputs_origin.empty() ? file_path_ : options.inputs_origin;
  const std::string only_input = inputs.size() == 1 ? inputs.front().name : std::string();
  for (Tensor& t : read_array_file(file_path_, only_input)) {
    const auto spec = std::find_if(inputs.begin(), inputs.end(), [&](const TensorSpec& s) { return s.name == t.name; });
    const char* hint = "Name each array after a model input: numpy.savez(FILE, input_name=array, ...)";
    if (t.name.empty()) {
      throw Error("the warm-up inputs file " + file_path_ + " is a .npy file, which serves only one-input models (this one has " +
                      std::to_string(inputs.size()) + ": " + input_names(inputs) + ")",
                  hint);
    }
    if (spec == inputs.end()) {
      throw Error((options.inputs_origin.empty() ? "the warm-up inputs file " + file_path_ : origin) + " holds '" + t.name +
                      "', which is not an input of this model (inputs: " +
                      input_names(inputs) + ")",
                  hint);
    }
    if (t.type != spec->type) {
      throw Error(fmt::format("warm-up input '{}' in {} is {}, and the model takes {}", t.name, origin, to_string(t.type), to_string(spec->type)),
                  "Convert it: array.astype(numpy." + to_string(spec->type) + ")");
    }
    try {
      check_shapes({*spec}, {{t.name, t.shape}});
    } catch (const Error& e) {
      throw Error("warm-up input '" + t.name + "' in " + origin + " does not fit the model: " + e.what_failed(), e.hint());
    }
    file_.emplace(t.name, std::move(t));
  }
  InputShapes given;
  for (const auto& [name, t] : file_) given[name] = t.shape;
  if (const auto conflict = shared_dim_conflict(inputs, given)) {
    throw Error("warm-up inputs in " + origin + ": " + *conflict + ": they must be equal", "Give those arrays one size for that dim");
  }
}

InputShapes WarmupInputSource::default_shapes() const {
  InputShapes known;
  for (const auto& [name, t] : file_) known[name] = t.shape;
  return complete_shapes(inputs_, std::move(known), dynamic_dim_);
}

WarmupInputs WarmupInputSource::make(const InputShapes& shapes, uint64_t seed) const { return make(shapes, seed, {}); }

WarmupInputs WarmupInputSource::make(const InputShapes& shapes, uint64_t seed, const std::map<std::string, ValueRange>& ranges) const {
  std::map<std::string, ValueRange> used = ranges_;
  for (const auto& [name, range] : ranges) used[name] = range;
  WarmupInputs out;
  std::vector<TensorSpec> generated;
  for (const auto& spec : inputs_) {
    const auto dims = shapes.find(spec.name);
    const auto from_file = file_.find(spec.name);
    if (from_file != file_.end() && dims != shapes.end() && from_file->second.shape == dims->second) {
      out.tensors.push_back(from_file->second);
      continue;
    }
    TensorSpec concrete = spec;
    std::string made_up_dims;
    if (dims != shapes.end()) {
      for (size_t i = 0; i < spec.shape.size() && i < dims->second.size(); ++i) {
        if (spec.shape[i] < 0) made_up_dims += (made_up_dims.empty() ? "" : ", ") + std::to_string(i);
      }
      concrete.shape = dims->second;
    }
    const auto range = used.find(spec.name);
    std::string line = fmt::format("'{}' {}", spec.name, shape_text(concrete.shape));
    if (!made_up_dims.empty()) line += " (dynamic dims " + made_up_dims + " chosen)";
    line += ", " + range_text(spec, range == used.end() ? nullptr : &range->second);
    if (from_file != file_.end()) line += " (the file's array has dims " + shape_text(from_file->second.shape) + ")";
    out.made_up.push_back(std::move(line));
    generated.push_back(std::move(concrete));
  }
  auto made = random_inputs(generated, seed, dynamic_dim_, used);
  // Back into the model's input order.
  std::vector<Tensor> ordered;
  for (const auto& spec : inputs_) {
    auto given = std::find_if(out.tensors.begin(), out.tensors.end(), [&](const Tensor& t) { return t.name == spec.name; });
    if (given != out.tensors.end()) {
      ordered.push_back(std::move(*given));
      continue;
    }
    auto gen = std::find_if(made.begin(), made.end(), [&](const Tensor& t) { return t.name == spec.name; });
    ordered.push_back(std::move(*gen));
  }
  out.tensors = std::move(ordered);
  return out;
}

std::string warmup_inputs_hint() { return give_real_inputs(); }

}  // namespace ortfleet::detail
