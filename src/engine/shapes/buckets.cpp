#include "engine/shapes/buckets.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <numeric>

#include "engine/shapes/shapes.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/base/settings.hpp"

namespace ortfleet {

bool refuses_buckets(const std::string& device_error) {
  return device_error.rfind("buckets for ", 0) == 0 && device_error.find(" refused: ") != std::string::npos;
}

namespace detail {

std::string buckets_refused(const std::string& dims) { return "buckets for " + dims + " refused: "; }

namespace {
std::string bucket_hint() { return "Declare buckets as input.dim=sizes for a dynamic dim: " + named(Setting::buckets, "x.2=480,640,960"); }
}

namespace {
std::mutex refusals_mutex;
std::map<std::string, std::string>& padding_refusals() {
  static auto* refusals = new std::map<std::string, std::string>;  // never destroyed: read by threads until exit
  return *refusals;
}
}  // namespace

void remember_padding_refusal(const std::string& model, const std::string& why) {
  std::lock_guard lock(refusals_mutex);
  padding_refusals()[model] = why;
}

std::optional<std::string> padding_refusal(const std::string& model) {
  std::lock_guard lock(refusals_mutex);
  const auto it = padding_refusals().find(model);
  if (it == padding_refusals().end()) return std::nullopt;
  return it->second;
}

int64_t second_size(int64_t size) {
  if (size <= 1) return 2;
  int64_t factor = 1;
  while (size % (factor * 2) == 0 && factor * 2 <= size / 2) factor *= 2;
  return size - factor;
}

BucketPlan::BucketPlan(const std::vector<TensorSpec>& inputs, const ShapeOptions& options, const std::vector<int64_t>& batches) {
  for (const auto& declared : options.buckets) {
    const auto input = std::find_if(inputs.begin(), inputs.end(), [&](const TensorSpec& s) { return s.name == declared.input; });
    const std::string name = declared.input + "." + std::to_string(declared.dim);
    if (input == inputs.end()) {
      std::string names;
      for (const auto& s : inputs) names += (names.empty() ? "" : ", ") + s.name + " " + shape_text(s);
      throw Error("buckets for " + name + ": the model has no input '" + declared.input + "' (inputs: " + names + ")", bucket_hint());
    }
    const auto dim = static_cast<size_t>(declared.dim);
    if (dim >= input->shape.size()) {
      throw Error("buckets for " + name + ": input '" + input->name + "' " + shape_text(*input) + " has no dim " + std::to_string(dim),
                  "Dims count from 0");
    }
    if (input->shape[dim] >= 0) {
      throw Error("buckets for " + name + ": dim " + std::to_string(dim) + " of input '" + input->name + "' " + shape_text(*input) +
                      " is fixed by the model",
                  "Only dynamic dims can be padded");
    }
    BucketDim b{name, {{input->name, dim}}, declared.sizes};
    // The dims that share its symbolic name are the same size: padded with it.
    const std::string symbol = dim < input->dim_names.size() ? input->dim_names[dim] : "";
    if (!symbol.empty()) {
      for (const auto& other : inputs) {
        for (size_t d = 0; d < other.dim_names.size() && d < other.shape.size(); ++d) {
          if (other.shape[d] < 0 && other.dim_names[d] == symbol && !(other.name == input->name && d == dim)) b.members.emplace_back(other.name, d);
        }
      }
    }
    bool covered = false;  // declared already through another input's dim of the same name
    for (const auto& existing : dims_) {
      const bool shared = std::any_of(b.members.begin(), b.members.end(), [&](const auto& member) {
        return std::find(existing.members.begin(), existing.members.end(), member) != existing.members.end();
      });
      if (shared && existing.sizes != b.sizes) {
        throw Error("buckets for " + name + " and " + existing.name + " pad the same dim ('" + symbol + "') to different sizes",
                    "Declare one of them");
      }
      covered = covered || shared;
    }
    if (!covered) dims_.push_back(std::move(b));
  }
  for (const auto& [input, value] : options.pad_values) {
    if (std::none_of(inputs.begin(), inputs.end(), [&](const TensorSpec& s) { return s.name == input; })) {
      throw Error("a pad value was given for '" + input + "', which is not an input of this model", bucket_hint());
    }
  }
  if (options.pad_batch && !batches.empty()) {
    BucketDim b{"batch", {}, batches, /*batch=*/true};
    for (const auto& s : inputs) {
      if (!s.shape.empty() && s.shape.front() < 0) b.members.emplace_back(s.name, 0);
    }
    bool covered = false;
    for (const auto& existing : dims_) {
      covered = covered || std::find(existing.members.begin(), existing.members.end(), b.members.front()) != existing.members.end();
    }
    if (!b.members.empty() && !covered) dims_.push_back(std::move(b));
  }
  following_.clear();
}

int64_t BucketPlan::size_in(size_t b, const InputShapes& shapes) const {
  const auto& [input, dim] = dims_[b].members.front();
  return shapes.at(input).at(dim);
}

std::vector<InputShapes> BucketPlan::shapes(const std::vector<TensorSpec>& inputs, int64_t dynamic_dim, size_t most) const {
  // Padded batches alone: their shapes are the declared batches' own.
  if (std::all_of(dims_.begin(), dims_.end(), [](const BucketDim& b) { return b.batch; })) return {};
  size_t count = 1;
  std::string factors;
  for (const auto& b : dims_) {
    count = count > most ? count : count * b.sizes.size();
    factors += fmt::format("{}{}: {} sizes", factors.empty() ? "" : " x ", b.name, b.sizes.size());
  }
  if (count > most) {
    throw Error(fmt::format("the buckets make more than {} shapes ({}), more than the sessions a device may keep", most, factors),
                fmt::format("Declare fewer sizes, or raise {} (at most {})", named(Setting::max_shape_sessions), kMaxShapeSessions));
  }
  const InputShapes base = complete_shapes(inputs, {}, dynamic_dim);
  std::vector<InputShapes> out;
  std::vector<size_t> index(dims_.size(), 0);
  while (true) {
    InputShapes s = base;
    for (size_t b = 0; b < dims_.size(); ++b) {
      for (const auto& [input, dim] : dims_[b].members) s[input][dim] = dims_[b].sizes[index[b]];
    }
    out.push_back(complete_shapes(inputs, s, dynamic_dim));
    size_t b = dims_.size();
    while (b > 0 && ++index[b - 1] == dims_[b - 1].sizes.size()) index[--b] = 0;
    if (b == 0) break;
  }
  return out;
}

std::optional<InputShapes> BucketPlan::fit(const InputShapes& given) const {
  if (dims_.empty()) return std::nullopt;
  InputShapes target = given;
  for (const auto& b : dims_) {
    std::optional<int64_t> size;
    for (const auto& [input, dim] : b.members) {
      const auto it = given.find(input);
      if (it == given.end() || dim >= it->second.size()) return std::nullopt;
      if (size && *size != it->second[dim]) return std::nullopt;  // dims padded together disagree: the model will say
      size = it->second[dim];
    }
    const auto next = std::lower_bound(b.sizes.begin(), b.sizes.end(), *size);
    if (next == b.sizes.end()) return std::nullopt;
    for (const auto& [input, dim] : b.members) target[input][dim] = *next;
  }
  return target;
}

std::optional<BucketPlan::Overflow> BucketPlan::overflow(const InputShapes& given) const {
  std::optional<Overflow> out;
  for (const auto& b : dims_) {
    const auto& [input, dim] = b.members.front();
    const auto it = given.find(input);
    if (it == given.end() || dim >= it->second.size() || b.sizes.empty() || it->second[dim] <= b.sizes.back()) continue;
    const int64_t size = it->second[dim];
    int64_t factor = 0;  // what every size is a multiple of: the model may need it (strided convolutions)
    for (const int64_t s : b.sizes) factor = std::gcd(factor, s);
    const int64_t next = (size + factor - 1) / factor * factor;
    if (!out) out.emplace();
    const std::string flag = b.batch ? named(Setting::batches, fmt::format("...,{}", next)) : named(Setting::buckets, fmt::format("{}=...,{}", b.name, next));
    out->what += fmt::format("{}{} is {}, past its largest bucket {}", out->what.empty() ? "" : "; ", b.batch ? "the batch" : b.name, size,
                             b.sizes.back());
    out->fix += fmt::format("{}add {} (a multiple of {}, as every size of it is): {}", out->fix.empty() ? "" : "; ", next, factor, flag);
  }
  if (out) out->fix[0] = 'A';
  return out;
}

void BucketPlan::learn(const std::vector<InputShapes>& bucket_shapes, const std::vector<TensorSpec>& outputs,
                       const std::function<std::vector<std::vector<int64_t>>(const InputShapes&)>& outputs_of) {
  following_.assign(outputs.size(), {});
  // A padded batch: every output whose first dim is dynamic is the batch's rows (what pad_batch has
  // always cropped), nothing to learn; an output without one is left as it is.
  for (size_t b = 0; b < dims_.size(); ++b) {
    if (!dims_[b].batch) continue;
    for (size_t o = 0; o < outputs.size(); ++o) {
      if (!outputs[o].shape.empty() && outputs[o].shape.front() < 0) following_[o].push_back({0, b, 1, 0});
    }
  }
  if (bucket_shapes.empty() || std::all_of(dims_.begin(), dims_.end(), [](const BucketDim& b) { return b.batch; })) return;
  const InputShapes& base = bucket_shapes.front();  // every padded dim at its smallest size
  const auto at_base = outputs_of(base);
  for (size_t b = 0; b < dims_.size(); ++b) {
    if (dims_[b].batch) continue;
    const int64_t from = size_in(b, base);
    const int64_t to = dims_[b].sizes.size() > 1 ? dims_[b].sizes[1] : second_size(from);
    InputShapes other = base;
    for (const auto& [input, dim] : dims_[b].members) other[input][dim] = to;
    const auto at_other = outputs_of(other);
    for (size_t o = 0; o < outputs.size() && o < at_base.size() && o < at_other.size(); ++o) {
      bool follows = false;
      for (size_t d = 0; d < at_base[o].size() && d < at_other[o].size(); ++d) {
        if (at_base[o][d] == at_other[o][d]) continue;
        const double slope = static_cast<double>(at_other[o][d] - at_base[o][d]) / static_cast<double>(to - from);
        const double offset = static_cast<double>(at_base[o][d]) - slope * static_cast<double>(from);
        const auto twice = std::find_if(following_[o].begin(), following_[o].end(), [&](const FollowingDim& f) { return f.output_dim == d; });
        if (twice != following_[o].end()) {
          throw Error(buckets_refused(dims_[twice->bucket].name + " and " + dims_[b].name) +
                          fmt::format("output '{}' cannot be cropped back: its dim {} follows both {} and {}", outputs[o].name, d,
                                      dims_[twice->bucket].name, dims_[b].name),
                      "Pad only one of those dims");
        }
        following_[o].push_back({d, b, slope, offset});
        follows = true;
      }
      if (!follows) {
        throw Error(buckets_refused(dims_[b].name) +
                        fmt::format("output '{}' {} has no dim that follows it (it stays {} when {} goes from {} to {}), "
                                    "so padding would change its values (pooled or reduced over that dim)",
                                    outputs[o].name, shape_text(at_base[o]), shape_text(at_base[o]), dims_[b].name, from, to),
                    "Remove the buckets for " + dims_[b].name + ", or declare the shapes you feed (" + named(Setting::shapes) + ") instead");
      }
    }
  }
}

namespace {
bool real_valued(ElementType type) {
  return type == ElementType::float32 || type == ElementType::float64 || type == ElementType::float16 || type == ElementType::bfloat16;
}
}  // namespace

double pad_value_of(const std::string& input, const std::map<std::string, double>& pad_values) {
  const auto it = pad_values.find(input);
  return it == pad_values.end() ? 0.0 : it->second;
}

std::string OneSidedInputs::text(const std::map<std::string, double>& pad_values) const {
  std::string which;
  for (const auto& [input, range] : ranges) {
    which += fmt::format("{}'{}' in [{}, {}], padded with {}", which.empty() ? "" : "; ", input, range.lo, range.hi, pad_value_of(input, pad_values));
  }
  return fmt::format("every real-valued input {} what it is padded with ({})", above ? "above" : "below", which);
}

std::vector<OneSidedInputs> one_sided_inputs(const std::vector<TensorSpec>& inputs, const std::map<std::string, ValueRange>& ranges,
                                             const std::map<std::string, double>& pad_values) {
  OneSidedInputs above{true, {}};
  OneSidedInputs below{false, {}};
  for (const auto& input : inputs) {
    if (!real_valued(input.type)) continue;
    const auto given = ranges.find(input.name);
    const ValueRange range = given == ranges.end() ? ValueRange{-1.0, 1.0} : given->second;  // fill_random's own
    const double pad = pad_value_of(input.name, pad_values);
    // The half of the range beyond the pad value, away from it: a min or max over real and padded
    // positions then differs from one over the real ones by half the range at least.
    if (range.lo <= pad && pad < range.hi) above.ranges[input.name] = {(pad + range.hi) / 2, range.hi};
    if (range.lo < pad && pad <= range.hi) below.ranges[input.name] = {range.lo, (range.lo + pad) / 2};
  }
  std::vector<OneSidedInputs> out;
  for (auto* side : {&above, &below}) {
    if (!side->ranges.empty()) out.push_back(std::move(*side));
  }
  return out;
}

std::vector<PaddingProbe> BucketPlan::padding_probes(const InputShapes& base) const {
  std::vector<PaddingProbe> out;
  for (size_t b = 0; b < dims_.size(); ++b) {
    const auto& sizes = dims_[b].sizes;
    if (sizes.empty()) continue;
    const int64_t to = sizes.size() > 1 ? sizes[1] : sizes[0];
    const int64_t from = sizes.size() > 1 ? sizes[0] : second_size(sizes[0]);
    if (from >= to) continue;
    PaddingProbe probe{b, base, base};
    for (const auto& [input, dim] : dims_[b].members) {
      if (!base.count(input) || dim >= base.at(input).size()) continue;
      probe.real[input][dim] = from;
      probe.bucket[input][dim] = to;
    }
    out.push_back(std::move(probe));
  }
  return out;
}

std::vector<std::vector<int64_t>> BucketPlan::cropped_shapes(const InputShapes& given, const InputShapes& padded,
                                                             const std::vector<std::vector<int64_t>>& padded_outputs) const {
  return followed(given, padded, padded_outputs, /*grow=*/false);
}

std::vector<std::vector<int64_t>> BucketPlan::output_shapes_at(const InputShapes& at, const InputShapes& ran,
                                                               const std::vector<std::vector<int64_t>>& ran_outputs) const {
  return followed(at, ran, ran_outputs, /*grow=*/true);
}

std::vector<std::vector<int64_t>> BucketPlan::followed(const InputShapes& given, const InputShapes& ran, const std::vector<std::vector<int64_t>>& ran_outputs,
                                                       bool grow) const {
  std::vector<std::vector<int64_t>> out = ran_outputs;
  for (size_t o = 0; o < out.size() && o < following_.size(); ++o) {
    for (const auto& f : following_[o]) {
      if (f.output_dim >= out[o].size()) continue;
      const int64_t real = size_in(f.bucket, given);
      if (real == size_in(f.bucket, ran)) continue;
      // A strided net's output covers the input rounded up (a 500-row image gives ceil(500/4) rows).
      const double exact = f.slope * static_cast<double>(real) + f.offset;
      const auto size = std::max<int64_t>(0, static_cast<int64_t>(std::ceil(exact - 1e-6)));
      out[o][f.output_dim] = grow ? size : std::min(size, out[o][f.output_dim]);
    }
  }
  return out;
}

std::vector<InputShapes> declare_shapes(const std::vector<TensorSpec>& inputs, const ShapeOptions& options, int64_t dynamic_dim,
                                        BucketPlan& buckets) {
  std::vector<InputShapes> declared = resolve_shapes(inputs, options, dynamic_dim);
  buckets = BucketPlan(inputs, options, options.pad_batch ? declared_batches(inputs, declared) : std::vector<int64_t>{});
  for (auto& shape : buckets.shapes(inputs, dynamic_dim, kMaxShapeSessions)) {
    if (std::find(declared.begin(), declared.end(), shape) == declared.end()) declared.push_back(std::move(shape));
  }
  if (declared.size() > static_cast<size_t>(kMaxShapeSessions)) {
    throw Error(fmt::format("{} shapes were declared with the buckets, more than the {} sessions a device may keep", declared.size(), kMaxShapeSessions),
                "Declare fewer shapes or bucket sizes");
  }
  return declared;
}

}  // namespace detail
}  // namespace ortfleet
