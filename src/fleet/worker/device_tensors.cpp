#include "fleet/worker/device_tensors.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "engine/providers/provider_registry.hpp"
#include "ortfleet/base/error.hpp"
#include "ortfleet/base/settings.hpp"
#include "ortfleet/engine/device_tensor.hpp"

namespace ortfleet {
namespace detail {
namespace {
// Mapped allocations kept open per worker and side. PyTorch's caching allocator and ONNX Runtime's
// arena reuse a few large allocations, so a handful covers a job; the bound keeps a caller that
// allocates anew for every call from holding every allocation it ever sent.
constexpr size_t kMappingsKept = 32;

std::string handle_key(const std::array<std::byte, 64>& handle) {
  return {reinterpret_cast<const char*>(handle.data()), handle.size()};
}

/// The memory sharing of `device`'s provider; throws ortfleet::Error where it has none.
const DeviceMemorySharing& sharing_of(const Device& device) {
  const DeviceMemorySharing* sharing = provider_for(device).sharing();
  if (sharing == nullptr) throw Error("the memory of " + device.to_string() + " cannot be shared with another process");
  return *sharing;
}

/// Device tensor `t` as a reference another process maps (its description, without its memory);
/// throws ortfleet::Error when the driver cannot share that memory.
WireTensor by_reference(const Tensor& t, uint64_t lease) {
  const auto handle = sharing_of(t.device).handle(t.device, t.data);
  Tensor described = t;
  described.data = nullptr;
  described.owner = nullptr;
  return {std::move(described), CudaIpcRef{handle.bytes, handle.offset, lease}};
}
}  // namespace

// --- mappings -------------------------------------------------------------------------------------

IpcMappings::IpcMappings(Device device, size_t capacity) : device_(std::move(device)), capacity_(capacity) {}

Tensor IpcMappings::open(const WireTensor& wire) {
  const std::string key = handle_key(wire.ipc->handle);
  std::shared_ptr<std::byte> mapping;
  {
    std::lock_guard lock(mutex_);
    const auto it = std::find_if(recent_.begin(), recent_.end(), [&](const auto& entry) { return entry.first == key; });
    if (it != recent_.end()) {
      recent_.splice(recent_.begin(), recent_, it);
      mapping = it->second;
    }
  }
  if (!mapping) {
    try {
      mapping = sharing_of(device_).open(device_, wire.ipc->handle);
    } catch (const Error& e) {
      throw Error("cannot map tensor '" + wire.tensor.name + "' from the other process: " + e.what_failed(),
                  "Run with " + named(Setting::strategy, "threads") + " to keep sessions in this process, or pass host tensors", device_.to_string());
    }
    std::lock_guard lock(mutex_);
    ++opens_;
    recent_.emplace_front(key, mapping);
    // Dropping the list's reference closes a mapping once no tensor uses it.
    while (recent_.size() > capacity_) recent_.pop_back();
  }
  Tensor t = wire.tensor;
  t.device = device_;
  t.data = mapping.get() + wire.ipc->offset;
  t.owner = mapping;
  return t;
}

// --- the caller's side ------------------------------------------------------------------------------

struct DeviceTensorsClient::Shared {
  std::mutex mutex;
  std::vector<uint64_t> released;  // leases let go of, for the next request
  TransferCounters counters;       // all but ipc_opens, which the mappings count
};

/// A leased output's hold: the lease goes back to the worker, with the next request, when the last
/// copy of the tensor goes (and the mapping may close after it).
class DeviceTensorsClient::Lease {
 public:
  Lease(std::shared_ptr<void> mapping, std::weak_ptr<Shared> shared, uint64_t id)
      : mapping_(std::move(mapping)), shared_(std::move(shared)), id_(id) {}
  ~Lease() {
    if (auto s = shared_.lock()) {
      std::lock_guard lock(s->mutex);
      s->released.push_back(id_);
    }
  }
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;

