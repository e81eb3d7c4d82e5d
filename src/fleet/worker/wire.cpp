#include "fleet/worker/wire.hpp"

#include <cstring>

#include "base/json_errors.hpp"
#include "base/parallel_copy.hpp"
#include "ortfleet/engine/tensor.hpp"

namespace ortfleet::detail {
using nlohmann::json;

namespace {
constexpr size_t kAlignment = 64;

/// Runs `read`, turning nlohmann's exceptions (a missing key, a wrong type, a number out of range) into
/// an ortfleet::Error that says which message was malformed.
template <class Read>
auto reading(const char* what, Read read) -> decltype(read()) {
  try {
    return read();
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("malformed ") + what + ": " + json_error_text(e), "The worker and its parent come from different ortfleet builds?");
  }
}

ElementType checked_element_type(int number) {
  const auto type = static_cast<ElementType>(number);
  if (element_size(type) == 0 && type != ElementType::string) throw Error("unknown element type " + std::to_string(number));
  return type;
}

ElementType element_type_from_json(const json& j) { return checked_element_type(j.get<int>()); }
}  // namespace

json plan_to_json(const LocalStartPlan& plan) {
  json devices = json::array();
  for (const auto& d : plan.devices) devices.push_back(d.to_string());
  const char* mode = plan.mode == LocalMode::sequential ? "sequential" : plan.mode == LocalMode::threads ? "threads" : "overlapped";
  return {{"model", plan.model_path}, {"devices", devices}, {"config", json::parse(plan.config.to_json())},
          {"mode", mode}, {"warmup_runs", plan.warmup_runs}, {"dynamic_dim", plan.dynamic_dim},
          {"fleet_size", plan.fleet_size}, {"ort_library", plan.ort_library}, {"cache_dir", plan.cache_dir},
          {"profile_dir", plan.profile_dir}, {"price_cache_entry", plan.price_cache_entry}};
}

LocalStartPlan plan_from_json(const json& j) {
  return reading("start request", [&] {
  LocalStartPlan plan;
  plan.model_path = j.at("model").get<std::string>();
  for (const auto& d : j.at("devices")) plan.devices.push_back(Device::parse(d.get<std::string>()));
  plan.config = RunConfig::from_json(j.at("config").dump(), "the fleet's start request");
  const std::string mode = j.at("mode").get<std::string>();
  plan.mode = mode == "sequential" ? LocalMode::sequential : mode == "threads" ? LocalMode::threads : LocalMode::overlapped;
  plan.warmup_runs = j.at("warmup_runs").get<int>();
  plan.dynamic_dim = j.at("dynamic_dim").get<int64_t>();
  plan.fleet_size = j.at("fleet_size").get<int>();
  plan.ort_library = j.at("ort_library").get<std::string>();
  plan.cache_dir = j.at("cache_dir").get<std::string>();
  plan.profile_dir = j.at("profile_dir").get<std::string>();
  plan.price_cache_entry = j.value("price_cache_entry", false);
  return plan;
  });
}

DeviceStatus status_from_json(const json& j) {
  return reading("device status", [&] {
  DeviceStatus s;
  s.device = Device::parse(j.at("device").get<std::string>());
  const std::string state = j.at("state").get<std::string>();
  s.state = state == "ready" ? DeviceState::ready : state == "stopped" ? DeviceState::stopped : DeviceState::failed;
  s.error = j.value("error", "");
  s.provider = j.value("provider", "");
  s.provider_note = j.value("provider_note", "");
  s.ready_ms = j.value("ready_ms", 0.0);
  s.ready_ns = j.value("ready_ns", int64_t{0});
  s.pid = j.value("pid", 0);
  s.profile_path = j.value("profile_path", "");
  s.memory_bytes = j.value("memory_bytes", uint64_t{0});
  s.resident = j.value("resident", false);
  s.model_cache = j.value("model_cache", "");
  s.model_cache_note = j.value("model_cache_note", "");
  s.tier = j.value("tier", "");
  s.tier_full_ms = j.value("tier_full_ms", 0.0);
  s.tier_note = j.value("tier_note", "");
  return s;
  });
}

