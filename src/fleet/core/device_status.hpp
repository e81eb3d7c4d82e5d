#pragma once
// A device's status as JSON: what `ortfleet start --json` prints of each device and what a worker tells
// its parent (the public side: ortfleet/fleet/device_status.hpp; reading one back is the wire's,
// fleet/worker/wire.hpp: status_from_json).
#include <nlohmann/json.hpp>

#include "ortfleet/fleet/device_status.hpp"

namespace ortfleet::detail {

nlohmann::json status_to_json(const DeviceStatus& status);

}  // namespace ortfleet::detail
