#pragma once
// Bringing sessions up inside this process: the sequential and threads strategies, and the
// overlapped start that the fleet strategy runs (in this process, or in each worker process).
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ortfleet/base/error.hpp"
#include "ortfleet/engine/devices.hpp"
#include "ortfleet/engine/options.hpp"
#include "ortfleet/engine/session.hpp"
#include "ortfleet/engine/timeline.hpp"
#include "ortfleet/fleet/device_status.hpp"

namespace ortfleet::detail {

enum class LocalMode { sequential, threads, overlapped };

struct LocalStartPlan {
  std::string model_path;
  std::vector<Device> devices;
  RunConfig config;
  LocalMode mode = LocalMode::overlapped;
  int warmup_runs = 1;
  int64_t dynamic_dim = 1;
  int fleet_size = 1;          ///< sessions in the whole fleet (all processes): sizes thread pools
  std::string ort_library;
  std::string cache_dir;
  std::string profile_dir;
  /// After the start (which fills the cache inline): price the entry against the model, each loaded
  /// as a start loads it, and record what it saves beside it (a background fill's worker does this).
  bool price_cache_entry = false;
};

struct LocalDeviceResult {
  Device device;
  std::unique_ptr<Session> session;
  std::optional<Error> error;  ///< set when the device failed
  int64_t ready_ns = 0;
  std::string profile_path;
  uint64_t memory_bytes = 0;   ///< see DeviceStatus::memory_bytes
};

/// The session `plan` makes on `device` with `config` (model, cache folder, dynamic dims), before the
/// model's bytes and profiling are added.
SessionSpec session_spec(const LocalStartPlan& plan, const Device& device, const RunConfig& config);

/// The status of a device that became ready (state, provider, when, memory, pid of this process).
/// Writes a session's tiered start into its device status (what ready_status() and a status refresh say).
void note_tier(DeviceStatus& s, const SessionTier& tier);
DeviceStatus ready_status(const LocalDeviceResult& result);

/// What preparing the runtime for a plan's devices found: the first error that stops every device
/// (ONNX Runtime or a provider would not load, a provider the config stacks is not in this build), and
/// per device the error of opening it (a GPU's context).
struct PreparedRuntime {
  std::optional<Error> error;
  std::vector<std::optional<Error>> device_errors;  ///< one per plan device
};

/// Everything a session needs before its model, overlapped, through the providers' seam
/// (engine/runtime/execution_provider.hpp): beside ONNX Runtime's load, each provider of the devices'
/// stacks that prepares ahead loads its library (preload) and is registered after it (prepare), and each
/// such device provider starts its driver and opens its devices for the process (CUDA: the EP library,
/// cuInit, each GPU's primary context). What a warm worker has done before any model arrives; repeating
/// it in the same process costs next to nothing. Never throws.
PreparedRuntime prepare_runtime(const LocalStartPlan& plan, Timeline& timeline);

/// Brings every device of the plan to ready. `results` gets one entry per device before any work
/// starts, filled in place; `on_done(i)` is called (from any thread) as device i becomes ready or
/// fails; a failure never stops the other devices. Phases go into `timeline`.
void start_locally(const LocalStartPlan& plan, Timeline& timeline, std::vector<LocalDeviceResult>& results,
                   const std::function<void(size_t)>& on_done);

/// The options the overlapped start tunes when the user left them at their defaults: a session on a
/// device with memory of its own (a GPU) gets a small intra-op pool without spinning (its CPU threads
/// mostly wait for the device), and the fleet's CPU sessions share the cores instead of each claiming all
/// of them; the optimised-model cache is on unless the config says otherwise; the device's own provider
/// tunes its settings (DeviceProvider::tune_for_fleet).
RunConfig tuned_for_fleet(const RunConfig& config, const Device& device, int fleet_size);

}  // namespace ortfleet::detail
