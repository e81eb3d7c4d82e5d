#include "ortfleet/fleet/start_report.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "base/environment.hpp"
#include "base/json_errors.hpp"
#include "ortfleet/base/error.hpp"
#include "base/system_paths.hpp"
#include "fleet/worker/wire.hpp"
#include "process/spawn.hpp"

namespace ortfleet {
using nlohmann::json;

StartReport make_start_report(const Fleet& fleet, const std::string& model, int64_t main_ns) {
  StartReport r;
  r.model = model;
  r.strategy = to_string(fleet.strategy());
  r.strategy_reason = fleet.strategy_reason();
  r.strategy_why = fleet.strategy_why();
  r.devices_reason = fleet.devices_reason();
  r.devices = fleet.status();
  r.main_ns = main_ns;
  r.spawn_ns = main_ns;
  if (const auto spawned = detail::env_number(detail::EnvVar::spawn_ns)) r.spawn_ns = static_cast<int64_t>(*spawned);  // checked: a bad one is warned about
  if (r.spawn_ns > main_ns) r.spawn_ns = main_ns;  // a time handed down that lies after main(): not this process's spawn
  r.timeline = fleet.timeline();
  r.timeline.set_origin_ns(r.spawn_ns);
  if (r.spawn_ns < main_ns) r.timeline.add({phase::process_start, "process", r.spawn_ns, main_ns, 0, {}});
  // From main() to the first phase: ortfleet's own set-up (its arguments, config and devices, a pool
  // probed), said so that no millisecond of the start goes unattributed.
  int64_t first_ns = INT64_MAX;
  for (const auto& e : r.timeline.events()) {
    if (e.name != phase::process_start && e.start_ns >= main_ns) first_ns = std::min(first_ns, e.start_ns);
  }
  if (first_ns != INT64_MAX && first_ns > main_ns) r.timeline.add({phase::setup, "process", main_ns, first_ns, 0, {}});
  r.all_ready = std::all_of(r.devices.begin(), r.devices.end(), [](const DeviceStatus& d) { return d.state == DeviceState::ready; });
  r.ready_ns = main_ns;
  for (const auto& e : r.timeline.events()) {
    if (e.name == std::string(phase::ready)) r.ready_ns = std::max(r.ready_ns, e.end_ns);
  }
  // A session a pool held already has no ready phase: it was ready when its worker answered (the
  // monotonic clock is the machine's, so a worker's reading compares with ours).
  for (const auto& d : r.devices) {
    if (d.state == DeviceState::ready) r.ready_ns = std::max(r.ready_ns, d.ready_ns);
  }
  if (!r.all_ready) r.ready_ns = std::max(r.ready_ns, monotonic_ns());
  return r;
}

std::string StartReport::to_json() const {
  json devices_json = json::array();
  for (const auto& d : devices) devices_json.push_back(detail::status_to_json(d));
  return json{{"ortfleet_start", 1},
              {"model", model},
              {"strategy", strategy},
              {"strategy_reason", strategy_reason},
              {"strategy_why", to_string(strategy_why)},
              {"devices_reason", devices_reason},
              {"devices", devices_json},
              {"spawn_ns", spawn_ns},
              {"main_ns", main_ns},
              {"ready_ns", ready_ns},
              {"wall_ms", wall_ms()},
              {"all_ready", all_ready},
              {"timeline", json::parse(timeline.to_json())}}
      .dump(-1, ' ', false, json::error_handler_t::replace);  // a model path of invalid UTF-8 (any bytes name a file): U+FFFD, not an exception
}

StartReport StartReport::from_json(const std::string& text) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for a number too large (1e999)
    throw Error("malformed start report: " + detail::json_error_text(e), "It should be one line from 'ortfleet start --ready-line'");
  }
  try {
    if (j.value("ortfleet_start", 0) != 1) throw Error("not a start report (no \"ortfleet_start\": 1)");
    StartReport r;
    r.model = j.at("model").get<std::string>();
    r.strategy = j.at("strategy").get<std::string>();
    r.strategy_reason = j.value("strategy_reason", "");  // the Python anchors print none
    r.strategy_why = parse_strategy_why(j.value("strategy_why", "as_asked"));
    r.devices_reason = j.value("devices_reason", "");
    r.spawn_ns = j.at("spawn_ns").get<int64_t>();
    r.main_ns = j.at("main_ns").get<int64_t>();
    r.ready_ns = j.at("ready_ns").get<int64_t>();
    r.all_ready = j.at("all_ready").get<bool>();
    for (const auto& d : j.at("devices")) r.devices.push_back(detail::status_from_json(d));
    r.timeline = Timeline::from_json(j.at("timeline").dump());
    if (r.ready_ns < r.spawn_ns) throw Error("ready_ns lies before spawn_ns");
    return r;
  } catch (const json::exception& e) {
    throw Error("malformed start report: " + detail::json_error_text(e), "It should be one line from 'ortfleet start --ready-line'");
  }
}

}  // namespace ortfleet
