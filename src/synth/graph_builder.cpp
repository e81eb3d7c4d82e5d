// Writing a GraphBuilder's model: the graph as protobuf, its weights streamed from SplitMix64 into the
// file or beside it as aligned external data (graph_builder.hpp).
#include "synth/graph_builder.hpp"

#include <bit>
#include <cerrno>
#include <filesystem>
#include <functional>
#include <optional>
#include <ostream>

#include "ortfleet/base/error.hpp"
#include "ortfleet/base/output_file.hpp"

namespace ortfleet::synth {
namespace fs = std::filesystem;
using detail::throw_write_error;
using onnx::DataType;

namespace {

constexpr uint64_t kInlineLimit = (uint64_t{2} << 30) - (uint64_t{64} << 20);  // protobuf's 2 GB, with room for the graph
constexpr uint64_t kExternalAlignment = 4096;  // lets ONNX Runtime mmap external weights

/// Uniform floats in [lo, hi), generated and written in chunks so no weight is ever held whole.
void write_uniform_floats(std::ostream& out, uint64_t count, float lo, float hi, uint64_t seed,
                          const std::function<void(uint64_t)>& advance) {
  SplitMix64 rng{seed};
  std::vector<float> chunk(1 << 18);
  const float span = hi - lo;
  uint64_t left = count;
  while (left > 0) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(left, chunk.size()));
    for (size_t i = 0; i < n; i += 2) {
      const uint64_t r = rng.next();
      // 23 random mantissa bits each: a float in [1, 2), mapped onto [lo, hi).
      const float a = std::bit_cast<float>(0x3f800000u | static_cast<uint32_t>(r & 0x7fffff)) - 1.0f;
      const float b = std::bit_cast<float>(0x3f800000u | static_cast<uint32_t>((r >> 32) & 0x7fffff)) - 1.0f;
      chunk[i] = lo + span * a;
      if (i + 1 < n) chunk[i + 1] = lo + span * b;
    }
    out.write(reinterpret_cast<const char*>(chunk.data()), static_cast<std::streamsize>(n * sizeof(float)));
    left -= n;
    advance(n * sizeof(float));
  }
}

/// Creates the folders above `path`, with the reason they cannot be made as an ortfleet::Error.
void create_parent_folders(const std::string& path) {
  const fs::path model_path(path);
  if (!model_path.has_parent_path()) return;
  std::error_code ec;
  fs::create_directories(model_path.parent_path(), ec);
  if (ec) throw_write_error(path, ec.value());
}

}  // namespace

ModelSummary GraphBuilder::write(const std::string& path, const std::string& kind, const WriteOptions& options,
                                 std::vector<std::pair<std::string, std::string>> metadata) {
  ModelSummary summary;
  summary.path = path;
  summary.kind = kind;
  summary.parameters = parameters_;
  summary.weight_bytes = parameters_ * sizeof(float);
  summary.nodes = static_cast<int>(nodes_.size());
  summary.conv_nodes = convs_;
  summary.distinct_convs = std::max(distinct_convs_, 0);

  const bool external = options.external_data == ExternalData::always ||
                        (options.external_data == ExternalData::automatic && summary.weight_bytes > kInlineLimit);
  if (!external && summary.weight_bytes > kInlineLimit) {
    throw Error("a model of " + std::to_string(summary.weight_bytes >> 20) + " MiB of weights cannot be one .onnx file",
                "Allow external data (drop --external-data never)");
  }
  const fs::path model_path(path);
  create_parent_folders(path);

  uint64_t done = 0;
  auto advance = [&](uint64_t n) {
    done += n;
    if (options.progress) options.progress(done, summary.weight_bytes);
  };

  onnx::GraphParts parts;
  parts.name = name_;
  parts.nodes = std::move(nodes_);
  parts.inputs = std::move(inputs_);
  parts.outputs = std::move(outputs_);
  parts.initializers = std::move(small_);

  // Each file written beside its name and put in place whole (OutputFile), the weights before the
  // graph that names them.
  OutputFile graph_file(path);
  std::optional<OutputFile> data_file;
  if (external) {
    const std::string data_name = model_path.filename().string() + ".data";
    summary.external_data_path = (model_path.parent_path() / data_name).string();
    data_file.emplace(summary.external_data_path);
    std::ostream& data = data_file->stream();
    uint64_t offset = 0;
    for (size_t i = 0; i < weights_.size(); ++i) {
      const auto& w = weights_[i];
      const uint64_t padding = (kExternalAlignment - offset % kExternalAlignment) % kExternalAlignment;
      const std::string zeros(padding, '\0');
      data.write(zeros.data(), static_cast<std::streamsize>(padding));
      offset += padding;
      const uint64_t length = w.count * sizeof(float);
      write_uniform_floats(data, w.count, w.lo, w.hi, stream_seed(i), advance);
      parts.initializers.push_back(onnx::external_tensor(w.name, DataType::float32, w.dims, {data_name, offset, length}));
      offset += length;
    }
  } else {
    for (size_t i = 0; i < weights_.size(); ++i) {
      const auto& w = weights_[i];
      const uint64_t seed = stream_seed(i);
      parts.initializers.push_back(onnx::tensor(
          w.name, DataType::float32, w.dims, w.count * sizeof(float),
          [w, seed, &advance](std::ostream& out) { write_uniform_floats(out, w.count, w.lo, w.hi, seed, advance); }));
    }
  }

  metadata.emplace_back("ortfleet.synth.kind", kind);
  metadata.emplace_back("ortfleet.synth.seed", std::to_string(options.seed));
  onnx::ProtoMessage proto = onnx::model(std::move(parts), kOpset, metadata);
  proto.write(graph_file.stream());
  if (data_file) data_file->commit();
  graph_file.commit();
  summary.file_bytes = graph_file.bytes_written() + (data_file ? data_file->bytes_written() : 0);
  weights_.clear();
  return summary;
}

}  // namespace ortfleet::synth
