#pragma once
// Every execution provider this build has, by name, and the stack of them a session on a device attaches:
// what the rest of ortfleet asks instead of whether a device is a GPU (runtime/execution_provider.hpp
// says what a provider tells).
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/runtime/execution_provider.hpp"

namespace ortfleet::detail {

/// The providers that own a kind of device, in the order a machine's devices are listed: the CPU first.
const std::vector<const DeviceProvider*>& device_providers();

/// Every provider, by name: the devices' own (device_providers()), then those that stand in front of one
/// (this build's, then those registered with ProviderRegistration), in the order a stack tries them.
std::vector<const ExecutionProvider*> execution_providers();

/// The provider named `name` ("cuda"), or null where this build has none of that name.
const ExecutionProvider* find_provider(const std::string& name);

/// The provider that owns `kind`'s devices. Throws ortfleet::Error for a kind this build has none for.
const DeviceProvider& provider_for(Device::Kind kind);
inline const DeviceProvider& provider_for(const Device& device) { return provider_for(device.kind); }

/// The providers a session on one device attaches, in the order ONNX Runtime tries them: those the
/// config stacks in front of the device's own (its `providers`, e.g. TensorRT), then the device's own,
/// which owns the device. It answers what a session asks of its providers as one.
class ProviderStack {
 public:
  ProviderStack(const DeviceProvider& own, std::vector<const ExecutionProvider*> in_front);

  /// The provider that owns the device: its memory, driver, workers.
  const DeviceProvider& device_provider() const { return *own_; }
  /// Those in front of it, first tried first (none unless the config names some).
  const std::vector<const ExecutionProvider*>& in_front() const { return in_front_; }
  /// Every one, in the order a session tries them: those in front, then the device's own.
  std::vector<const ExecutionProvider*> providers() const;

  /// Whether the device has `capability`: its own provider offers it and each in front keeps it.
  bool offers(Capability capability) const;
  /// The device's own memory, where the stack offers device_memory; null where its tensors live in host memory.
  const DeviceMemory* memory() const;

  /// What marks a cache entry made through this stack: the device's own provider's mark, then for each
  /// in front "|provider=NAME" and its own mark, so that an entry made with another stack is never taken.
  std::string cache_mark(const RunConfig& config) const;

  /// Whether every provider of the stack is prepared in this process.
  bool prepared() const;
  /// Prepares each, in order (prepare_providers): the paths they attach by.
  std::string prepare() const;
  /// The device's own provider's (DeviceProvider::device_open, open_device).
  bool device_open(const Device& device) const { return own_->device_open(device); }
  std::shared_ptr<void> open_device(const Device& device) const { return own_->open_device(device); }
  /// Attaches each provider for `device`, those in front first. The attachment says the paths joined with
  /// "+" ("test-double+cpu"), the device's own library, and every note. Throws ortfleet::Error.
  ProviderAttachment attach(Ort::SessionOptions& options, const Device& device, const RunConfig& config) const;

 private:
  const DeviceProvider* own_;
  std::vector<const ExecutionProvider*> in_front_;
};

/// Prepares each of `providers` (ExecutionProvider::prepare), in order: the paths they attach by, joined
/// with "+" ("plugin"; "tensorrt+plugin"), for the start-up timeline.
std::string prepare_providers(const std::vector<const ExecutionProvider*>& providers);

/// The stack of a session on `device` with `config`: the providers its `providers` names that run on
/// the device's kind, in the registry's order, in front of the device's own. Throws ortfleet::Error for a
/// name this build has no provider of (naming those it has), a device's own provider named there, or
/// options a provider refuses (every named provider's options are checked, whichever devices it runs on).
ProviderStack provider_stack(const Device& device, const RunConfig& config);
/// The stack a config that stacks nothing gives: the device's own provider alone.
ProviderStack provider_stack(const Device& device);

/// Whether `device` has `capability`, as its own provider offers it (or, with `config`, as the stack
/// `config` gives keeps it). What code asks instead of whether a device is a GPU.
bool device_has(const Device& device, Capability capability);
bool device_has(const Device& device, Capability capability, const RunConfig& config);

/// A provider that stands in front of a device's own added to the registry while this lives, by its name
/// (a test's double; a provider a program brings along). The provider must outlive the registration, and
/// the registration every session made through it. Throws ortfleet::Error for a name already taken or
/// not written as names are (lower case letters, digits, '-' and '_'), and for a provider that owns devices.
class ProviderRegistration {
 public:
  explicit ProviderRegistration(const ExecutionProvider& provider);
  ~ProviderRegistration();
  ProviderRegistration(const ProviderRegistration&) = delete;
  ProviderRegistration& operator=(const ProviderRegistration&) = delete;

 private:
  const ExecutionProvider* provider_;
};

/// The memory of `device`'s own (a GPU's). Throws ortfleet::Error where its provider computes in host
/// memory: only tensors on such a device (Tensor::on_gpu()) ask.
const DeviceMemory& device_memory(const Device& device);

/// Memory in use where `device` keeps a session's state: the whole GPU's (as the driver reports it), or
/// this process's resident set for the CPU.
uint64_t memory_in_use(const Device& device);

}  // namespace ortfleet::detail
