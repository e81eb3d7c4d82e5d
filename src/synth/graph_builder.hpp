#pragma once
// GraphBuilder: a synthetic model's graph put together node by node, with random float32 weights that
// are generated while they are written (inline, or as external data past protobuf's 2 GB) and never
// held whole. synth.cpp builds each model family with it.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "ortfleet/synth/synth.hpp"
#include "synth/onnx_writer.hpp"

namespace ortfleet::synth {

/// splitmix64: tiny, fast, and well distributed; one stream per weight so weights are distinct.
struct SplitMix64 {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
};

class GraphBuilder {
 public:
  GraphBuilder(std::string name, uint64_t seed) : name_(std::move(name)), seed_(seed) {}

  /// A float32 weight with uniform random values in [lo, hi).
  std::string weight(const std::string& name, std::vector<int64_t> dims, float lo, float hi) {
    const uint64_t count = std::accumulate(dims.begin(), dims.end(), uint64_t{1},
                                           [](uint64_t a, int64_t d) { return a * static_cast<uint64_t>(d); });
    weights_.push_back({name, std::move(dims), lo, hi, count});
    parameters_ += count;
    return name;
  }
  /// He-style initialisation: keeps activations bounded through deep stacks.
  std::string fan_in_weight(const std::string& name, std::vector<int64_t> dims, int64_t fan_in) {
    const float bound = std::sqrt(3.0f / static_cast<float>(std::max<int64_t>(fan_in, 1)));
    return weight(name, std::move(dims), -bound, bound);
  }
  std::string int64s(const std::string& name, const std::vector<int64_t>& values) {
    if (constants_.insert(name).second) {
      small_.push_back(onnx::int64_tensor(name, {static_cast<int64_t>(values.size())}, values));
    }
    return name;
  }
  std::string floats(const std::string& name, const std::vector<float>& values) {
    if (constants_.insert(name).second) {
      small_.push_back(onnx::float_tensor(name, {static_cast<int64_t>(values.size())}, values));
    }
    return name;
  }
  std::string scalar(const std::string& name, float value) {
    if (constants_.insert(name).second) small_.push_back(onnx::float_scalar_tensor(name, value));
    return name;
  }

  std::string op(const std::string& type, const std::vector<std::string>& inputs, const std::vector<onnx::Attribute>& attrs = {}) {
    const std::string name = type + "_" + std::to_string(nodes_.size());
    nodes_.push_back(onnx::node(type, name, inputs, {name}, attrs));
    if (type == "Conv") ++convs_;
    return name;
  }

  void input(const std::string& name, onnx::DataType type, const std::vector<onnx::Dim>& shape) {
    inputs_.push_back(onnx::value_info(name, type, shape));
  }
  void output(const std::string& name, onnx::DataType type, const std::vector<onnx::Dim>& shape) {
    outputs_.push_back(onnx::value_info(name, type, shape));
  }
  void set_distinct_convs(int n) { distinct_convs_ = n; }

  /// Writes the model to `path` (its weights inline, or beside it as PATH.data: options.external_data)
  /// and returns what it holds; the builder's weights are spent.
  ModelSummary write(const std::string& path, const std::string& kind, const WriteOptions& options,
                     std::vector<std::pair<std::string, std::string>> metadata = {});

  static constexpr int64_t kOpset = 17;

 private:
  struct Weight {
    std::string name;
    std::vector<int64_t> dims;
    float lo;
    float hi;
    uint64_t count;
  };
  uint64_t stream_seed(size_t index) const { return seed_ * 0x100000001b3ULL + index * 0x9e3779b97f4a7c15ULL + 1; }

  std::string name_;
  uint64_t seed_;
  std::vector<Weight> weights_;
  std::vector<onnx::ProtoMessage> small_;
  std::set<std::string> constants_;
  std::vector<onnx::ProtoMessage> nodes_;
  std::vector<onnx::ProtoMessage> inputs_;
  std::vector<onnx::ProtoMessage> outputs_;
  uint64_t parameters_ = 0;
  int convs_ = 0;
  int distinct_convs_ = -1;
};

}  // namespace ortfleet::synth
