#include "ortfleet/engine/device_tensor.hpp"

#include "engine/providers/provider_registry.hpp"
#include "ortfleet/base/error.hpp"

namespace ortfleet {

Tensor allocate_on_device(std::string name, ElementType type, std::vector<int64_t> shape, size_t bytes, const Device& device) {
  const detail::DeviceMemory& memory = detail::device_memory(device);
  void* data = memory.allocate(device, bytes);
  Tensor t = Tensor::borrow(std::move(name), type, std::move(shape), data, device);
  t.bytes = bytes;
  t.owner = std::shared_ptr<void>(data, [&memory, device](void* p) { memory.release(device, p); });
  return t;
}

Tensor copy_to_device(const Tensor& host, const Device& device) {
  if (host.on_gpu()) throw Error("tensor '" + host.name + "' is on " + host.device.to_string() + ", not in host memory", {}, device.to_string());
  Tensor t = allocate_on_device(host.name, host.type, host.shape, host.bytes, device);
  detail::device_memory(device).copy_to_device(device, t.data, host.data, host.bytes);
  return t;
}

Tensor copy_to_host(const Tensor& on_device) {
  if (!on_device.on_gpu()) throw Error("tensor '" + on_device.name + "' is in host memory, not on a GPU");
  Tensor t = Tensor::host_allocate(on_device.name, on_device.type, on_device.shape);
  detail::device_memory(on_device.device).copy_to_host(on_device.device, t.data, on_device.data, on_device.bytes);
  return t;
}

}  // namespace ortfleet
