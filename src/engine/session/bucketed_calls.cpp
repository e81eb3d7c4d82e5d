#include "engine/session/bucketed_calls.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "engine/providers/provider_registry.hpp"
#include "ortfleet/engine/tensor.hpp"
#include "engine/session/tensor_padding.hpp"
#include "ortfleet/engine/device_tensor.hpp"

namespace ortfleet::detail {

namespace {
double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}
}  // namespace

BucketedCalls::BucketedCalls(Device device, std::map<std::string, double> pad_values)
    : device_(std::move(device)), memory_(provider_for(device_).memory()), pad_values_(std::move(pad_values)) {}

std::vector<Tensor> BucketedCalls::call(const BucketPlan& plan, const std::vector<Tensor>& given, const InputShapes& shapes, const InputShapes& bucket,
                                        bool outputs_on_device, const RunPadded& run) {
  BucketCallTime call;
  call.bucket = to_string(bucket);
  // On a GPU the padding is made there: only the real rows cross the bus, and only the cropped
  // outputs come back.
  const auto start = std::chrono::steady_clock::now();
  std::vector<Tensor> padded;
  for (const auto& t : given) padded.push_back(padded_input(t, bucket.at(t.name), call.upload_ms));
  call.pad_ms = ms_since(start);
  const auto running = std::chrono::steady_clock::now();
  std::vector<Tensor> out = run(padded, memory_ != nullptr);
  call.run_ms = ms_since(running);
  padded.clear();  // the buffers are free for the next call
  double settle_ms = 0;  // (debug) GPU work still in flight when the run returned
  if (memory_ != nullptr && spdlog::should_log(spdlog::level::debug)) {
    const auto settling = std::chrono::steady_clock::now();
    memory_->synchronize(device_);
    settle_ms = ms_since(settling);
  }
  const auto cropping = std::chrono::steady_clock::now();
  std::vector<std::vector<int64_t>> out_shapes;
  for (const auto& t : out) out_shapes.push_back(t.shape);
  const auto real = plan.cropped_shapes(shapes, bucket, out_shapes);
  for (size_t i = 0; i < out.size(); ++i) out[i] = cropped_output(out[i], real[i], outputs_on_device, call.copy_down_ms);
  call.crop_ms = ms_since(cropping);
  spdlog::debug("{}: a call padded to {}: upload {:.3f} ms, padding {:.3f} ms, run {:.3f} ms (then {:.3f} ms for the GPU), crop {:.3f} ms, copy down {:.3f} ms",
                device_.to_string(), call.bucket, call.upload_ms, call.pad_ms - call.upload_ms, call.run_ms, settle_ms, call.crop_ms - call.copy_down_ms, call.copy_down_ms);
  record(std::move(call));
  return out;
}

void BucketedCalls::record(BucketCallTime call) {
  std::lock_guard lock(costs_mutex_);
  call.bucket_first = buckets_called_.insert(call.bucket).second;
  BucketCallCosts& c = costs_;
  ++c.calls;
  c.pad_ms += call.pad_ms;
  c.upload_ms += call.upload_ms;
  c.run_ms += call.run_ms;
  c.crop_ms += call.crop_ms;
  c.copy_down_ms += call.copy_down_ms;
  if (call.total_ms() > c.slowest.total_ms()) c.slowest = std::move(call);
}

BucketCallCosts BucketedCalls::costs() const {
  std::lock_guard lock(costs_mutex_);
  return costs_;
}

Tensor BucketedCalls::gpu_buffer(const std::string& name, const std::string& purpose, ElementType type, const std::vector<int64_t>& shape,
                                 size_t bytes) {
  std::lock_guard lock(buffers_mutex_);
  Tensor& kept = buffers_[name + "|" + purpose];
  Tensor buffer;
  if (kept.owner && kept.owner.use_count() == 1 && kept.bytes >= bytes) {
    buffer = kept;  // shares its owner: ours until this call lets go
  } else {
    buffer = allocate_on_device(name, type, shape, bytes, device_);
    if (!kept.owner || kept.owner.use_count() == 1) kept = buffer;
  }
  buffer.name = name;
  buffer.type = type;
  buffer.shape = shape;
  buffer.bytes = bytes;
  return buffer;
}