json error_to_json(const std::exception& e) {
  if (const auto* error = dynamic_cast<const Error*>(&e)) {
    return {{"what_failed", error->what_failed()}, {"hint", error->hint()}, {"where", error->where()}};
  }
  return {{"what_failed", e.what()}, {"hint", ""}, {"where", ""}};
}

Error error_from_json(const json& j, const std::string& where) {
  const auto text = [&](const char* key) {
    const auto it = j.find(key);
    return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  if (!j.is_object()) return Error("the worker failed without saying why", {}, where);
  const std::string what_failed = text("what_failed");
  const std::string sender_where = text("where");
  return Error(what_failed.empty() ? "the worker failed without saying why" : what_failed, text("hint"),
               sender_where.empty() ? where : sender_where);
}

json ort_warnings_to_json(const std::vector<OrtWarningCount>& warnings) {
  json out = json::array();
  for (const auto& w : warnings) out.push_back(json::array({w.message, w.count}));
  return out;
}

std::vector<OrtWarningCount> ort_warnings_from_json(const json& j) {
  std::vector<OrtWarningCount> out;
  if (!j.is_array()) return out;
  for (const auto& entry : j) {
    if (entry.is_array() && entry.size() == 2 && entry[0].is_string() && entry[1].is_number_integer() && entry[1].get<int64_t>() > 0) {
      out.push_back({entry[0].get<std::string>(), entry[1].get<int64_t>()});
    }
  }
  return out;
}

json pack_tensors(const std::vector<Tensor>& tensors, std::shared_ptr<SharedBuffer>& buffer) {
  size_t total = 0;
  for (const auto& t : tensors) total += (t.bytes + kAlignment - 1) / kAlignment * kAlignment;
  if (!buffer || buffer->size() < total) buffer = SharedBuffer::create(total);
  json out = json::array();
  size_t offset = 0;
  for (const auto& t : tensors) {
    if (t.on_gpu()) throw Error("pack_tensors takes host tensors; '" + t.name + "' is on " + t.device.to_string());
    if (t.bytes > 0) std::memcpy(buffer->data() + offset, t.data, t.bytes);
    out.push_back({{"name", t.name}, {"type", static_cast<int>(t.type)}, {"shape", t.shape}, {"offset", offset}, {"bytes", t.bytes}});
    offset += (t.bytes + kAlignment - 1) / kAlignment * kAlignment;
  }
  return out;
}

std::vector<Tensor> unpack_tensors(const json& descriptions, const std::shared_ptr<SharedBuffer>& buffer) {
  return reading("tensor descriptions", [&] {
  if (!descriptions.is_array()) throw Error("tensor descriptions are not a list");
  std::vector<Tensor> out;
  for (const auto& d : descriptions) {
    Tensor t;
    t.name = d.at("name").get<std::string>();
    t.type = element_type_from_json(d.at("type"));
    t.shape = d.at("shape").get<std::vector<int64_t>>();
    const auto offset = d.at("offset").get<size_t>();
    t.bytes = d.at("bytes").get<size_t>();
    // Compared without adding: offset + bytes may wrap around.
    if (!buffer || offset > buffer->size() || t.bytes > buffer->size() - offset) {
      throw Error("tensor '" + t.name + "' lies outside its shared buffer");
    }
    if (t.type == ElementType::string || t.bytes != checked_bytes(t.shape, t.type, "tensor '" + t.name + "'")) {
      throw Error("tensor '" + t.name + "' has " + std::to_string(t.bytes) + " bytes, which does not match its shape");
    }
    t.data = buffer->data() + offset;
    t.owner = buffer;
    out.push_back(std::move(t));
  }
  return out;
  });
}

namespace {
constexpr uint32_t kRingTableMagic = 0x326e726f;  // "orn2"
constexpr uint32_t kOutputsOnDevice = 1;
constexpr uint32_t kInHostMemory = 0;
constexpr uint32_t kCudaIpc = 1;

struct RingTableHeader {
  uint32_t magic;
  uint32_t count;
  uint32_t flags;
  uint32_t released;  // leases after the header, before the entries
};
struct RingTensorEntry {
  int32_t type;
  uint32_t rank;
  uint32_t name_bytes;
  uint32_t location;  // kInHostMemory or kCudaIpc
  uint64_t offset;
  uint64_t bytes;     // the tensor's bytes (what its shape takes), wherever they are
  int32_t device_index;
  uint32_t reserved;
};
struct IpcRecord {
  std::array<std::byte, 64> handle;
  uint64_t offset;
  uint64_t lease;
};

size_t aligned(size_t n, size_t to) { return (n + to - 1) / to * to; }
size_t entry_bytes(const Tensor& t) { return aligned(sizeof(RingTensorEntry) + t.shape.size() * sizeof(int64_t) + t.name.size(), 8); }
/// What a tensor's data takes in the area: its bytes, or its reference.
size_t data_bytes(const WireTensor& w) { return aligned(w.ipc ? sizeof(IpcRecord) : w.tensor.bytes, kAlignment); }

size_t ring_table_bytes(const RingMessage& message) {
  size_t table = sizeof(RingTableHeader) + message.released.size() * sizeof(uint64_t);
  for (const auto& w : message.tensors) table += entry_bytes(w.tensor);
  return aligned(table, kAlignment);
}
}  // namespace

RingMessage host_message(const std::vector<Tensor>& tensors) {
  RingMessage message;
  for (const auto& t : tensors) message.tensors.push_back({t, std::nullopt});
  return message;
}

size_t ring_message_bytes(const RingMessage& message) {
  size_t total = ring_table_bytes(message);
  for (const auto& w : message.tensors) total += data_bytes(w);
  return total;
}

size_t write_ring_message(const RingMessage& message, std::byte* area, size_t capacity) {
  const size_t total = ring_message_bytes(message);
  if (total > capacity) {
    throw Error("tensors of " + std::to_string(total) + " bytes do not fit a ring slot of " + std::to_string(capacity) + " bytes");
  }
  const RingTableHeader header{kRingTableMagic, static_cast<uint32_t>(message.tensors.size()),
                               message.outputs_on_device ? kOutputsOnDevice : 0, static_cast<uint32_t>(message.released.size())};
  std::memcpy(area, &header, sizeof(header));
  size_t at = sizeof(header);
  if (!message.released.empty()) std::memcpy(area + at, message.released.data(), message.released.size() * sizeof(uint64_t));
  at += message.released.size() * sizeof(uint64_t);
  size_t data = ring_table_bytes(message);
  for (const auto& [t, ipc] : message.tensors) {
    if (t.on_gpu() && !ipc) throw Error("a ring carries device tensors by reference; '" + t.name + "' on " + t.device.to_string() + " has none");
    const RingTensorEntry entry{static_cast<int32_t>(t.type), static_cast<uint32_t>(t.shape.size()), static_cast<uint32_t>(t.name.size()),
                                ipc ? kCudaIpc : kInHostMemory, data, t.bytes, t.device.index, 0};
    std::memcpy(area + at, &entry, sizeof(entry));
    std::memcpy(area + at + sizeof(entry), t.shape.data(), t.shape.size() * sizeof(int64_t));
    std::memcpy(area + at + sizeof(entry) + t.shape.size() * sizeof(int64_t), t.name.data(), t.name.size());
    at += entry_bytes(t);
    if (ipc) {
      const IpcRecord record{ipc->handle, ipc->offset, ipc->lease};
      std::memcpy(area + data, &record, sizeof(record));
    } else {
      parallel_copy(area + data, t.data, t.bytes);  // a batch of images is many MB: one core would take ms
    }
    data += data_bytes({t, ipc});
  }
  return total;
}

RingMessage read_ring_message(const std::byte* area, size_t bytes, const std::shared_ptr<void>& owner) {
  const auto malformed = [](const std::string& why) {
    return Error("malformed tensors in a ring slot: " + why, "The worker and its parent come from different ortfleet builds?");
  };
  RingTableHeader header{};
  if (bytes < sizeof(header)) throw malformed("shorter than its header");
  std::memcpy(&header, area, sizeof(header));
  if (header.magic != kRingTableMagic) throw malformed("wrong magic");
  RingMessage message;
  message.outputs_on_device = (header.flags & kOutputsOnDevice) != 0;
  size_t at = sizeof(header);
  // Compared without adding or multiplying: the sender's numbers may be anything.
  if (header.released > (bytes - at) / sizeof(uint64_t)) throw malformed("the table runs past its area");
  message.released.resize(header.released);
  if (header.released > 0) std::memcpy(message.released.data(), area + at, header.released * sizeof(uint64_t));
  at += header.released * sizeof(uint64_t);
  for (uint32_t i = 0; i < header.count; ++i) {
    RingTensorEntry entry{};
    if (bytes - at < sizeof(entry)) throw malformed("the table runs past its area");
    std::memcpy(&entry, area + at, sizeof(entry));
    if (entry.rank > 64 || entry.name_bytes > 4096) throw malformed("a tensor of rank " + std::to_string(entry.rank));
    const size_t described = sizeof(entry) + entry.rank * sizeof(int64_t) + entry.name_bytes;
    if (bytes - at < described) throw malformed("the table runs past its area");
    WireTensor w;
    Tensor& t = w.tensor;
    t.shape.resize(entry.rank);
    std::memcpy(t.shape.data(), area + at + sizeof(entry), entry.rank * sizeof(int64_t));
    t.name.assign(reinterpret_cast<const char*>(area + at + sizeof(entry) + entry.rank * sizeof(int64_t)), entry.name_bytes);
    at += aligned(described, 8);
    if (at > bytes) throw malformed("the table runs past its area");
    t.type = checked_element_type(entry.type);
    t.bytes = entry.bytes;
    if (t.type == ElementType::string || t.bytes != checked_bytes(t.shape, t.type, "tensor '" + t.name + "'")) {
      throw Error("tensor '" + t.name + "' has " + std::to_string(t.bytes) + " bytes, which does not match its shape");
    }
    if (entry.location != kInHostMemory && entry.location != kCudaIpc) throw malformed("tensor '" + t.name + "' lies nowhere known");
    const size_t stored = entry.location == kCudaIpc ? sizeof(IpcRecord) : t.bytes;
    if (entry.offset > bytes || stored > bytes - entry.offset) throw Error("tensor '" + t.name + "' lies outside its ring slot");
    if (entry.location == kCudaIpc) {
      IpcRecord record{};
      std::memcpy(&record, area + entry.offset, sizeof(record));
      w.ipc = CudaIpcRef{record.handle, record.offset, record.lease};
      t.device = Device::cuda(entry.device_index);
    } else {
      t.data = const_cast<std::byte*>(area + entry.offset);
      t.owner = owner;
    }
    message.tensors.push_back(std::move(w));
  }
  return message;
}

json specs_to_json(const std::vector<TensorSpec>& specs) {
  json out = json::array();
  for (const auto& s : specs) {
    out.push_back({{"name", s.name}, {"type", static_cast<int>(s.type)}, {"shape", s.shape}, {"dim_names", s.dim_names}});
  }
  return out;
}

std::vector<TensorSpec> specs_from_json(const json& j) {
  return reading("tensor specs", [&] {
  if (!j.is_array()) throw Error("tensor specs are not a list");
  std::vector<TensorSpec> out;
  for (const auto& s : j) {
    out.push_back({s.at("name").get<std::string>(), element_type_from_json(s.at("type")),
                   s.at("shape").get<std::vector<int64_t>>(), s.value("dim_names", std::vector<std::string>{})});
  }
  return out;
  });
}

}  // namespace ortfleet::detail
