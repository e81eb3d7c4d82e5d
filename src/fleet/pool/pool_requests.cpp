#include "fleet/pool/pool_requests.hpp"

#include <fmt/format.h>

#include "fleet/worker/wire.hpp"
#include "ortfleet/base/error.hpp"

namespace ortfleet::detail {
namespace {
constexpr double kMaxTimeoutS = 7 * 24 * 3600.0;
constexpr const char* kProtocolHint = "Send the pool protocol's requests (fleet/pool/pool_protocol.hpp)";

[[noreturn]] void malformed(const std::string& request, const std::string& why) {
  throw Error("malformed " + request + " request: " + why, kProtocolHint);
}

const nlohmann::json& field(const nlohmann::json& body, const char* name, const std::string& request) {
  const auto it = body.find(name);
  if (it == body.end()) malformed(request, std::string("it has no ") + name);
  return *it;
}

std::string text(const nlohmann::json& body, const char* name, const std::string& request) {
  const auto& value = field(body, name, request);
  if (!value.is_string()) malformed(request, std::string(name) + " must be a string (got " + value.dump() + ")");
  return value.get<std::string>();
}

/// The process id field of a `request`.
int process_id(const nlohmann::json& body, const std::string& request) {
  const auto& pid = field(body, "pid", request);
  if (!pid.is_number_integer() || pid.get<int64_t>() <= 1 || pid.get<int64_t>() > (int64_t{1} << 22)) {
    malformed(request, "pid must be a process id (got " + pid.dump() + ")");
  }
  return pid.get<int>();
}
}  // namespace

OpenRequest read_open_request(const nlohmann::json& body) {
  OpenRequest open;
  if (const auto it = body.find("timeout_s"); it != body.end()) {
    if (!it->is_number() || !(it->get<double>() > 0) || !(it->get<double>() <= kMaxTimeoutS)) {
      malformed("open", fmt::format("timeout_s must be a number of seconds above 0 and at most {:g} (got {})", kMaxTimeoutS, it->dump()));
    }
    open.timeout_s = it->get<double>();
  }
  open.plan = plan_from_json(field(body, "plan", "open"));  // throws ortfleet::Error naming what is wrong
  if (open.plan.devices.empty()) malformed("open", "its plan names no device");
  if (open.plan.model_path.empty()) malformed("open", "its plan names no model");
  return open;
}


HandOverRequest read_hand_over_request(const nlohmann::json& body) {
  HandOverRequest hand;
  hand.pid = process_id(body, "hand_over");
  hand.device = Device::parse(text(body, "device", "hand_over"));
  if (const auto it = body.find("visible_devices"); it != body.end()) hand.visible_devices = text(body, "visible_devices", "hand_over");
  hand.model = text(body, "model", "hand_over");
  if (hand.model.empty()) malformed("hand_over", "it names no model");
  return hand;
}

WorkerKilledNote read_worker_killed_note(const nlohmann::json& body) {
  WorkerKilledNote note;
  note.pid = process_id(body, "worker_killed");
  note.what = text(body, "what", "worker_killed");
  if (note.what != "run" && note.what != "start") malformed("worker_killed", "what must be \"run\" or \"start\" (got \"" + note.what + "\")");
  return note;
}

RestoreAheadRequest read_restore_ahead_request(const nlohmann::json& body) {
  RestoreAheadRequest ahead;
  const auto& devices = field(body, "devices", "restore_ahead");
  if (!devices.is_array() || devices.empty() || devices.size() > 4096) malformed("restore_ahead", "devices must be a list of devices (got " + devices.dump() + ")");
  for (const auto& d : devices) {
    if (!d.is_string()) malformed("restore_ahead", "each device must be a string (got " + d.dump() + ")");
    ahead.devices.push_back(Device::parse(d.get<std::string>()));  // throws ortfleet::Error naming what is wrong
  }
  if (body.contains("model")) ahead.model = text(body, "model", "restore_ahead");
  if (ahead.model.find('\0') != std::string::npos) malformed("restore_ahead", "its model holds a NUL byte");
  return ahead;
}

}  // namespace ortfleet::detail
