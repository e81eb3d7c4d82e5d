#include "fleet/core/device_status.hpp"

namespace ortfleet {
using nlohmann::json;

std::string to_string(DeviceState s) {
  switch (s) {
    case DeviceState::pending: return "pending";
    case DeviceState::starting: return "starting";
    case DeviceState::ready: return "ready";
    case DeviceState::failed: return "failed";
    case DeviceState::stopped: return "stopped";
  }
  return "?";
}

std::string DeviceStatus::to_json() const { return detail::status_to_json(*this).dump(); }

TransferCounters& TransferCounters::operator+=(const TransferCounters& o) {
  inputs_host_bytes += o.inputs_host_bytes;
  inputs_ipc_bytes += o.inputs_ipc_bytes;
  inputs_staged_bytes += o.inputs_staged_bytes;
  outputs_host_bytes += o.outputs_host_bytes;
  outputs_ipc_bytes += o.outputs_ipc_bytes;
  outputs_staged_bytes += o.outputs_staged_bytes;
  ipc_opens += o.ipc_opens;
  return *this;
}

namespace detail {

json status_to_json(const DeviceStatus& d) {
  return {{"device", d.device.to_string()}, {"state", to_string(d.state)},    {"error", d.error},
          {"provider", d.provider},         {"provider_note", d.provider_note}, {"ready_ms", d.ready_ms},
          {"ready_ns", d.ready_ns},         {"pid", d.pid},                   {"profile_path", d.profile_path},
          {"memory_bytes", d.memory_bytes}, {"resident", d.resident},       {"model_cache", d.model_cache},
          {"model_cache_note", d.model_cache_note}, {"tier", d.tier},   {"tier_full_ms", d.tier_full_ms},
          {"tier_note", d.tier_note}};
}

}  // namespace detail
}  // namespace ortfleet