Tensor BucketedCalls::padded_input(const Tensor& t, const std::vector<int64_t>& shape, double& upload_ms) {
  const double pad = pad_value_of(t.name, pad_values_);
  if (memory_ == nullptr) return padded(t, shape, pad, Device::cpu());
  Tensor into = gpu_buffer(t.name, shape_text(shape), t.type, shape, checked_bytes(shape, t.type, "input '" + t.name + "' padded"));
  if (t.on_gpu()) {
    pad_into(t, into, pad);
    return into;
  }
  // A host input crosses the bus in one copy, into a staging buffer, and is padded there: a 2-D copy
  // from pageable memory goes row by row.
  const auto uploading = std::chrono::steady_clock::now();
  Tensor staged = gpu_buffer(t.name, "staging", t.type, t.shape, t.bytes);
  memory_->copy_to_device(device_, staged.data, t.data, t.bytes);
  upload_ms += ms_since(uploading);
  pad_into(staged, into, pad);
  return into;
}

Tensor BucketedCalls::cropped_output(const Tensor& t, const std::vector<int64_t>& shape, bool on_device, double& copy_down_ms) {
  if (!t.on_gpu()) return cropped(t, shape, Device::cpu());
  if (on_device) return cropped(t, shape, device_);
  Tensor host = host_outputs_.allocate(t.name, t.type, shape);
  Tensor crop = t;  // an output that needs no cropping comes down as it is
  if (shape != t.shape) {
    crop = gpu_buffer(t.name, "cropped", t.type, shape, host.bytes);
    crop_into(t, crop);
  }
  const auto copying = std::chrono::steady_clock::now();
  memory_->copy_to_host(device_, host.data, crop.data, host.bytes);
  copy_down_ms += ms_since(copying);
  return host;
}

void BucketedCalls::reserve(const std::vector<TensorSpec>& inputs, const std::vector<InputShapes>& bucket_shapes,
                            const std::vector<TensorSpec>& outputs, const std::vector<size_t>& largest_outputs) {
  if (memory_ == nullptr) return;
  // A buffer grown mid-stream cost a call tens of ms (an allocation, a free that waits for the GPU, the
  // page faults of fresh host memory, a pageable copy): DeepLab's bucketed stream had a p99 of 6-9x its
  // p50. Made now at their largest, no call pays them. Two host buffers per output: `out =
  // session.run(...)` holds the last call's outputs while the next call makes its own.
  for (const auto& input : inputs) {
    size_t staging = 0;
    for (const auto& shape : bucket_shapes) {
      if (const auto dims = shape.find(input.name); dims != shape.end())
        staging = std::max(staging, checked_bytes(dims->second, input.type, "input '" + input.name + "'"));
    }
    if (staging > 0) gpu_buffer(input.name, "staging", input.type, {}, staging);
  }
  // Pinned, the copy down is one DMA rather than a pass through the driver's staging buffer.
  const HostBufferPool::Pin pin = [memory = memory_, device = device_](void* pointer, size_t bytes) { return memory->pin_host(device, pointer, bytes); };
  for (size_t i = 0; i < largest_outputs.size() && i < outputs.size(); ++i) {
    gpu_buffer(outputs[i].name, "cropped", outputs[i].type, {}, largest_outputs[i]);
    host_outputs_.reserve(largest_outputs[i], pin);
    host_outputs_.reserve(largest_outputs[i], pin);
  }
  spdlog::debug("{}: bucketed calls' host buffers: {} kept, {} of them pinned", device_.to_string(), host_outputs_.free_buffers(),
                host_outputs_.free_pinned());
}

void BucketedCalls::release_device_buffers() {
  std::lock_guard lock(buffers_mutex_);
  buffers_.clear();
}

}  // namespace ortfleet::detail
