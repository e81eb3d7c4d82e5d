#pragma once
// A pool server's requests as read from a client's message (fleet/pool/pool_protocol.hpp): what a
// client of any kind may send is checked here, field by field, and refused with one line that says
// what is wrong, so that the server answers that client and goes on serving everyone else. Fuzzed
// (tests/fuzz: "pool_request").
#include <nlohmann/json.hpp>
#include <string>

#include "fleet/local/local_start.hpp"

namespace ortfleet::detail {

/// {"op":"open", plan, timeout_s}: a model to start on the pool's devices.
struct OpenRequest {
  LocalStartPlan plan;
  double timeout_s = 2.0 * 60 * 60;  ///< how long the client waits for the start; a positive number of seconds, a week at most
};
OpenRequest read_open_request(const nlohmann::json& body);

/// {"op":"hand_over", pid, device, visible_devices, model}: a job's own worker (its channel and crash
/// pipe come as the message's two descriptors).
struct HandOverRequest {
  int pid = -1;
  Device device;
  std::string visible_devices;
  std::string model;
};
HandOverRequest read_hand_over_request(const nlohmann::json& body);

/// {"op":"worker_killed", pid, what}: a job ends worker `pid`, whose `what` ("run", "start") missed its deadline.
struct WorkerKilledNote {
  int pid = -1;
  std::string what;
};
WorkerKilledNote read_worker_killed_note(const nlohmann::json& body);

/// {"op":"restore_ahead", devices, model}: a job's client will use these devices, and this model ("":
/// it does not say).
struct RestoreAheadRequest {
  std::vector<Device> devices;
  std::string model;
};
RestoreAheadRequest read_restore_ahead_request(const nlohmann::json& body);

}  // namespace ortfleet::detail