 private:
  std::shared_ptr<void> mapping_;
  std::weak_ptr<Shared> shared_;
  uint64_t id_;
};

DeviceTensorsClient::DeviceTensorsClient(Device worker_device)
    : device_(std::move(worker_device)), shared_(std::make_shared<Shared>()), mappings_(device_, kMappingsKept) {}

DeviceTensorsClient::~DeviceTensorsClient() = default;

void DeviceTensorsClient::note_once(const std::string& kind, const std::string& text) {
  {
    std::lock_guard lock(shared_->mutex);
    if (!noted_.insert(kind).second) return;
  }
  spdlog::info("{}: {}", device_.to_string(), text);
}

std::vector<Tensor> DeviceTensorsClient::host_inputs(const std::vector<Tensor>& inputs) {
  std::vector<Tensor> host;
  TransferCounters counted;
  for (const auto& t : inputs) {
    if (t.on_gpu()) {
      host.push_back(copy_to_host(t));
      counted.inputs_staged_bytes += t.bytes;
    } else {
      host.push_back(t);
      counted.inputs_host_bytes += t.bytes;
    }
  }
  std::lock_guard lock(shared_->mutex);
  shared_->counters += counted;
  return host;
}

RingMessage DeviceTensorsClient::request(const std::vector<Tensor>& inputs, bool outputs_on_device) {
  RingMessage message;
  message.outputs_on_device = outputs_on_device;
  TransferCounters counted;
  bool any_by_reference = false;
  for (const auto& t : inputs) {
    if (!t.on_gpu()) {
      message.tensors.push_back({t, std::nullopt});
      counted.inputs_host_bytes += t.bytes;
      continue;
    }
    if (t.device == device_) {
      try {
        message.tensors.push_back(by_reference(t, /*lease=*/0));
        counted.inputs_ipc_bytes += t.bytes;
        any_by_reference = true;
        continue;
      } catch (const Error& e) {
        note_once("unshareable", "device inputs go through host memory: the driver cannot share their memory with the worker (" +
                                     e.what_failed() + "; PyTorch's expandable segments do this)");
      }
    } else {
      note_once("other GPU " + t.device.to_string(), "inputs on " + t.device.to_string() +
                                                           " go through host memory: only tensors on the worker's own GPU cross in place");
    }
    message.tensors.push_back({copy_to_host(t), std::nullopt});
    counted.inputs_staged_bytes += t.bytes;
  }
  // The worker reads the memory once the request arrives: what the caller queued on the GPU (on any
  // stream: PyTorch's, CuPy's) must be done by then.
  if (any_by_reference) device_memory(device_).synchronize(device_);
  std::lock_guard lock(shared_->mutex);
  message.released.swap(shared_->released);
  shared_->counters += counted;
  return message;
}

std::vector<Tensor> DeviceTensorsClient::outputs(std::vector<WireTensor> outputs, bool outputs_on_device) {
  std::vector<Tensor> out;
  TransferCounters counted;
  for (auto& w : outputs) {
    if (!w.ipc) {
      const bool upload = outputs_on_device && provider_for(device_).memory() != nullptr;
      (upload ? counted.outputs_staged_bytes : counted.outputs_host_bytes) += w.tensor.bytes;
      out.push_back(upload ? copy_to_device(w.tensor, device_) : std::move(w.tensor));
      continue;
    }
    Tensor t = mappings_.open(w);
    counted.outputs_ipc_bytes += t.bytes;
    t.owner = std::make_shared<Lease>(std::move(t.owner), shared_, w.ipc->lease);
    out.push_back(std::move(t));
  }
  std::lock_guard lock(shared_->mutex);
  shared_->counters += counted;
  return out;
}

TransferCounters DeviceTensorsClient::counters() const {
  TransferCounters c;
  {
    std::lock_guard lock(shared_->mutex);
    c = shared_->counters;
  }
  c.ipc_opens = mappings_.opens();
  return c;
}

// --- the worker's side ------------------------------------------------------------------------------

DeviceTensorsServer::DeviceTensorsServer(Device device) : device_(std::move(device)), mappings_(device_, kMappingsKept) {}

std::vector<Tensor> DeviceTensorsServer::inputs(const RingMessage& request) {
  for (const uint64_t id : request.released) leases_.erase(id);
  std::vector<Tensor> given;
  for (const auto& w : request.tensors) given.push_back(w.ipc ? mappings_.open(w) : w.tensor);
  return given;
}

RingMessage DeviceTensorsServer::response(std::vector<Tensor> outputs, bool outputs_on_device) {
  RingMessage message;
  for (auto& t : outputs) {
    if (!t.on_gpu()) {
      message.tensors.push_back({std::move(t), std::nullopt});
      continue;
    }
    if (outputs_on_device) {
      try {
        const uint64_t id = next_lease_;
        message.tensors.push_back(by_reference(t, id));
        ++next_lease_;
        leases_.emplace(id, std::move(t));
        continue;
      } catch (const Error& e) {
        if (!noted_) spdlog::info("{}: device outputs go through host memory: {}", device_.to_string(), e.what_failed());
        noted_ = true;
      }
    }
    message.tensors.push_back({copy_to_host(t), std::nullopt});
  }
  return message;
}

void DeviceTensorsServer::discard(const RingMessage& response) {
  for (const auto& w : response.tensors) {
    if (w.ipc) leases_.erase(w.ipc->lease);
  }
}

}  // namespace detail
}  // namespace ortfleet
