#pragma once
// Parked workers: while nobody uses the pool, each GPU worker's CUDA state (its sessions' weights,
// contexts, loaded kernels, cuDNN's plans) is checkpointed by the driver into the worker's own host
// memory (engine/cuda/process_checkpoint.hpp), so that an idle pool holds no GPU memory; it is restored
// before a job's request reaches the worker, resident sessions intact. A worker that cannot park (CPU
// workers, a driver without the API, memory the driver cannot checkpoint) stays as it is, with why.
// Which worker parks, and when, the pool's core decides (pool_core.hpp); this carries it out through the
// device's provider.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "fleet/worker/worker_channel.hpp"
#include "ortfleet/fleet/pool_server.hpp"

namespace ortfleet::detail {

class WorkerParking {
 public:
  /// Why workers on `device` cannot park on this machine, or nothing when they can.
  static std::optional<std::string> unavailable(const Device& device);
  /// Moves `worker`'s device state into its host memory; `lock_timeout_s`: how long the GPU work it has
  /// submitted may take. Throws ortfleet::Error saying why it did not park.
  static void park(const WorkerProcess& worker, double lock_timeout_s);
  /// Restores a parked `worker`. Throws ortfleet::Error when the driver cannot: the worker is then
  /// unusable and must be replaced.
  static void unpark(const WorkerProcess& worker);
};

/// Whether a session made from its model cache entry holds less than one made from the model itself on
/// `device`, so that the pool makes a job's session again from the entry once idle: on a device with
/// memory of its own (a GPU: about 1.4 against 2.7 GiB for the 1.28 GB transformer on an H100), not on the
/// CPU, where one made from the model keeps its weights mapped from the model's file (measured: PaddleOCR
/// v4's recogniser 42 MB of PSS made from the model, 83 MB from its entry). CPU workers that park for the
/// tests (ORTFLEET_TEST_PARK_CPU) count as the former.
bool entry_holds_less(const Device& device);

/// Whether the idle workers of a pool on `devices` park after `park_after_s`, or why not.
ParkingStatus parking_status(const std::vector<Device>& devices, double park_after_s);
nlohmann::json to_json(const ParkingStatus& parking);
/// Read back; a value that is not one (an older pool's words) is "unavailable" with those words.
ParkingStatus parking_from_json(const nlohmann::json& j);

}  // namespace ortfleet::detail
