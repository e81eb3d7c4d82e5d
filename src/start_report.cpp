#include <algorithm>
#include <nlohmann/json.hpp>

#include "ortfleet/error.hpp"
#include "ortfleet/fleet.hpp"
#include "system_paths.hpp"

namespace ortfleet {
using nlohmann::json;

StartReport make_start_report(const Fleet& fleet, const std::string& model, int64_t main_ns) {
  StartReport r;
  r.model = model;
  r.strategy = to_string(fleet.strategy());
  r.devices = fleet.status();
  r.main_ns = main_ns;
  r.spawn_ns = main_ns;
  if (auto v = detail::env_var("ORTFLEET_SPAWN_NS")) r.spawn_ns = std::stoll(*v);
  r.timeline = fleet.timeline();
  r.timeline.set_origin_ns(r.spawn_ns);
  if (r.spawn_ns < main_ns) r.timeline.add({phase::process_start, "process", r.spawn_ns, main_ns, 0, {}});
  r.all_ready = std::all_of(r.devices.begin(), r.devices.end(), [](const DeviceStatus& d) { return d.state == DeviceState::ready; });
  r.ready_ns = main_ns;
  for (const auto& e : r.timeline.events()) {
    if (e.name == std::string(phase::ready)) r.ready_ns = std::max(r.ready_ns, e.end_ns);
  }
  if (!r.all_ready) r.ready_ns = std::max(r.ready_ns, monotonic_ns());
  return r;
}

std::string StartReport::to_json() const {
  json devices_json = json::array();
  for (const auto& d : devices) {
    devices_json.push_back({{"device", d.device.to_string()}, {"state", ortfleet::to_string(d.state)}, {"error", d.error},
                            {"provider", d.provider}, {"provider_note", d.provider_note}, {"ready_ms", d.ready_ms}, {"ready_ns", d.ready_ns},
                            {"pid", d.pid}, {"profile_path", d.profile_path},
                            {"memory_bytes", d.memory_bytes}});
  }
  return json{{"ortfleet_start", 1},
              {"model", model},
              {"strategy", strategy},
              {"devices", devices_json},
              {"spawn_ns", spawn_ns},
              {"main_ns", main_ns},
              {"ready_ns", ready_ns},
              {"wall_ms", wall_ms()},
              {"all_ready", all_ready},
              {"timeline", json::parse(timeline.to_json())}}
      .dump();
}

StartReport StartReport::from_json(const std::string& text) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    throw Error(std::string("malformed start report: ") + e.what(), "It should be one line from 'ortfleet start --ready-line'");
  }
  try {
    if (j.value("ortfleet_start", 0) != 1) throw Error("not a start report (no \"ortfleet_start\": 1)");
    StartReport r;
    r.model = j.at("model").get<std::string>();
    r.strategy = j.at("strategy").get<std::string>();
    r.spawn_ns = j.at("spawn_ns").get<int64_t>();
    r.main_ns = j.at("main_ns").get<int64_t>();
    r.ready_ns = j.at("ready_ns").get<int64_t>();
    r.all_ready = j.at("all_ready").get<bool>();
    for (const auto& d : j.at("devices")) {
      DeviceStatus s;
      s.device = Device::parse(d.at("device").get<std::string>());
      const std::string state = d.at("state").get<std::string>();
      s.state = state == "ready" ? DeviceState::ready : state == "stopped" ? DeviceState::stopped : DeviceState::failed;
      s.error = d.value("error", "");
      s.provider = d.value("provider", "");
      s.provider_note = d.value("provider_note", "");
      s.ready_ms = d.value("ready_ms", 0.0);
      s.ready_ns = d.value("ready_ns", int64_t{0});
      s.pid = d.value("pid", 0);
      s.profile_path = d.value("profile_path", "");
      s.memory_bytes = d.value("memory_bytes", uint64_t{0});
      r.devices.push_back(std::move(s));
    }
    r.timeline = Timeline::from_json(j.at("timeline").dump());
    if (r.ready_ns < r.spawn_ns) throw Error("ready_ns lies before spawn_ns");
    return r;
  } catch (const json::exception& e) {
    throw Error(std::string("malformed start report: ") + e.what(), "It should be one line from 'ortfleet start --ready-line'");
  }
}

}  // namespace ortfleet
