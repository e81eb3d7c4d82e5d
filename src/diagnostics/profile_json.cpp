// A profile report as JSON (profile --json): its phases, nodes, floor and timeline, for programs and
// for `ortfleet report`.
#include <nlohmann/json.hpp>
#include <string>

#include "ortfleet/diagnostics/profile.hpp"

namespace ortfleet {
using nlohmann::json;

namespace {
json shape_switch_json(const ShapeSwitchCost& c) {
  return {{"call_ms", c.call_ms}, {"steady_call_ms", c.steady_call_ms}, {"cost_ms", c.cost_ms}};
}

/// The floor's terms and the speeds they came from.
json floor_json(const ProfileReport& r) {
  json terms = json::array();
  for (const auto& t : r.floor) {
    terms.push_back({{"name", t.name}, {"label", t.label}, {"floor_ms", t.floor_ms}, {"measured_ms", t.measured_ms},
                     {"ratio", t.ratio()}, {"basis", t.basis}});
  }
  return json{{"terms", terms},
              {"upload_gb_per_s", r.speeds.upload_gb_per_s},
              {"read_gb_per_s", r.speeds.read_gb_per_s},
              {"cuda_init_ms", r.speeds.cuda_init_ms},
              {"cuda_context_ms", r.speeds.cuda_context_ms}};
}
}  // namespace

std::string ProfileReport::to_json() const {
  json phases_json = json::array();
  for (const auto& p : phases) {
    phases_json.push_back({{"name", p.name}, {"label", p.label}, {"start_ms", p.start_ms}, {"ms", p.ms}, {"share", p.share}, {"detail", p.detail},
                           {"advice", p.advice}, {"parent", p.parent}, {"actionable", p.actionable}});
  }
  json transformers_json = json::array();
  for (const auto& [n, ms] : transformers) transformers_json.push_back({{"name", n}, {"ms", ms}});
  json nodes_json = json::array();
  for (const auto& n : nodes) {
    nodes_json.push_back({{"node", n.node}, {"op", n.op}, {"provider", n.provider}, {"first_ms", n.first_ms}, {"steady_ms", n.steady_ms}});
  }
  json fleet = nullptr;
  if (fleet_driver.measured() || !fleet_error.empty()) {
    fleet = {{"devices", fleet_devices}, {"error", fleet_error}};
    if (fleet_driver.measured()) fleet["driver_start"] = json::parse(fleet_driver.to_json());
  }
  return json{{"ortfleet_profile", 1},
              {"fleet", fleet},
              {"model", model},
              {"device", device},
              {"config", json::parse(config.to_json())},
              {"wall_ms", wall_ms},
              {"attributed_ms", attributed_ms},
              {"attributed_share", attributed_share()},
              {"phases", phases_json},
              {"top_costs", top_costs},
              {"dynamic_dims", dynamic_dims},
              {"shapes_advice", shapes_advice},
              {"graph_transformers", transformers_json},
              {"nodes_first_run", nodes_json},
              {"conv_nodes", conv_nodes},
              {"conv_first_run_ms", conv_first_ms},
              {"conv_steady_ms", conv_steady_ms},
              {"placement", placement},
              {"cpu_fallback_ops", cpu_fallback},
              {"memcpy_nodes", memcpy_nodes},
              {"initializer_bytes", initializer_bytes},
              {"upload_gb_per_s", upload_gb_per_s},
              {"steady_p50_ms", steady_p50_ms},
              {"steady_p99_ms", steady_p99_ms},
              {"ort_profile", ort_profile_path},
              {"timeline", json::parse(timeline.to_json())},
              {"floor", floor_json(*this)},
              {"shape_switch", shape_switch_json(shape_switch)},
              {"floor_ms", floor_ms},
              {"floor_ratio", floor_ratio()}}
      .dump(2);
}

}  // namespace ortfleet
