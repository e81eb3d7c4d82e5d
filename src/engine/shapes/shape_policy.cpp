#include "engine/shapes/shape_policy.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>

#include "base/private_dir.hpp"
#include "ortfleet/base/settings.hpp"

namespace ortfleet::detail {
using nlohmann::json;

namespace {
constexpr size_t kMostRemembered = 4096;  // distinct shapes remembered per session (the rest are counted as seen)
std::string costs_path(const std::string& entry) { return entry + ".shape-costs.json"; }
}  // namespace

std::optional<ShapeCosts> read_shape_costs(const std::string& entry, const std::string& conditions) {
  if (entry.empty()) return std::nullopt;
  try {
    std::ifstream in(costs_path(entry));
    if (!in) return std::nullopt;
    const json j = json::parse(in);
    if (j.value("conditions", std::string()) != conditions) return std::nullopt;
    ShapeCosts c;
    c.steady_ms = j.at("steady_ms").get<double>();
    c.switch_ms = j.at("switch_ms").get<double>();
    c.new_session_ms = j.at("new_session_ms").get<double>();
    if (c.steady_ms < 0 || c.switch_ms < 0 || c.new_session_ms <= 0) return std::nullopt;
    return c;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

void write_shape_costs(const std::string& entry, const std::string& conditions, const ShapeCosts& costs) {
  if (entry.empty()) return;
  const json j = {{"steady_ms", costs.steady_ms},
                  {"switch_ms", costs.switch_ms},
                  {"new_session_ms", costs.new_session_ms},
                  {"conditions", conditions}};
  try {
    write_private_file(costs_path(entry), j.dump(2) + "\n", /*durable=*/false);
  } catch (const std::exception&) {
    // A full disk or a read-only cache: measured again at the next start.
  }
}

bool ShapeTraffic::pays_for_session(const std::string& signature, bool switched, const std::optional<ShapeCosts>& costs) {
  if (!costs || !costs->switching_costs()) return false;
  std::lock_guard lock(mutex_);
  if (paid_.size() >= kMostRemembered && !paid_.count(signature)) return false;  // past the memory: shared
  const auto [it, first] = paid_.try_emplace(signature, 0.0);
  if (switched && !first) it->second += costs->switch_ms;
  return it->second >= costs->new_session_ms;
}

void ShapeTraffic::note(const std::string& signature, const InputShapes& shapes) {
  std::lock_guard lock(mutex_);
  if (seen_.size() < kMostRemembered) seen_.insert(signature);
  for (const auto& [input, dims] : shapes) {
    for (size_t d = 0; d < dims.size(); ++d) {
      auto [it, added] = ranges_.try_emplace({input, d}, DimRange{dims[d], dims[d], dims[d]});
      if (added) continue;
      it->second.lo = std::min(it->second.lo, dims[d]);
      it->second.hi = std::max(it->second.hi, dims[d]);
      it->second.common = std::gcd(it->second.common, dims[d]);
    }
  }
}

bool ShapeTraffic::seen(const std::string& signature) const {
  std::lock_guard lock(mutex_);
  return seen_.count(signature) > 0;
}

std::vector<DimBuckets> ShapeTraffic::buckets() const {
  std::lock_guard lock(mutex_);
  return buckets_locked();
}

std::vector<DimBuckets> ShapeTraffic::buckets_locked() const {
  std::vector<DimBuckets> out;
  for (const auto& [at, r] : ranges_) {
    if (r.lo != r.hi) out.push_back(suggested_buckets(at.first, at.second, r.lo, r.hi, r.common));
  }
  return out;
}

std::optional<std::string> ShapeTraffic::advice_once(size_t cap, const std::optional<std::string>& padding_changes_outputs) {
  std::lock_guard lock(mutex_);
  if (said_ || seen_.size() <= cap) return std::nullopt;
  said_ = true;
  std::string ranges;
  for (const auto& [at, r] : ranges_) {
    if (r.lo != r.hi) ranges += fmt::format("{}{} dim {}: {}..{}", ranges.empty() ? "" : ", ", at.first, at.second, r.lo, r.hi);
  }
  std::string flags;
  size_t combinations = 1;
  for (const auto& b : buckets_locked()) {
    flags += (flags.empty() ? "" : " ") + named(Setting::buckets, to_string(b));
    combinations *= b.sizes.size();
  }
  std::string out = fmt::format("{} distinct input shapes so far ({}): each new shape pays a new plan in the session that serves it, and "
                                "ortfleet makes no more sessions for them. ",
                                seen_.size(), ranges);
  if (padding_changes_outputs) {
    return out + fmt::format("Buckets would not serve them: padding changes this model's outputs ({}). Declare the shapes you feed ({}), up to {}",
                             *padding_changes_outputs, named(Setting::shapes), named(Setting::max_shape_sessions));
  }
  out += fmt::format("Padding to a few sizes makes every call a steady one, where padding keeps the model's outputs (a start with buckets checks "
                     "that, and refuses them where it does not): {}",
                     flags);
  if (combinations > static_cast<size_t>(ShapeOptions{}.max_sessions)) out += " " + named(Setting::max_shape_sessions, std::to_string(combinations));
  return out;
}

bool new_shapes_cost(const Device& device) { return device.is_cuda(); }

std::string shape_advice(const Device& device) {
  if (!new_shapes_cost(device)) {
    return "on the CPU a call of a new shape costs about what a steady call does (no cuDNN plans to build): one session serves every "
           "shape, and nothing needs declaring";
  }
  return "on a GPU a call whose shape differs from the one the session ran last rebuilds each convolution's cuDNN plan (ONNX Runtime "
         "1.29's CUDA EP; ResNet-50 on an H100: 106 ms a call instead of 1.5 ms): declare the shapes you serve (" +
         named(Setting::batches, "1,2,4,8") + " or " + named(Setting::shapes) + ") so that each gets a session of its own at start-up, "
         "or pad a dim that keeps changing to a few sizes (" + named(Setting::buckets) + ")";
}

DimBuckets suggested_buckets(const std::string& input, size_t dim, int64_t lo, int64_t hi, int64_t common) {
  const int64_t align = std::max<int64_t>(1, common);
  DimBuckets out{input, static_cast<int>(dim), {}};
  // Four sizes or fewer, each a multiple of what every size seen was a multiple of, the last one hi.
  const int64_t step = std::max<int64_t>(align, (hi - lo + 3 * align - 1) / (3 * align) * align);
  for (int64_t v = hi; v > lo - step && out.sizes.size() < 4; v -= step) out.sizes.push_back(std::max(v, lo));
  std::sort(out.sizes.begin(), out.sizes.end());
  out.sizes.erase(std::unique(out.sizes.begin(), out.sizes.end()), out.sizes.end());
  return out;
}

}  // namespace ortfleet::detail
