#include "engine/providers/provider_registry.hpp"

#include <algorithm>
#include <mutex>

#include "ortfleet/base/closest_name.hpp"
#include "engine/cpu/cpu_execution_provider.hpp"
#include "engine/cuda/cuda_execution_provider.hpp"
#include "ortfleet/base/error.hpp"

namespace ortfleet::detail {

const std::vector<const DeviceProvider*>& device_providers() {
  // A provider that owns a new kind of device is a room of its own (engine/<name>/) and a line here
  // (docs/development.md says what else it touches).
  static const std::vector<const DeviceProvider*> providers = {
      &cpu_execution_provider(),
      &cuda_execution_provider(),
  };
  return providers;
}

namespace {

/// This build's providers that stand in front of a device's own, first tried first. TensorRT, in front of
/// CUDA, would be a line here (&tensorrt_execution_provider()), and a room of its own (docs/development.md).
const std::vector<const ExecutionProvider*>& built_in_in_front() {
  static const std::vector<const ExecutionProvider*> providers = {};
  return providers;
}

/// Those a ProviderRegistration added, in the order they were added.
struct Registered {
  std::mutex mutex;
  std::vector<const ExecutionProvider*> providers;
};
Registered& registered() {
  static Registered r;
  return r;
}

std::vector<const ExecutionProvider*> all_providers_locked(const Registered& r) {
  std::vector<const ExecutionProvider*> all(device_providers().begin(), device_providers().end());
  all.insert(all.end(), built_in_in_front().begin(), built_in_in_front().end());
  all.insert(all.end(), r.providers.begin(), r.providers.end());
  return all;
}

bool owns_devices(const ExecutionProvider* provider) {
  const auto& own = device_providers();
  return std::find(own.begin(), own.end(), provider) != own.end();
}

std::string names_of(const std::vector<const ExecutionProvider*>& providers) {
  std::string out;
  for (const auto* p : providers) out += (out.empty() ? "" : ", ") + std::string(p->name());
  return out;
}

bool written_as_a_name(const std::string& name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_'; });
}

/// The providers `config` stacks in front of a device's own, every one checked, in the registry's order.
std::vector<const ExecutionProvider*> stacked_in_front(const RunConfig& config) {
  std::vector<const ExecutionProvider*> all;
  {
    auto& r = registered();
    std::lock_guard lock(r.mutex);
    all = all_providers_locked(r);
  }
  std::vector<const ExecutionProvider*> named;
  for (const auto& [name, options] : config.providers) {
    const auto found = std::find_if(all.begin(), all.end(), [&name = name](const ExecutionProvider* p) { return name == p->name(); });
    if (found == all.end()) {
      std::vector<std::string> names;
      for (const auto* p : all) names.emplace_back(p->name());
      const auto meant = closest_name(name, names);
      throw Error("the config's `providers` names '" + name + "', and this build has no execution provider of that name (it has: " + names_of(all) + ")",
                  meant ? "Did you mean '" + *meant + "'?" : std::string("Remove it from `providers`, or use a build of ortfleet with that provider"));
    }
    if (owns_devices(*found)) {
      throw Error("the config's `providers` names '" + name + "', the provider of " + name + " devices themselves: it is always attached, last",
                  "Remove it from `providers`: that section stacks providers in front of a device's own (TensorRT in front of CUDA)");
    }
    try {
      (*found)->check_options(options);
    } catch (const Error& e) {
      throw Error("the config's `providers." + name + "`: " + e.what_failed(), e.hint());
    }
    named.push_back(*found);
  }
  std::vector<const ExecutionProvider*> in_order;
  for (const auto* p : all) {
    if (std::find(named.begin(), named.end(), p) != named.end()) in_order.push_back(p);
  }
  return in_order;
}

}  // namespace

std::vector<const ExecutionProvider*> execution_providers() {
  auto& r = registered();
  std::lock_guard lock(r.mutex);
  return all_providers_locked(r);
}

const ExecutionProvider* find_provider(const std::string& name) {
  for (const auto* p : execution_providers()) {
    if (name == p->name()) return p;
  }
  return nullptr;
}

const DeviceProvider& provider_for(Device::Kind kind) {
  for (const DeviceProvider* p : device_providers()) {
    if (p->device_kind() == kind) return *p;
  }
  throw Error("no execution provider for devices of kind " + std::to_string(static_cast<int>(kind)) + " in this build",
              "Use a build of ortfleet with that provider");
}

ProviderStack::ProviderStack(const DeviceProvider& own, std::vector<const ExecutionProvider*> in_front)
    : own_(&own), in_front_(std::move(in_front)) {}

std::vector<const ExecutionProvider*> ProviderStack::providers() const {
  std::vector<const ExecutionProvider*> all = in_front_;
  all.push_back(own_);
  return all;
}

bool ProviderStack::offers(Capability capability) const {
  return own_->offers(capability) && std::all_of(in_front_.begin(), in_front_.end(), [&](const auto* p) { return p->offers(capability); });
}

const DeviceMemory* ProviderStack::memory() const { return offers(Capability::device_memory) ? own_->memory() : nullptr; }

std::string ProviderStack::cache_mark(const RunConfig& config) const {
  std::string mark = own_->cache_mark(config);
  for (const auto* p : in_front_) mark += "|provider=" + std::string(p->name()) + p->cache_mark(config);
  return mark;
}

bool ProviderStack::prepared() const {
  return own_->prepared() && std::all_of(in_front_.begin(), in_front_.end(), [](const auto* p) { return p->prepared(); });
}

std::string ProviderStack::prepare() const { return prepare_providers(providers()); }

std::string prepare_providers(const std::vector<const ExecutionProvider*>& providers) {
  std::string paths;
  for (const auto* p : providers) {
    const std::string path = p->prepare();
    if (!path.empty()) paths += (paths.empty() ? "" : "+") + path;
  }
  return paths;
}

ProviderAttachment ProviderStack::attach(Ort::SessionOptions& options, const Device& device, const RunConfig& config) const {
  // ONNX Runtime tries the providers in the order they are appended: those in front first.
  std::string paths;
  std::string notes;
  for (const auto* p : in_front_) {
    const ProviderAttachment front = p->attach(options, device, config);
    paths += front.path + "+";
    if (!front.note.empty()) notes += (notes.empty() ? "" : "; ") + front.note;
  }
  ProviderAttachment out = own_->attach(options, device, config);
  out.path = paths + out.path;
  if (!notes.empty()) out.note = notes + (out.note.empty() ? "" : "; " + out.note);
  return out;
}

ProviderStack provider_stack(const Device& device, const RunConfig& config) {
  const DeviceProvider& own = provider_for(device);
  if (config.providers.empty()) return {own, {}};
  std::vector<const ExecutionProvider*> in_front = stacked_in_front(config);
  std::erase_if(in_front, [&](const ExecutionProvider* p) { return p->device_kind() != device.kind; });
  return {own, std::move(in_front)};
}

ProviderStack provider_stack(const Device& device) { return {provider_for(device), {}}; }

bool device_has(const Device& device, Capability capability) { return provider_for(device).offers(capability); }

bool device_has(const Device& device, Capability capability, const RunConfig& config) {
  return provider_stack(device, config).offers(capability);
}

ProviderRegistration::ProviderRegistration(const ExecutionProvider& provider) : provider_(&provider) {
  const std::string name = provider.name();
  if (!written_as_a_name(name)) {
    throw Error("an execution provider's name '" + name + "' is not written as names are", "Use lower case letters, digits, '-' and '_'");
  }
  if (dynamic_cast<const DeviceProvider*>(&provider) != nullptr) {
    throw Error("the execution provider '" + name + "' owns devices: a kind of device has one provider of its own, listed in the build",
                "Register a provider that stands in front of a device's own (an ExecutionProvider)");
  }
  auto& r = registered();
  std::lock_guard lock(r.mutex);
  const auto all = all_providers_locked(r);
  if (std::any_of(all.begin(), all.end(), [&](const ExecutionProvider* p) { return name == p->name(); })) {
    throw Error("an execution provider named '" + name + "' is already registered", "Give it another name");
  }
  r.providers.push_back(provider_);
}

ProviderRegistration::~ProviderRegistration() {
  auto& r = registered();
  std::lock_guard lock(r.mutex);
  std::erase(r.providers, provider_);
}

const DeviceMemory& device_memory(const Device& device) {
  const DeviceMemory* memory = provider_for(device).memory();
  if (memory == nullptr) throw Error(device.to_string() + " has no memory of its own: its tensors live in host memory");
  return *memory;
}

uint64_t memory_in_use(const Device& device) { return provider_for(device).memory_in_use(device); }

}  // namespace ortfleet::detail
