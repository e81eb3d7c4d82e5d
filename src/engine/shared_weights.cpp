#include "engine/shared_weights.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>

#include "engine/cuda_driver.hpp"
#include "engine/mapped_file.hpp"
#include "engine/model_file.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/engine/shapes.hpp"

namespace ortfleet::detail {

namespace {
constexpr uint64_t kMinBytes = 1024;  // smaller ones are shape constants and scalars: not worth a slot
constexpr uint64_t kAlignment = 256;  // what cudaMalloc guarantees, and what cuDNN and cuBLAS prefer

bool floating(ElementType t) {
  return t == ElementType::float32 || t == ElementType::float16 || t == ElementType::bfloat16 || t == ElementType::float64;
}
uint64_t aligned(uint64_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; }
}  // namespace

SharedWeights::SharedWeights(const std::string& optimised_model, const Device& device) : device_(device) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<InitializerBytes> weights;
  for (auto& w : initializer_bytes(optimised_model)) {
    // Integer initializers are shapes and indices that CPU kernels read: they stay with each session.
    if (floating(w.type) && w.bytes >= kMinBytes && w.bytes == checked_bytes(w.dims, w.type, "initializer '" + w.name + "'")) {
      weights.push_back(std::move(w));
    }
  }
  uint64_t total = 0;
  for (const auto& w : weights) total += aligned(w.bytes);
  if (total == 0) return;
  auto& driver = CudaDriver::instance();
  memory_ = driver.allocate(cuda_ordinal(device), total);
  bytes_ = total;
  std::map<std::string, std::unique_ptr<MappedFile>> files;  // the .onnx and its data file, mapped once
  const Ort::MemoryInfo gpu("Cuda", OrtArenaAllocator, cuda_ordinal(device), OrtMemTypeDefault);
  std::vector<uint64_t> slots;
  uint64_t offset = 0;
  for (const auto& w : weights) {
    auto& file = files[w.file];
    if (!file) file = std::make_unique<MappedFile>(w.file, /*populate=*/true);
    if (w.offset + w.bytes > file->size()) {
      throw Error("initializer '" + w.name + "' lies outside " + w.file, "Clear the model cache: ortfleet cache clear", device.to_string());
    }
    slots.push_back(offset);
    auto* slot = static_cast<std::byte*>(memory_) + offset;
    values_.push_back(Ort::Value::CreateTensor(gpu, slot, w.bytes, w.dims.data(), w.dims.size(),
                                               static_cast<ONNXTensorElementDataType>(w.type)));
    names_.push_back(w.name);
    offset += aligned(w.bytes);
  }
  // One pass over the weights in device order: thousands of small weights become a few large copies.
  size_t first = 0;
  driver.upload_staged(cuda_ordinal(device), memory_, total, [&](std::byte* staging, uint64_t begin, uint64_t length) {
    const uint64_t end = begin + length;
    while (first < weights.size() && slots[first] + weights[first].bytes <= begin) ++first;
    for (size_t i = first; i < weights.size() && slots[i] < end; ++i) {
      const uint64_t from = std::max(begin, slots[i]);
      const uint64_t to = std::min(end, slots[i] + weights[i].bytes);
      const auto* source = static_cast<const std::byte*>(files[weights[i].file]->data()) + weights[i].offset + (from - slots[i]);
      std::memcpy(staging + (from - begin), source, to - from);
    }
  });
  upload_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

SharedWeights::~SharedWeights() {
  values_.clear();
  if (memory_ != nullptr) CudaDriver::instance().release(cuda_ordinal(device_), memory_);
}

void SharedWeights::add_to(Ort::SessionOptions& options) const {
  for (size_t i = 0; i < names_.size(); ++i) options.AddInitializer(names_[i].c_str(), values_[i]);
}

}  // namespace ortfleet::detail
