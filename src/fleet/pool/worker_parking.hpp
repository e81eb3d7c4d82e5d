#pragma once
// Parked workers: while nobody uses the pool, each GPU worker's CUDA state (its sessions' weights,
// contexts, loaded kernels, cuDNN's plans) is checkpointed by the driver into the worker's own host
// memory (engine/cuda/process_checkpoint.hpp), so that an idle pool holds no GPU memory; it is restored
// before a job's request reaches the worker, resident sessions intact. A worker that cannot park (CPU
// workers, a driver without the API, memory the driver cannot checkpoint) stays as it is, with why.
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "fleet/worker/worker_channel.hpp"

namespace ortfleet::detail {

class WorkerParking {
 public:
  /// Why workers on `device` cannot park on this machine, or nothing when they can.
  static std::optional<std::string> unavailable(const Device& device);

  struct Outcome {
    size_t parked = 0;                ///< workers parked by this call
    std::vector<std::string> kept;    ///< "cuda:0 (pid 812): why it stays", one per worker that did not park
    double wall_ms = 0;
  };
  /// Parks every worker of `workers` that runs, is not parked and has not refused before, all at once;
  /// `status` is what each said of its sessions just before (shown while it is parked).
  Outcome park(const std::vector<std::shared_ptr<WorkerProcess>>& workers, const std::vector<nlohmann::json>& status,
               double lock_timeout_s);
  /// Restores `worker` if it is parked (waiting for a park in progress first). Throws ortfleet::Error
  /// when the driver cannot: the worker is then unusable and must be replaced.
  void unpark(const WorkerProcess& worker);

  struct Seen {
    bool parked = false;
    bool refused = false;    ///< it did not park, and is not tried again until it has been used
    std::string note;        ///< why it does not park, when it did not
    nlohmann::json status;   ///< its sessions as they were when it parked
    double parked_s = 0;     ///< for how long it has been parked
  };
  Seen seen(const WorkerProcess& worker) const;
  /// Forgets a worker that is gone.
  void forget(const WorkerProcess& worker);

 private:
  struct Entry {
    std::mutex busy;    // held while it parks or restores
    std::mutex fields;  // the fields below (read by status while busy is held)
    bool parked = false;
    bool refused = false;  // the driver refused it: not tried again until it has been used
    std::string note;
    nlohmann::json status;
    int64_t since_ns = 0;
  };
  std::shared_ptr<Entry> entry(const WorkerProcess& worker);
  std::shared_ptr<Entry> find(const WorkerProcess& worker) const;

  mutable std::mutex mutex_;
  std::map<const WorkerProcess*, std::shared_ptr<Entry>> entries_;
};

/// The resident set of process `pid` in bytes (VmRSS), 0 when it cannot be read: what a parked worker
/// holds in host memory.
uint64_t resident_bytes(int pid);

}  // namespace ortfleet::detail
