#include "engine/shapes/shapes.hpp"

#include <algorithm>
#include <limits>
#include <map>

#include "ortfleet/base/error.hpp"
#include "ortfleet/base/settings.hpp"

namespace ortfleet {

namespace {
const TensorSpec* find_spec(const std::vector<TensorSpec>& inputs, const std::string& name) {
  const auto it = std::find_if(inputs.begin(), inputs.end(), [&](const TensorSpec& s) { return s.name == name; });
  return it == inputs.end() ? nullptr : &*it;
}

std::string input_names(const std::vector<TensorSpec>& inputs) {
  std::string out;
  for (const auto& s : inputs) out += (out.empty() ? "" : ", ") + s.name + " " + shape_text(s);
  return out;
}

bool first_dim_dynamic(const TensorSpec& s) { return !s.shape.empty() && s.shape.front() < 0; }
}  // namespace

InputShapes shapes_of(const std::vector<Tensor>& tensors) {
  InputShapes out;
  for (const auto& t : tensors) out[t.name] = t.shape;
  return out;
}

void check_shapes(const std::vector<TensorSpec>& inputs, const InputShapes& given) {
  for (const auto& [name, dims] : given) {
    const TensorSpec* spec = find_spec(inputs, name);
    if (spec == nullptr) throw Error("'" + name + "' is not an input of this model", "Its inputs are: " + input_names(inputs));
    const std::string expected = "; the model expects " + shape_text(*spec);
    if (dims.size() != spec->shape.size()) {
      throw Error("input '" + name + "' has " + std::to_string(dims.size()) + " dims " + shape_text(dims) + expected,
                  "Give it a tensor of rank " + std::to_string(spec->shape.size()));
    }
    for (size_t i = 0; i < dims.size(); ++i) {
      // A dim the model fixes is checked below (a model may fix one at 0); a dynamic one takes a size of 1 or more.
      if (dims[i] < 0 || (dims[i] == 0 && spec->shape[i] < 0)) {
        throw Error("input '" + name + "' has shape " + shape_text(dims) + ": its " + (spec->shape[i] < 0 ? "dynamic " : "") + "dim " +
                        std::to_string(i) + " is " + std::to_string(dims[i]) + expected,
                    "Give dim " + std::to_string(i) + (spec->shape[i] < 0 ? " a size of 1 or more" : " its size " + std::to_string(spec->shape[i])));
      }
      if (spec->shape[i] >= 0 && dims[i] != spec->shape[i]) {
        throw Error("input '" + name + "' has shape " + shape_text(dims) + expected,
                    "Dim " + std::to_string(i) + " is fixed at " + std::to_string(spec->shape[i]) + " by the model");
      }
    }
    checked_element_count(dims, "input '" + name + "'");
  }
  for (const auto& spec : inputs) {
    if (!given.count(spec.name)) throw Error("input '" + spec.name + "' " + shape_text(spec) + " is missing", "Give every input of the model");
  }
}

std::optional<std::string> shared_dim_conflict(const std::vector<TensorSpec>& inputs, const InputShapes& given) {
  struct FirstSeen {
    const std::string* name;  // the dim's symbolic name
    const TensorSpec* spec;
    const std::vector<int64_t>* dims;
    size_t index;
  };
  std::vector<FirstSeen> seen;  // a few symbolic dims at most: a linear search beats a map
  for (const auto& spec : inputs) {
    const auto dims = given.find(spec.name);
    if (dims == given.end()) continue;
    for (size_t i = 0; i < spec.dim_names.size() && i < dims->second.size() && i < spec.shape.size(); ++i) {
      if (spec.dim_names[i].empty() || spec.shape[i] >= 0) continue;
      const auto first = std::find_if(seen.begin(), seen.end(), [&](const FirstSeen& f) { return *f.name == spec.dim_names[i]; });
      if (first == seen.end()) {
        seen.push_back({&spec.dim_names[i], &spec, &dims->second, i});
        continue;
      }
      const int64_t size = dims->second[i];
      const int64_t other = (*first->dims)[first->index];
      if (size == other) continue;
      if (first->spec == &spec) {
        return "input '" + spec.name + "' " + shape_text(dims->second) + " names dims " + std::to_string(first->index) + " and " +
               std::to_string(i) + " both '" + spec.dim_names[i] + "' but was given " + std::to_string(other) + " and " + std::to_string(size);
      }
      return "inputs '" + first->spec->name + "' " + shape_text(*first->dims) + " and '" + spec.name + "' " + shape_text(dims->second) +
             " share dim '" + spec.dim_names[i] + "' but were given " + std::to_string(other) + " and " + std::to_string(size);
    }
  }
  return std::nullopt;
}

InputShapes complete_shapes(const std::vector<TensorSpec>& inputs, InputShapes known, int64_t dynamic_dim) {
  // A symbolic dim ("sequence") means the same size wherever it appears: what the given shapes fix.
  std::map<std::string, int64_t> named;
  for (const auto& spec : inputs) {
    const auto given = known.find(spec.name);
    if (given == known.end()) continue;
    for (size_t i = 0; i < spec.dim_names.size() && i < given->second.size(); ++i) {
      if (!spec.dim_names[i].empty() && spec.shape[i] < 0) named.emplace(spec.dim_names[i], given->second[i]);
    }
  }
  for (const auto& spec : inputs) {
    if (known.count(spec.name)) continue;
    std::vector<int64_t> dims = spec.shape;
    for (size_t i = 0; i < dims.size(); ++i) {
      if (dims[i] >= 0) continue;
      const auto same = i < spec.dim_names.size() ? named.find(spec.dim_names[i]) : named.end();
      dims[i] = same != named.end() ? same->second : dynamic_dim;
    }
    known[spec.name] = dims;
  }
  return known;
}

std::vector<InputShapes> resolve_shapes(const std::vector<TensorSpec>& inputs, const ShapeOptions& options, int64_t dynamic_dim) {
  auto completed = [&](InputShapes s) {
    s = complete_shapes(inputs, std::move(s), dynamic_dim);
    check_shapes(inputs, s);
    if (const auto conflict = shared_dim_conflict(inputs, s)) {
      throw Error("declared shapes: " + *conflict + ": they must be equal", "Give them one size");
    }
    return s;
  };
  std::vector<InputShapes> out;
  for (const auto& d : options.declared) out.push_back(completed(d));
  if (!options.batches.empty()) {
    if (std::none_of(inputs.begin(), inputs.end(), first_dim_dynamic)) {
      throw Error("batch sizes were declared, but no input of this model has a dynamic first dim (inputs: " + input_names(inputs) + ")",
                  "Declare full shapes with " + named(Setting::shapes) + ", or export the model with a dynamic batch");
    }
    for (const int64_t b : options.batches) {
      InputShapes s;
      for (const auto& spec : inputs) {
        if (first_dim_dynamic(spec)) {
          std::vector<int64_t> dims = spec.shape;
          for (auto& d : dims) d = d < 0 ? dynamic_dim : d;
          dims.front() = b;
          s[spec.name] = dims;
        }
      }
      out.push_back(completed(s));
    }
  }
  std::vector<InputShapes> unique;
  for (auto& s : out) {
    if (std::find(unique.begin(), unique.end(), s) == unique.end()) unique.push_back(std::move(s));
  }
  if (options.max_sessions > 1 && static_cast<int>(unique.size()) > options.max_sessions) {
    throw Error(std::to_string(unique.size()) + " input shapes were declared, more than the " + std::to_string(options.max_sessions) +
                    " sessions a device may keep (shapes.max_sessions)",
                "Declare fewer shapes, raise shapes.max_sessions, or pad batches (shapes.pad_batch)");
  }
  return unique;
}

std::vector<TensorSpec> with_shapes(const std::vector<TensorSpec>& inputs, const InputShapes& shapes) {
  std::vector<TensorSpec> out = inputs;
  for (auto& spec : out) {
    if (auto it = shapes.find(spec.name); it != shapes.end()) spec.shape = it->second;
  }
  return out;
}

std::vector<int64_t> declared_batches(const std::vector<TensorSpec>& inputs, const std::vector<InputShapes>& shapes) {
  std::vector<int64_t> out;
  for (const auto& s : shapes) {
    for (const auto& spec : inputs) {
      if (first_dim_dynamic(spec) && s.count(spec.name)) {
        out.push_back(s.at(spec.name).front());
        break;
      }
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace ortfleet
