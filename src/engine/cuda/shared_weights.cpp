#include "engine/cuda/shared_weights.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <unordered_set>

#include "engine/cuda/cuda_driver.hpp"
#include "engine/files/mapped_file.hpp"
#include "engine/files/model_file.hpp"
#include "engine/files/ort_format_file.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/engine/cuda_devices.hpp"
#include "ortfleet/engine/tensor.hpp"

namespace ortfleet::detail {
namespace fs = std::filesystem;

namespace {
// Smaller float tensors may be what a CUDA kernel reads on the host (a Clip's bounds, a Resize's
// scales and region: scalars and per-dimension lists), which must stay where ONNX Runtime puts them.
constexpr uint64_t kMinElements = 64;
constexpr uint64_t kAlignment = 256;  // what cudaMalloc guarantees, and what cuDNN and cuBLAS prefer
constexpr const char* kCudaProvider = "CUDAExecutionProvider";

bool floating(ElementType t) {
  return t == ElementType::float32 || t == ElementType::float16 || t == ElementType::bfloat16 || t == ElementType::float64;
}
uint64_t aligned(uint64_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; }
}  // namespace

SharedWeights::SharedWeights(const std::string& optimised_model, const Device& device) : device_(device) {
  const auto start = std::chrono::steady_clock::now();
  // Each file the weights lie in, mapped once: the pages read to find the weights are the ones copied.
  // Not populated up front: the threads that fill the staging buffers fault the pages in, in parallel.
  std::map<std::string, std::unique_ptr<MappedFile>> files;
  auto mapped = [&files](const std::string& path) -> const MappedFile& {
    auto& file = files[path];
    // Read in up front: a fault per page in the threads that fill the staging buffers halved their
    // speed (1.28 GB filled at 5 GB/s from pages faulted in one by one, 1 x H100).
    if (!file) file = std::make_unique<MappedFile>(path, /*populate=*/true);
    return *file;
  };
  // An ORT-format entry keeps its weights inside its FlatBuffer, an ONNX entry in its data file. An ORT
  // entry also records the provider of every node: what a node on another provider reads stays with it.
  const MappedFile& entry = mapped(fs::absolute(optimised_model).string());
  std::vector<InitializerBytes> all;
  std::unordered_set<std::string> host_read;
  if (has_ort_format_identifier(entry)) {
    all = ort_format_initializers(entry);
    host_read = inputs_of_nodes_not_on(entry, kCudaProvider);
  } else {
    all = initializer_bytes(optimised_model);
  }
  std::vector<InitializerBytes> weights;
  for (auto& w : all) {
    // Integer initializers are shapes and indices that CPU kernels read: they stay with each session.
    if (!floating(w.type) || host_read.contains(w.name)) continue;
    const uint64_t bytes = checked_bytes(w.dims, w.type, "initializer '" + w.name + "'");
    if (w.bytes == bytes && bytes >= kMinElements * element_size(w.type)) weights.push_back(std::move(w));
  }
  std::vector<uint64_t> slots;            // where each weight starts in memory_
  std::vector<const std::byte*> sources;  // where its bytes lie in its mapped file
  uint64_t total = 0;
  for (const auto& w : weights) {
    const MappedFile& file = mapped(w.file);
    if (w.offset + w.bytes > file.size()) {
      throw Error("initializer '" + w.name + "' lies outside " + w.file, "Clear the model cache: ortfleet cache clear", device.to_string());
    }
    slots.push_back(total);
    sources.push_back(static_cast<const std::byte*>(file.data()) + w.offset);
    total += aligned(w.bytes);
  }
  read_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (total == 0) return;
  auto& driver = CudaDriver::instance();
  memory_ = driver.allocate(cuda_ordinal(device), total);
  bytes_ = total;
  const Ort::MemoryInfo gpu("Cuda", OrtArenaAllocator, cuda_ordinal(device), OrtMemTypeDefault);
  for (size_t i = 0; i < weights.size(); ++i) {
    const auto& w = weights[i];
    auto* slot = static_cast<std::byte*>(memory_) + slots[i];
    values_.push_back(Ort::Value::CreateTensor(gpu, slot, w.bytes, w.dims.data(), w.dims.size(),
                                               static_cast<ONNXTensorElementDataType>(w.type)));
    names_.push_back(w.name);
  }
  // One pass over the weights in device order: thousands of small weights become a few large copies.
  // Pieces of a chunk are filled by several threads at once: each finds its first weight itself.
  prepare_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() - read_ms_;
  staged_ = driver.upload_staged(cuda_ordinal(device), memory_, total, [&](std::byte* staging, uint64_t begin, uint64_t length) {
    const uint64_t end = begin + length;
    size_t i = static_cast<size_t>(std::upper_bound(slots.begin(), slots.end(), begin) - slots.begin());
    if (i > 0) --i;  // the weight that starts at or before `begin`
    for (; i < weights.size() && slots[i] < end; ++i) {
      const uint64_t from = std::max(begin, slots[i]);
      const uint64_t to = std::min(end, slots[i] + weights[i].bytes);
      if (from >= to) continue;  // the alignment gap after a weight
      std::memcpy(staging + (from - begin), sources[i] + (from - slots[i]), to - from);
    }
  });
  upload_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() - read_ms_;
}

bool SharedWeights::fit_twice(const Device& device, uint64_t bytes) {
  constexpr uint64_t kRoom = uint64_t{512} << 20;  // the session's own buffers, the context's needs
  try {
    const auto [free_bytes, total] = CudaDriver::instance().memory_info(cuda_ordinal(device));
    return free_bytes > 2 * bytes + kRoom;
  } catch (const std::exception&) {
    return false;
  }
}

SharedWeights::~SharedWeights() {
  values_.clear();
  if (memory_ != nullptr) CudaDriver::instance().release(cuda_ordinal(device_), memory_);
}

void SharedWeights::add_to(Ort::SessionOptions& options) const {
  for (size_t i = 0; i < names_.size(); ++i) options.AddInitializer(names_[i].c_str(), values_[i]);
}

}  // namespace ortfleet::detail
