#pragma once
// The client's side of a pool server (ortfleet/fleet/pool_server.hpp), for a Fleet started on it.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fleet/local/local_start.hpp"
#include "fleet/worker/worker_channel.hpp"
#include "process/ipc.hpp"

namespace ortfleet::detail {

struct OpenedDevice {
  std::optional<Error> error;              ///< the device failed to start (the others go on)
  std::unique_ptr<WorkerChannel> channel;  ///< this client's own channel to the device's worker
  std::optional<WorkerReady> ready;
};

struct OpenedOnPool {
  std::unique_ptr<MessageChannel> connection;  ///< to the server, open while the fleet runs
  std::vector<OpenedDevice> devices;           ///< one per plan device, in order
};

/// Connects to the server at `socket_path` and opens the plan's model on each of its devices. Throws
/// ortfleet::Error when no server answers there or it refuses this client.
OpenedOnPool open_on_pool_server(const std::string& socket_path, const LocalStartPlan& plan, double timeout_s);

/// The devices ("cuda:0", "cpu:1") of the pool server answering on `socket_path` within `timeout_s`;
/// nothing when none answers there (no socket, nobody listening, another user's, no reply in time).
std::optional<std::vector<std::string>> live_pool_devices(const std::string& socket_path, double timeout_s);

}  // namespace ortfleet::detail
